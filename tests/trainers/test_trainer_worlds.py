"""The check on files laid out exactly as SpecForge and speculators write them (tests/trainers/worlds.py
says which of their files each layout follows), with a draft perfect by construction under speculators'
definition and exactly the out-of-vocabulary positions missed under SGLang's and SpecForge's."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from eagle3_tui.eagle import shipped
from tests.bare_python import bare_python
from tests.trainers import worlds as W

N_SAMPLES = 10


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> W.TrainerWorld:
    import torch

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("trainers")
    w = W.build(root, n_samples=N_SAMPLES)
    W.write_specforge(w, root / "specforge-out")
    W.write_specforge(w, root / "specforge-gz", gz=True)
    pytest.importorskip("pyarrow")
    W.write_speculators(w, root / "speculators-out")
    W.write_speculators(w, root / "speculators-noarrow", arrow=False)
    return w


def check(draft: Path, data: Path, target: Path, **kw):
    from eagle3_tui.eagle.accuracy import CheckOptions, run_check

    return run_check(CheckOptions(str(draft), str(data), str(target), steps=W.STEPS, **kw))


def test_specforge_rows_folder_and_its_acc_k(world: W.TrainerWorld) -> None:
    """SpecForge prepare_hidden_states.py's OUT folder (rows_0-2000/data_i.ckpt), SpecForge-exported draft:
    trainer.acc is SpecForge's `_acc_and_loss` per step; served top-1 counts out-of-vocab targets as misses."""
    rep = check(world.sglang_draft, world.root / "specforge-out", world.target)
    assert rep.layout == "specforge" and rep.files_read == N_SAMPLES and rep.label_source == "target"
    assert rep.split == "training" and any("--eval-hidden-states-path" in n for n in rep.notes)
    tr = rep.result("training")
    want_top1 = W.served_top1(world, range(N_SAMPLES), shift=0)
    assert tr.top1 == want_top1 and 0.7 < want_top1 < 0.8  # every 4th position's target is out of vocab
    assert tr.trainer["framework"] == "specforge" and tr.trainer["definition"].startswith("SpecForge acc_k")
    assert tr.trainer["acc"] == W.specforge_acc(world, range(N_SAMPLES))
    assert tr.trainer["acc"][0] == tr.top1  # SpecForge's step 0 is SGLang's definition
    # position T-2 is scored (both trainers score it): per sample T-1 positions minus the masked prompt
    assert tr.positions == N_SAMPLES * (W.T - 1 - W.PROMPT)
    gz = check(world.sglang_draft, world.root / "specforge-gz", world.target).result("training")
    assert (gz.top1, gz.trainer, gz.step_accept) == (tr.top1, tr.trainer, tr.step_accept)


def test_speculators_output_folder_validation_rows(world: W.TrainerWorld) -> None:
    """speculators' OUT (hidden_states/hs_i.safetensors, token_freq.pt, the Arrow dataset): the loss mask
    from Arrow, the validation rows (the last 10%), slot boundaries assumed, boundary N never served."""
    rep = check(world.speculators_draft, world.root / "speculators-out", world.target)
    assert rep.layout == "speculators" and rep.split == "validation"
    assert rep.files_read == 1 and rep.files_total == N_SAMPLES  # row 9 of 10: int(10 * 0.9)
    assert rep.slot_boundaries == [2, 6, 9, 12] and any("assumed the data's slots" in n for n in rep.notes)
    assert rep.label_source == "target"
    val = range(9, 10)
    tr = rep.result("training")
    full, cond = W.speculators_acc(world, val)
    assert tr.trainer["framework"] == "speculators"
    assert tr.trainer["acc"] == full and tr.trainer["cond_acc"] == cond
    assert full[0] == 1.0  # perfect in speculators' draft-vocabulary definition
    assert tr.top1 == W.served_top1(world, val, shift=1) < 0.8  # SGLang: out-of-vocab targets are misses
    assert tr.boundaries == [2, 6, 9]
    for w in rep.wirings:
        assert w.boundaries is None or 12 not in w.boundaries
    assert rep.result("serving default").boundaries == [2, 6, 9] and rep.result("serving default").top1 == tr.top1
    d = rep.to_dict()
    assert d["split"] == "validation"
    for entry in d["wirings"]:
        assert {"top1", "step_accept", "predicted_accept_len", "trainer"} <= set(entry)
    assert set(d["wirings"][0]["trainer"]) >= {"framework", "definition", "acc"}


