"""Accuracy math: tau from per-step runs, and the batched check against a per-token reference loop."""

from __future__ import annotations

from pathlib import Path

import pytest

from eagle3_tui.eagle.accuracy import (
    CheckOptions,
    CheckReport,
    WiringResult,
    chain_acceptance,
    predicted_accept_len,
    run_check,
)
from tests.test_check_mini import Mini, build_mini


def test_chain_acceptance_formula() -> None:
    # 100 positions: 80 get draft 1 right, 40 of those draft 2, 10 of those draft 3
    cond, tau = chain_acceptance([80, 40, 10], 100)
    assert cond == pytest.approx([0.8, 0.5, 0.25])
    assert tau == pytest.approx(1 + 0.8 + 0.8 * 0.5 + 0.8 * 0.5 * 0.25)
    # constant a: tau = (1 - a^(k+1)) / (1 - a)
    a, k, n = 0.5, 4, 1 << 10
    runs = [int(n * a ** (i + 1)) for i in range(k)]
    assert chain_acceptance(runs, n)[1] == pytest.approx((1 - a ** (k + 1)) / (1 - a))
    assert chain_acceptance([0, 0], 0) == ([0.0, 0.0], 1.0)


@pytest.fixture(scope="module")
def amini(tmp_path_factory: pytest.TempPathFactory) -> Mini:
    import torch

    torch.set_num_threads(1)
    return build_mini(tmp_path_factory.mktemp("amini"), n_samples=3)


def test_batched_check_equals_per_token_loop(amini: Mini) -> None:
    """Padding, batching and alignment do not change a single prediction: the serving wiring's top-1
    equals a loop that runs the draft on each prefix alone (what a naive script does)."""
    import torch
    from safetensors.torch import load_file

    from eagle3_tui.eagle.drafter import Eagle3Drafter

    rep = run_check(CheckOptions(str(amini.draft), amini.v1, str(amini.target), steps=1, batch_tokens=64,
                                 data_slots=[0, 2, 6, 9]))
    serving = rep.result("serving default")
    assert serving is not None and serving.slots == [1, 2, 3]

    cfg = __import__("json").loads((amini.draft / "config.json").read_text())
    embed = load_file(str(amini.target / "model.safetensors"))["model.embed_tokens.weight"]
    model = Eagle3Drafter.from_tensors(cfg, load_file(str(amini.draft / "model.safetensors")), embed)
    hits = total = top5 = 0
    with torch.no_grad():
        for f in sorted(Path(amini.v1).parent.glob("data_*.pt")):
            d = torch.load(f, weights_only=True)
            x, mask, hs = d["input_ids"], d["loss_mask"], d["hidden_states"]
            aux = torch.cat([hs[1], hs[2], hs[3]], -1)
            for t in range(len(x) - 2):
                if not mask[t + 1]:
                    continue
                logits, _ = model(x[1 : t + 2][None], aux[: t + 1][None])
                total += 1
                hits += int(model.to_target_ids(logits[0, t].argmax()) == x[t + 2])
                top5 += int(bool((model.to_target_ids(logits[0, t].topk(5).indices) == x[t + 2]).any()))
    assert total == serving.positions
    assert serving.top1 == round(hits / total, 4)
    assert serving.top5 == round(top5 / total, 4)
    assert 0 < hits < total


def test_report_round_trip(amini: Mini) -> None:
    rep = run_check(CheckOptions(str(amini.draft), amini.st, str(amini.target), steps=3, samples=40,
                                 data_slots=[0, 2, 6, 9], num_layers=12))
    d = rep.to_dict()
    back = CheckReport.from_dict(__import__("json").loads(__import__("json").dumps(d)))
    assert back.wirings == rep.wirings and back.probe == rep.probe
    # the data holds SGLang's default boundaries for N=12: the served wiring is found by boundaries
    assert back.for_boundaries((2, 6, 9)).name == "serving default"
    assert back.result("draft config").boundaries == [2, 6, 9]
    assert back.best().name == "training"
    assert d["predicted_accept_len"] == back.best().predicted_accept_len
    assert len(back.result("training").step_accept) == 3


def test_predicted_accept_len_answers_for_the_served_boundaries() -> None:
    rep = CheckReport("d", "x", wirings=[
        WiringResult("training", [0, 3, 31], [0, 1, 2], top1=0.7, predicted_accept_len=3.1),
        WiringResult("serving default", [2, 16, 29], [], note="no slot"),
        WiringResult("draft config", [3, 31, 59], [1, 2, 3], top1=0.2, predicted_accept_len=1.4),
    ])
    assert predicted_accept_len(rep, (0, 3, 31)) == 3.1
    assert predicted_accept_len(rep, [3, 31, 59]) == 1.4
    # a wiring that was not measured, or boundaries no wiring fed, predict nothing
    assert predicted_accept_len(rep, [2, 16, 29]) is None
    assert predicted_accept_len(rep, [1, 2, 3]) is None
    # served boundaries unknown: what SGLang captures from the draft config
    assert predicted_accept_len(rep, None) == 1.4
    assert predicted_accept_len(None, [0, 3, 31]) is None


def test_target_tail_recovers_the_final_state(tmp_path: Path) -> None:
    """Running the target's last layers from a stored boundary gives the state the target computed."""
    import torch
    from safetensors.torch import save_file

    from eagle3_tui.eagle.accuracy import TargetWeights, _TargetTail
    from eagle3_tui.sim.target import TargetModel

    torch.manual_seed(0)
    cfg = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 5, "num_attention_heads": 4,
           "num_key_value_heads": 2, "vocab_size": 40, "rms_norm_eps": 1e-5, "rope_theta": 10000.0}
    model = TargetModel(cfg)
    for p in model.parameters():
        torch.nn.init.normal_(p, std=0.2)
    save_file({k: v.contiguous() for k, v in model.state_dict().items()}, str(tmp_path / "model.safetensors"))
    ids = torch.randint(0, 40, (1, 24))
    with torch.no_grad():
        _logits, hs = model(ids)
    tail, why = _TargetTail.build(TargetWeights(str(tmp_path)), cfg, 2, 5)
    assert tail is not None and why == ""
    out = tail.to("cpu")(hs[2][0])
    assert torch.allclose(out, hs[5][0], atol=1e-4)
    # Llama-3.1 targets carry llama3 rope scaling: the tail runs it (it was refused before) and it matters
    l3 = {**cfg, "max_position_embeddings": 64, "rope_scaling": {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 16}}
    scaled, why = _TargetTail.build(TargetWeights(str(tmp_path)), l3, 2, 5)
    assert scaled is not None and why == ""
    assert float((scaled.to("cpu")(hs[2][0]) - out).abs().max()) > 1e-3
    odd, why = _TargetTail.build(TargetWeights(str(tmp_path)), {**cfg, "rope_scaling": {"rope_type": "longrope"}}, 2, 5)
    assert odd is None and "not one the tail models" in why
    # MoE-style layers are refused with a reason
    cut = {k: v for k, v in model.state_dict().items() if "layers.4.mlp.gate_proj" not in k}
    save_file({k: v.contiguous() for k, v in cut.items()}, str(tmp_path / "model.safetensors"))
    tail, why = _TargetTail.build(TargetWeights(str(tmp_path)), cfg, 2, 5)
    assert tail is None and "layer 4 has no model.layers.4.mlp.gate_proj.weight" in why
