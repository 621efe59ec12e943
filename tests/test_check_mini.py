"""A miniature check world built here (random draft, data whose tokens that draft predicts under the
training wiring), written in all three data layouts; plus checks of the accuracy math on it.

The demo world (tests/plugins/world.py) is the realistic case; this one is exact: under the
training wiring step 0 predicts every token (top-1 = 1.0), under any other wiring it does not.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest

H, NH, NKV, INTER, V, VD, S, T = 16, 4, 2, 32, 50, 30, 4, 40


@dataclass
class Mini:
    root: Path
    draft: Path
    target: Path
    v1: str
    st: str
    specforge: str
    n_samples: int
    masked_from: int  # loss mask is 0 before this position


def mini_config() -> dict:
    return {
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": H,
        "num_attention_heads": NH, "num_key_value_heads": NKV, "intermediate_size": INTER,
        "num_hidden_layers": 1, "vocab_size": V, "draft_vocab_size": VD, "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0, "target_hidden_size": H,
    }


def build_mini(root: Path, *, n_samples: int = 6, seed: int = 0) -> Mini:
    import torch
    from safetensors.torch import save_file

    from eagle3_tui.eagle.drafter import Eagle3Drafter

    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    embed = torch.randn(V, H, generator=g)
    cfg = mini_config()
    model = Eagle3Drafter(cfg, embed)
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.4)
    chosen = torch.sort(torch.randperm(V, generator=g)[:VD]).values
    model.d2t.copy_(chosen - torch.arange(VD))
    model.eval()
    draft = root / "draft"
    draft.mkdir(parents=True)
    (draft / "config.json").write_text(json.dumps(cfg))
    sd = {k: v.contiguous() for k, v in model.state_dict().items()}
    save_file(sd, str(draft / "model.safetensors"))
    target = root / "target"
    target.mkdir()
    (target / "config.json").write_text(json.dumps({"hidden_size": H, "num_hidden_layers": 12, "vocab_size": V,
                                                   "rms_norm_eps": 1e-6}))
    save_file({"model.embed_tokens.weight": embed}, str(target / "model.safetensors"))

    masked_from = 5
    (root / "v1").mkdir()
    (root / "st" / "hidden_states").mkdir(parents=True)
    (root / "sf").mkdir()
    with torch.no_grad():
        for i in range(n_samples):
            x = torch.zeros(T, dtype=torch.long)
            x[:2] = torch.randint(0, V, (2,), generator=g)
            deep = [torch.randn(T, H, generator=g) * (10 + 10 * k) for k in range(S - 1)]
            for t in range(T - 2):
                slot0 = embed[x[: t + 1]]
                aux = torch.cat([slot0, deep[0][: t + 1], deep[1][: t + 1]], -1)[None]
                logits, _ = model(x[1 : t + 2][None], aux)
                x[t + 2] = model.to_target_ids(logits[0, t].argmax())
            slots = [embed[x], *deep]
            mask = torch.ones(T, dtype=torch.long)
            mask[:masked_from] = 0
            torch.save({"input_ids": x, "loss_mask": mask, "hidden_states": [s.clone() for s in slots]},
                       root / "v1" / f"data_{i}.pt")
            save_file({"hidden_states": torch.stack(slots, 1).contiguous(), "token_ids": x, "loss_mask": mask},
                      str(root / "st" / "hidden_states" / f"hs_{i}.safetensors"))
            # SpecForge keeps the mask unshifted (position t counts when token t+1 does): same positions
            sf_mask = torch.cat([mask[1:], torch.zeros(1, dtype=torch.long)])
            torch.save({"input_ids": x, "loss_mask": sf_mask, "aux_hidden_state": torch.cat(slots[:3], -1)[None],
                        "hidden_state": torch.zeros(1, T, H)}, root / "sf" / f"data_{i}.ckpt")
    return Mini(root, draft, target, str(root / "v1" / "*.pt"), str(root / "st" / "hidden_states" / "hs_*.safetensors"),
                str(root / "sf" / "*.ckpt"), n_samples, masked_from)


@pytest.fixture(scope="session")
def mini(tmp_path_factory: pytest.TempPathFactory) -> Mini:
    import torch

    torch.set_num_threads(1)
    return build_mini(tmp_path_factory.mktemp("mini"))


def opts(m: Mini, data: str, **kw):
    from eagle3_tui.eagle.accuracy import CheckOptions

    return CheckOptions(draft_dir=str(m.draft), data=data, target=str(m.target), **kw)


def test_training_wiring_is_exact_and_serving_is_not(mini: Mini) -> None:
    from eagle3_tui.eagle.accuracy import run_check

    events: list[dict] = []
    rep = run_check(opts(mini, mini.v1, steps=2, data_slots=[0, 2, 6, 9]), events.append)
    by = {w.name: w for w in rep.wirings}
    assert rep.layout == "speculators-v1" and rep.label_source == "tokens"
    # positions counted: t <= T-3 with mask[t+1] set
    per = (T - 2) - (mini.masked_from - 1)
    assert rep.positions == per * mini.n_samples == by["training"].positions
    assert by["training"].top1 == 1.0 and by["training"].top5 == 1.0
    assert by["training"].step_accept[0] == 1.0
    assert by["serving default"].slots == [1, 2, 3]
    assert by["serving default"].top1 < 0.6
    # tau = 1 + r1 + r2, with r1 = a1 = 1.0
    tr = by["training"]
    assert tr.predicted_accept_len == pytest.approx(1 + 1.0 + tr.step_accept[1], abs=2e-4)
    # the draft config names no ids: SGLang's default (2, 6, 9), the last three slots here
    assert by["serving default"].boundaries == [2, 6, 9] and by["serving default"].source == "SGLang default"
    assert by["draft config"].slots == [1, 2, 3] and by["draft config"].note == "same slots as serving default"
    assert by["draft config"].top1 == by["serving default"].top1
    kinds = [e["event"] for e in events]
    assert kinds[0] == "start" and kinds[-1] == "done" and "progress" in kinds and kinds.count("result") == 3
    probe = {p["slot"]: p for p in rep.probe}
    assert probe[0]["embed_like"] and probe[0]["embed_cosine"] == pytest.approx(1.0)
    assert not any(probe[i]["embed_like"] for i in (1, 2, 3))


def test_same_figures_in_all_three_layouts(mini: Mini) -> None:
    from eagle3_tui.eagle.accuracy import run_check

    reps = [run_check(opts(mini, d, steps=2)) for d in (mini.v1, mini.st, mini.specforge)]
    assert [r.layout for r in reps] == ["speculators-v1", "speculators", "specforge"]
    train = [r.result("training") for r in reps]
    assert len({(t.top1, t.top5, tuple(t.step_accept), t.positions) for t in train}) == 1, train


def test_bounded_sample_and_user_wiring(mini: Mini) -> None:
    from eagle3_tui.eagle.accuracy import run_check

    rep = run_check(opts(mini, mini.v1, steps=1, samples=50, wirings=["slots:0,1,2", "h:0,6,9", "h:0,3,6"],
                         data_slots=[0, 2, 6, 9]))
    assert rep.positions == 50 and rep.files_read == 2
    by = {w.name: w for w in rep.wirings}
    assert by["slots:0,1,2"].top1 == 1.0 and by["slots:0,1,2"].note == "same slots as training"
    assert by["h:0,6,9"].slots == [0, 2, 3] and by["h:0,6,9"].top1 < 1.0
    assert len(by["training"].step_accept) == 1
    assert by["h:0,3,6"].top1 is None and "no slot for boundary 3" in by["h:0,3,6"].note


def test_four_aux_fc_is_a_finding_and_still_measured(mini: Mini, tmp_path: Path) -> None:
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    from eagle3_tui.eagle.accuracy import CheckOptions, run_check

    d = tmp_path / "draft4"
    shutil.copytree(mini.draft, d)
    t = load_file(str(d / "model.safetensors"))
    t["fc.weight"] = torch.cat([t["fc.weight"], torch.zeros(H, H)], dim=1)  # a 4th aux state, weighted 0
    save_file(t, str(d / "model.safetensors"))
    rep = run_check(CheckOptions(str(d), mini.v1, str(mini.target), steps=1, data_slots=[0, 2, 6, 9]))
    [fc] = [f for f in rep.findings if f["kind"] == "fc-width"]
    assert "takes 64 inputs but the draft is fed 3 aux states x target hidden 16 = 48" in fc["message"]
    assert rep.num_aux == 4
    tr = rep.result("training")
    assert tr.slots == [0, 1, 2, 3] and tr.top1 == 1.0  # the zero-weighted 4th slot changes nothing
    assert any("trainer feeds 3 slots but the draft's fc takes 4" in n for n in rep.notes)