def test_speculators_without_the_arrow_dataset(world: W.TrainerWorld) -> None:
    rep = check(world.speculators_draft, world.root / "speculators-noarrow", world.target)
    assert rep.split == "training" and rep.files_read == N_SAMPLES
    assert any("every position counts, prompt tokens too" in n for n in rep.notes)
    ones = [m.new_ones(m.shape) for m in world.masks]
    tr = rep.result("training")
    assert tr.top1 == W.served_top1(world, range(N_SAMPLES), shift=1, masks=ones)
    assert tr.trainer["acc"] == W.speculators_acc(world, range(N_SAMPLES), masks=ones)[0]
    assert tr.positions == N_SAMPLES * (W.T - 1)


def test_both_naming_schemes_read_the_same(world: W.TrainerWorld) -> None:
    a = check(world.sglang_draft, world.root / "speculators-out", world.target)
    b = check(world.speculators_draft, world.root / "speculators-out", world.target)
    ra, rb = a.result("training"), b.result("training")
    assert (ra.top1, ra.step_accept, ra.trainer) == (rb.top1, rb.step_accept, rb.trainer)
    kinds_a = {f["kind"] for f in a.findings}
    kinds_b = {f["kind"] for f in b.findings}
    assert "architecture" not in kinds_a and "architecture" in kinds_b
    [arch] = [f for f in b.findings if f["kind"] == "architecture"]
    assert "rename layers.0.* to midlayer.*" in arch["message"] and "Eagle3Speculator" in arch["message"]


def test_a_folder_without_data_is_one_sentence(world: W.TrainerWorld, tmp_path: Path) -> None:
    from eagle3_tui.eagle.checkpoint import BadInput

    shutil.copy(world.root / "speculators-out" / "token_freq.pt", tmp_path / "token_freq.pt")
    with pytest.raises(BadInput) as err:
        check(world.speculators_draft, tmp_path, world.target)
    msg = str(err.value)
    assert msg.startswith(f"{tmp_path} holds no training data: looked for SpecForge rows_*")
    assert len(msg) < 300 and "\n" not in msg


def test_tied_embedding_target(tmp_path: Path) -> None:
    """Qwen3-0.6B / Llama-3.2-1B style: no lm_head.weight; the trainers use embed_tokens as the head."""
    w = W.build(tmp_path, n_samples=3, tied=True)
    W.write_specforge(w, tmp_path / "sf")
    rep = check(w.sglang_draft, tmp_path / "sf", w.target)
    assert rep.label_source == "target" and any("ties its embeddings" in n for n in rep.notes)
    assert rep.result("training").top1 == W.served_top1(w, range(3), shift=0)


def test_as_trained_and_as_served_side_by_side(tmp_path: Path) -> None:
    """A speculators "Eagle 3.1" draft (norm_before_fc: input_norm over the aux states): trained with it,
    served by SGLang 0.5.6 without it. The trainer's metric is the trained forward's (perfect); the served
    numbers are what SGLang runs."""
    from eagle3_tui.eagle.drafter import DraftForward

    spec = W.speculators_config()
    spec["norm_before_fc"] = True
    w = W.build(tmp_path, n_samples=3, fwd=DraftForward(input_norm=True), spec_cfg=spec)
    W.write_specforge(w, tmp_path / "sf")
    rep = check(w.speculators_draft, tmp_path / "sf", w.target)
    tr = rep.result("training")
    assert "input_norm" in rep.forward_note and "SGLang 0.5.6" in rep.forward_note
    assert tr.as_trained is not None and tr.as_trained["top1"] == W.served_top1(w, range(3), shift=0)
    assert tr.trainer["acc"] == W.specforge_acc(w, range(3))
    assert tr.top1 != tr.as_trained["top1"]
    assert any(f["kind"] == "ignored-norm" and "input_norm" in f["tensor"] for f in rep.findings)


def test_headline_follows_the_serving_engine(tmp_path: Path) -> None:
    """The same "Eagle 3.1" draft (input_norm) checked for each engine: served by vLLM the headline is the
    trained forward (perfect by construction) with SGLang 0.5.6's beside it; served by SGLang 0.5.6 the
    reverse; SGLang 0.5.17 (the release table: it applies norm_before_fc) runs it as trained."""
    from eagle3_tui.eagle.drafter import DraftForward
    from eagle3_tui.engines.served_by import ServedBy, loader_for

    spec = W.speculators_config()
    spec["norm_before_fc"] = True
    w = W.build(tmp_path, n_samples=3, fwd=DraftForward(input_norm=True), spec_cfg=spec)
    W.write_specforge(w, tmp_path / "sf")
    trained_top1 = W.served_top1(w, range(3), shift=0)
    reps = {e: check(w.speculators_draft, tmp_path / "sf", w.target, served=loader_for(ServedBy(*e.split("=="))))
            for e in ("vllm==0.32.0", "sglang==0.5.6", "sglang==0.5.17")}
    v, old, new = (reps[k].result("training") for k in ("vllm==0.32.0", "sglang==0.5.6", "sglang==0.5.17"))
    assert reps["vllm==0.32.0"].engine == "vllm" and reps["vllm==0.32.0"].served_by == "vLLM 0.32.0"
    assert v.top1 == trained_top1 and v.as_trained is None and reps["vllm==0.32.0"].dropped == []
    assert v.other is not None and v.other["by"] == "SGLang 0.5.6" and v.other["top1"] == old.top1 != v.top1
    assert reps["sglang==0.5.6"].dropped == ["input_norm"] and old.other is not None
    assert old.other["by"] == "vLLM" and old.other["top1"] == v.top1 == old.as_trained["top1"]
    assert new.top1 == v.top1 and reps["sglang==0.5.17"].dropped == []
    assert v.trainer == old.trainer == new.trainer  # the trainer's metric is always the trained forward's


