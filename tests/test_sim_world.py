"""The demo world: determinism and on-disk formats (a seconds-long recipe), quality (the cached world)."""

from __future__ import annotations

import glob
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from eagle3_tui.eagle.drafter import Eagle3Drafter
from eagle3_tui.sim.target import TargetModel
from eagle3_tui.sim.world import World, build_world, ensure_world, small_recipe

SGLANG_DRAFT_NAMES = {
    "fc.weight",
    "midlayer.hidden_norm.weight",
    "midlayer.input_layernorm.weight",
    "midlayer.post_attention_layernorm.weight",
    "midlayer.self_attn.q_proj.weight",
    "midlayer.self_attn.k_proj.weight",
    "midlayer.self_attn.v_proj.weight",
    "midlayer.self_attn.o_proj.weight",
    "midlayer.mlp.gate_proj.weight",
    "midlayer.mlp.up_proj.weight",
    "midlayer.mlp.down_proj.weight",
    "norm.weight",
    "lm_head.weight",
    "d2t",
    "t2d",
}


@pytest.fixture(scope="module")
def two_small_worlds(tmp_path_factory: pytest.TempPathFactory) -> tuple[World, World, World]:
    base = tmp_path_factory.mktemp("worlds")
    quiet = lambda msg: None  # noqa: E731
    a = build_world(base / "a", recipe=small_recipe(0), progress=quiet)
    b = build_world(base / "b", recipe=small_recipe(0), progress=quiet)
    c = build_world(base / "c", recipe=small_recipe(1), progress=quiet)
    return a, b, c


def _all_tensors(world: World) -> dict[str, torch.Tensor]:
    out = {}
    for part in ("target", "draft"):
        for k, v in load_file(str(Path(world.root) / part / "model.safetensors")).items():
            out[f"{part}/{k}"] = v
    sample = torch.load(Path(world.data_dir) / "data_0.pt", weights_only=True)
    for i, h in enumerate(sample["hidden_states"]):
        out[f"data/{i}"] = h
    return out


def test_same_seed_same_tensors_other_seed_differs(two_small_worlds: tuple[World, World, World]) -> None:
    a, b, c = two_small_worlds
    ta, tb, tc = _all_tensors(a), _all_tensors(b), _all_tensors(c)
    assert ta.keys() == tb.keys()
    for name in ta:
        assert torch.equal(ta[name], tb[name]), name
    assert not torch.equal(ta["target/lm_head.weight"], tc["target/lm_head.weight"])


