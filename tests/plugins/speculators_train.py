"""A draft trained by the real speculators 0.9.0 on the demo world, on this CPU (the real_vllm lane).

`train_speculators_draft(world, dest)`:
1. the training data as speculators' current layout: `hidden_states/hs_{i}.safetensors` ([T, 4, H]:
   vLLM's default aux boundaries (2, N//2, N-3) and the final layer N, pre-norm, as vLLM's
   extract_hidden_states writes them) from the world's own target over the world's sequences (vLLM's
   connector crashes on CPU: research/real_engines.md), and the token ids and loss masks as given;
2. `speculators train` in `.venv-vllm` (tests/plugins/speculators_cpu.py: the Arrow dataset, then the
   trainer on the CPU), eager loss and SDPA attention, its defaults otherwise (norm_before_fc and
   norm_output on: what SGLang 0.5.6 drops), the world draft's vocabulary mapping.
Returns the last epoch's folder (config.json, model.safetensors, val_metrics.json) and the data root.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.plugins.real_vllm import vllm_env, vllm_python

RUNNER = Path(__file__).with_name("speculators_cpu.py")
EPOCHS = 1  # one epoch: the lane checks the check against the trainer's own numbers and vLLM's, which hold for any epoch (about 4 min of wall per epoch at a load of 13 on 2 cores, 320 sequences x 128 tokens)


@dataclass(frozen=True)
class TrainedDraft:
    draft: Path  # the last epoch's folder
    data: Path  # the data root (Arrow dataset + hidden_states/)
    val_metrics: dict[str, Any]
    aux_boundaries: tuple[int, ...]
    log: str


def write_data(world: Any, dest: Path) -> tuple[Path, tuple[int, ...]]:
    """The data root and prep.json (rows, d2t, t2d) from the world's sequences and target."""
    import torch
    from safetensors.torch import load_file, save_file

    from eagle3_tui.sim.target import TargetModel

    root = Path(world.root)
    tcfg = json.loads((root / "target" / "config.json").read_text())
    target = TargetModel.from_tensors(tcfg, load_file(str(root / "target" / "model.safetensors")))
    n = int(tcfg["num_hidden_layers"])
    aux = (2, n // 2, n - 3)
    files = sorted((root / "data").glob("data_*.pt"), key=lambda p: int(p.stem.split("_")[1]))
    samples = [torch.load(f, weights_only=True) for f in files]
    data = dest / "data"
    hs_dir = data / "hidden_states"
    hs_dir.mkdir(parents=True, exist_ok=True)
    rows = []
    with torch.inference_mode():
        for start in range(0, len(samples), 32):
            chunk = samples[start : start + 32]
            ids = torch.stack([s["input_ids"] for s in chunk])
            _, bounds = target(ids)
            stacked = torch.stack([bounds[b] for b in (*aux, n)], dim=2).to(torch.bfloat16)
            for j, s in enumerate(chunk):
                save_file({"hidden_states": stacked[j].contiguous(), "token_ids": s["input_ids"].clone()},
                          str(hs_dir / f"hs_{start + j}.safetensors"))
                rows.append({"input_ids": s["input_ids"].tolist(), "loss_mask": s["loss_mask"].tolist()})
    vocab = load_file(str(root / "draft" / "model.safetensors"))
    prep = dest / "prep.json"
    prep.write_text(json.dumps({"rows": rows, "d2t": vocab["d2t"].tolist(), "t2d": vocab["t2d"].bool().tolist()}))
    return data, aux


def train_speculators_draft(world: Any, dest: Path, verifier: Path, epochs: int = EPOCHS) -> TrainedDraft:
    """`verifier`: the target as vLLM serves it (the draft config names it; speculators reads its tokenizer)."""
    data, aux = write_data(world, dest)
    out = dest / "out"
    eos = json.loads((Path(verifier) / "config.json").read_text()).get("eos_token_id", 0)
    argv = [
        str(vllm_python()), str(RUNNER), str(dest / "prep.json"), str(data), "--",
        "train", "--verifier-name-or-path", str(verifier), "--mask-token-id", str(eos),
        "--data-path", str(data), "--save-path", str(out), "--epochs", str(epochs),
        "--target-layer-ids", *map(str, aux), "--d2t-path", str(data / "d2t.npy"), "--t2d-path", str(data / "t2d.npy"),
        "--loss-implementation", "eager", "--draft-attn-impl", "sdpa", "--num-workers", "0",
        "--total-seq-len", "1024", "--lr", "3e-3", "--seed", "0", "--no-resume-from-checkpoint",
    ]
    env = vllm_env(dest / "cache")
    env.update(OMP_NUM_THREADS="2")
    done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=dest, timeout=900)
    log = done.stdout + done.stderr
    (dest / "train.log").write_text(log)
    if done.returncode != 0:
        raise AssertionError(f"speculators train failed ({done.returncode}):\n{log[-4000:]}")
    last = out / str(epochs - 1)
    return TrainedDraft(last, data, json.loads((last / "val_metrics.json").read_text()), aux, log)