def test_two_layer_speculators_draft(tmp_path: Path) -> None:
    spec = W.speculators_config(num_hidden_layers=2)
    w = W.build(tmp_path, n_samples=3, draft_cfg=W.sglang_config(num_hidden_layers=2), spec_cfg=spec)
    W.write_specforge(w, tmp_path / "sf")
    rep = check(w.speculators_draft, tmp_path / "sf", w.target)
    tr = rep.result("training")
    assert tr.as_trained is not None and tr.as_trained["top1"] == W.served_top1(w, range(3), shift=0)
    assert any(f["kind"] == "layers" and "2 decoder layers" in f["message"] for f in rep.findings)


def test_original_release_bin_weights(world: W.TrainerWorld, tmp_path: Path) -> None:
    """SafeAILab/EAGLE releases: pytorch_model.bin and architectures LlamaForCausalLM
    (eagle/traineagle3/config.json): read, measured, and the architecture named."""
    import torch
    from safetensors.torch import load_file

    d = tmp_path / "bin-draft"
    d.mkdir()
    cfg = json.loads((world.sglang_draft / "config.json").read_text())
    (d / "config.json").write_text(json.dumps({**cfg, "architectures": ["LlamaForCausalLM"]}))
    torch.save(load_file(str(world.sglang_draft / "model.safetensors")), d / "pytorch_model.bin")
    rep = check(d, world.root / "specforge-out", world.target)
    a = rep.result("training")
    b = check(world.sglang_draft, world.root / "specforge-out", world.target).result("training")
    assert (a.top1, a.trainer) == (b.top1, b.trainer)
    [arch] = [f for f in rep.findings if f["kind"] == "architecture"]
    assert "architectures LlamaForCausalLM" in arch["message"] and "LlamaForCausalLMEagle3" in arch["message"]