def test_formats_on_disk(two_small_worlds: tuple[World, World, World]) -> None:
    w = two_small_worlds[0]
    n, hidden = w.num_layers, w.hidden_size
    assert w.slot_boundaries == (0, 2, n // 2, n - 3)
    tcfg = json.loads((w.target_dir / "config.json").read_text())
    assert tcfg["num_hidden_layers"] == n and tcfg["architectures"] == ["LlamaForCausalLM"]
    dcfg = json.loads((w.draft_dir / "config.json").read_text())
    assert dcfg["architectures"] == ["LlamaForCausalLMEagle3"]
    assert "eagle_config" not in dcfg and "eagle_aux_hidden_state_layer_ids" not in dcfg
    assert dcfg["draft_vocab_size"] < dcfg["vocab_size"]
    draft = load_file(str(w.draft_dir / "model.safetensors"))
    assert set(draft) == SGLANG_DRAFT_NAMES
    assert draft["fc.weight"].shape == (hidden, 3 * hidden)
    assert draft["midlayer.self_attn.q_proj.weight"].shape[1] == 2 * hidden
    d2t = draft["d2t"]
    targets = d2t + torch.arange(d2t.numel())
    assert targets.min() >= 0 and targets.max() < dcfg["vocab_size"] and bool((targets.diff() > 0).all())
    assert draft["t2d"].sum() == dcfg["draft_vocab_size"] and bool(draft["t2d"][targets].all())
    # speculators v1
    v1 = torch.load(w.data_dir / "data_0.pt", weights_only=True)
    assert set(v1) == {"input_ids", "loss_mask", "hidden_states"}
    assert len(v1["hidden_states"]) == 4 and v1["hidden_states"][0].shape == (
        v1["input_ids"].shape[0],
        hidden,
    )
    assert (w.data_dir / "sample_lengths.json").exists()
    assert sorted(map(str, Path(w.data_dir).glob("data_*.pt"))) == sorted(glob.glob(w.data_glob))
    # SpecForge: aux = cat of the three trained slots; hidden_state = the final normed state
    sf = torch.load(w.specforge_dir / "data_0.ckpt", weights_only=True)
    held = torch.load(w.heldout_dir / "data_0.pt", weights_only=True)
    t = held["input_ids"].shape[0]
    assert sf["aux_hidden_state"].shape == (1, t, 3 * hidden) and sf["hidden_state"].shape == (1, t, hidden)
    assert torch.equal(sf["aux_hidden_state"][0, :, :hidden], held["hidden_states"][0])
    # speculators safetensors: [T, slots, H] + token_ids
    st = load_file(str(w.speculators_st_dir / "hidden_states" / "hs_0.safetensors"))
    assert st["hidden_states"].shape == (t, 4, hidden) and torch.equal(st["token_ids"], held["input_ids"])
    assert torch.equal(st["hidden_states"][:, 3], held["hidden_states"][3])


def test_ensure_world_builds_once_for_concurrent_callers(tmp_path: Path) -> None:
    messages: list[str] = []
    results: list[World] = []
    recipe = small_recipe(3)

    def call() -> None:
        results.append(ensure_world(tmp_path, recipe=recipe, progress=messages.append))

    threads = [threading.Thread(target=call) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(results) == 2 and results[0].root == results[1].root
    assert sum("training the target" in m for m in messages) == 1
    assert results[0].root.name.startswith("world-") and (results[0].root / "world.json").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".world-")] == []
    again = ensure_world(tmp_path, recipe=recipe, progress=messages.append)
    assert again.root == results[0].root and sum("training the target" in m for m in messages) == 1
    # a cached world is found without importing torch (the UI calls this before its first frame)
    code = (
        "import sys; from eagle3_tui.sim.world import ensure_world, small_recipe; "
        f"w = ensure_world({str(tmp_path)!r}, recipe=small_recipe(3)); "
        "print(w.root, 'torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == [str(results[0].root), "False"]


def _evaluate(world: World) -> dict[str, dict[str, float]]:
    """Recompute quality from the files on disk: held-out data, the draft, the target's greedy tokens."""
    torch.set_num_threads(1)  # the machine is shared; more threads only contend
    tcfg = json.loads((world.target_dir / "config.json").read_text())
    target = TargetModel.from_tensors(tcfg, load_file(str(world.target_dir / "model.safetensors")))
    dcfg = json.loads((world.draft_dir / "config.json").read_text())
    draft = Eagle3Drafter.from_tensors(
        dcfg, load_file(str(world.draft_dir / "model.safetensors")), target.model.embed_tokens.weight
    )
    files = sorted(world.heldout_dir.glob("data_*.pt"))
    samples = [torch.load(f, weights_only=True) for f in files]
    ids = torch.stack([s["input_ids"] for s in samples])
    slots = [torch.stack([s["hidden_states"][i] for s in samples]).float() for i in range(4)]
    with torch.no_grad():
        logits, _ = target(ids)
    greedy = logits.argmax(-1)
    out = {}
    wirings = {"trained": world.trained_boundaries, "default": world.default_boundaries}
    steps = 3
    for name, wiring in wirings.items():
        aux = torch.cat([slots[world.slot_boundaries.index(b)] for b in wiring], -1)[:, :-1]
        with torch.no_grad():
            outs = draft.chain_forward(ids[:, 1:], aux, steps)
        t = ids.shape[1] - 1 - steps
        run = torch.ones(ids.shape[0], t, dtype=torch.bool)
        accept = 1.0
        for s, lg in enumerate(outs):
            ok = draft.to_target_ids(lg.argmax(-1))[:, :t] == greedy[:, 1 + s : 1 + s + t]
            if s == 0:
                top1 = ok.float().mean().item()
            run &= ok
            accept += run.float().mean().item()
        out[name] = {"top1": top1, "accept": accept}
    return out


@pytest.mark.slow
def test_demo_world_reaches_the_quality_bar(demo_world: World) -> None:
    q = _evaluate(demo_world)
    trained, default = q["trained"], q["default"]
    assert trained["top1"] >= 0.6, q
    assert default["top1"] <= trained["top1"] - 0.12, q
    assert default["accept"] <= trained["accept"] - 0.4, q
    # the embedding slot's mean norm is far below the layer slots' (the seeds' evidence)
    sample = torch.load(sorted(demo_world.heldout_dir.glob("data_*.pt"))[0], weights_only=True)
    norms = [h.float().norm(dim=-1).mean().item() for h in sample["hidden_states"]]
    assert norms[0] * 10 < min(norms[1:]), norms
    # world.json carries the build's own measurements
    assert demo_world.metrics["trained"]["top1"] >= 0.6
    assert demo_world.fix_layer_ids == [-1, 1, 5]


def test_world_cli_builds_a_small_world(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from eagle3_tui.sim.world import main

    assert main(["build", str(tmp_path / "w"), "--small", "--seed", "4"]) == 0
    out = capsys.readouterr().out
    assert "[world] target done" in out and out.strip().endswith(str(tmp_path / "w"))
    meta = json.loads((tmp_path / "w" / "world.json").read_text())
    assert meta["slot_boundaries"] == [0, 2, 4, 5]
    assert meta["fix_layer_ids"] == [b - 1 for b in meta["slot_boundaries"][:-1]]
    assert World.load(tmp_path / "w").draft_dir.is_dir()