def test_shipped_zip_on_a_speculators_root(world: W.TrainerWorld, tmp_path: Path) -> None:
    """The check's zip (what the session ships over SSH), run by a Python without the project installed."""
    pyz = tmp_path / "accuracy.pyz"
    pyz.write_bytes(shipped.build())
    bare, env = bare_python(tmp_path)
    proc = subprocess.run(
        [*bare, str(pyz), "--no-stdin-watch", "--draft", str(world.speculators_draft),
         "--data", str(world.root / "speculators-out"), "--target", str(world.target), "--threads", "1"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env,
    )
    events = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 0, proc.stderr + proc.stdout[-2000:]
    report = events[-1]["report"]
    assert report["split"] == "validation" and report["wirings"][0]["trainer"]["acc"][0] == 1.0


def test_speculators_draft_config_names_the_ids_it_was_trained_on(world: W.TrainerWorld, tmp_path: Path) -> None:
    """A speculators draft config records eagle_aux_hidden_state_layer_ids (vLLM counting, top level):
    the data's slots are those ids then N; SGLang does not read the top-level key, so "draft config"
    is its default."""
    d = tmp_path / "draft"
    shutil.copytree(world.speculators_draft, d)
    (d / "config.json").write_text(json.dumps(W.speculators_config([9, 2, 6])))
    rep = check(d, world.root / "speculators-out", world.target)
    assert rep.slot_boundaries == [2, 6, 9, 12]
    assert any("the draft config's eagle_aux_hidden_state_layer_ids plus the last layer 12" in n for n in rep.notes)
    assert rep.result("draft config").source.startswith("draft config (no ids SGLang reads")


def test_sglang_named_draft_on_a_speculators_root(world: W.TrainerWorld, tmp_path: Path) -> None:
    """An SGLang-named draft keeps its ids in eagle_config, SGLang's counting (boundary = id + 1): read with
    speculators data (vLLM counting) its ids [1, 5, 8] are the data's boundaries [2, 6, 9], not [1, 5, 8]."""
    d = tmp_path / "draft"
    shutil.copytree(world.sglang_draft, d)
    cfg = json.loads((d / "config.json").read_text())
    cfg.pop("eagle_aux_hidden_state_layer_ids", None)
    cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": [1, 5, 8], "use_aux_hidden_state": True}
    (d / "config.json").write_text(json.dumps(cfg))
    rep = check(d, world.root / "speculators-out", world.target)
    assert rep.slot_boundaries == [2, 6, 9, 12]
    assert rep.result("draft config").slots == rep.result("training").slots


def test_sharded_bin_index(world: W.TrainerWorld, tmp_path: Path) -> None:
    import torch
    from safetensors.torch import load_file

    from eagle3_tui.eagle import checkpoint as ck

    sd = load_file(str(world.sglang_draft / "model.safetensors"))
    names = sorted(sd)
    parts = {"pytorch_model-00001-of-00002.bin": names[::2], "pytorch_model-00002-of-00002.bin": names[1::2]}
    d = tmp_path / "sharded"
    d.mkdir()
    shutil.copy(world.sglang_draft / "config.json", d / "config.json")
    for fn, keys in parts.items():
        torch.save({k: sd[k] for k in keys}, d / fn)
    (d / "pytorch_model.bin.index.json").write_text(json.dumps(
        {"weight_map": {k: fn for fn, keys in parts.items() for k in keys}}))
    header = ck.read_header(str(d))
    assert set(header.tensors) == set(names) and len(header.files) == 2
    a = check(d, world.root / "specforge-out", world.target).result("training")
    assert a.trainer["acc"] == W.specforge_acc(world, range(N_SAMPLES))


def test_a_trained_embedding_sglang_will_replace(world: W.TrainerWorld, tmp_path: Path) -> None:
    import torch
    from safetensors.torch import load_file, save_file

    d = tmp_path / "draft"
    shutil.copytree(world.speculators_draft, d)
    t = load_file(str(d / "model.safetensors"))
    assert not [f for f in check(d, world.root / "specforge-out", world.target).findings if f["kind"] == "embedding"]
    t["embed_tokens.weight"] = (t["embed_tokens.weight"].float() * 1.5).to(torch.bfloat16)
    save_file(t, str(d / "model.safetensors"))
    [f] = [f for f in check(d, world.root / "specforge-out", world.target).findings if f["kind"] == "embedding"]
    assert "SGLang 0.5.6 replaces it with the target's" in f["message"]


def test_eagle_1_2_data_is_named(tmp_path: Path) -> None:
    """SafeAILab EAGLE-1/2 ge_data files: input_ids, hidden_state, loss_mask (one state per position)."""
    import torch

    from eagle3_tui.eagle.checkpoint import BadInput
    from eagle3_tui.eagle.datasets import load

    torch.save({"input_ids": torch.arange(8), "hidden_state": torch.randn(8, 16), "loss_mask": torch.ones(8)},
               tmp_path / "data_0.ckpt")
    with pytest.raises(BadInput, match="EAGLE-1/2 data"):
        load(str(tmp_path))


def test_a_glob_inside_hidden_states_still_finds_the_arrow_rows(world: W.TrainerWorld) -> None:
    rep = check(world.speculators_draft, world.root / "speculators-out" / "hidden_states" / "hs_*.safetensors",
                world.target)
    assert rep.split == "validation" and rep.files_read == 1


def test_a_loader_that_applies_the_trained_norm_serves_the_trained_forward(tmp_path: Path) -> None:
    """Issue 11's model of the installed SGLang plugs in here: with input_norm applied, served == trained."""
    from eagle3_tui.eagle.accuracy import CheckOptions, run_check
    from eagle3_tui.eagle.drafter import DraftForward
    from eagle3_tui.eagle.trainers import ServedLoader

    spec = W.speculators_config()
    spec["norm_before_fc"] = True
    w = W.build(tmp_path, n_samples=3, fwd=DraftForward(input_norm=True), spec_cfg=spec)
    W.write_specforge(w, tmp_path / "sf")
    newer = ServedLoader(name="SGLang with input_norm", applies=frozenset({"rope_scaling", "input_norm"}))
    rep = run_check(CheckOptions(str(w.speculators_draft), str(tmp_path / "sf"), str(w.target), steps=W.STEPS),
                    loader=newer)
    tr = rep.result("training")
    assert rep.forward_note == "" and tr.as_trained is None and rep.served_by == "SGLang with input_norm"
    assert tr.top1 == W.served_top1(w, range(3), shift=0)
    assert not any(f["kind"] == "ignored-norm" for f in rep.findings)
