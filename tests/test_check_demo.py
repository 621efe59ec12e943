"""The check on the demo world (tests/plugins/world.py): the trained wiring against SGLang's default,
in all three data layouts, against the target's own next token."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo_reports(demo_world: Any) -> dict[str, Any]:
    import torch

    from eagle3_tui.eagle.accuracy import CheckOptions, run_check

    torch.set_num_threads(1)
    w = demo_world
    b = list(w.slot_boundaries)
    runs = {
        "speculators-v1": (w.heldout_glob, b),
        "speculators": (str(w.speculators_st_dir / "hidden_states" / "hs_*.safetensors"), b),
        # SpecForge keeps only the trained slots in aux_hidden_state
        "specforge": (str(w.specforge_dir / "*.ckpt"), b[:-1]),
    }
    return {
        name: run_check(CheckOptions(str(w.draft_dir), glob, str(w.target_dir), steps=3, data_slots=slots))
        for name, (glob, slots) in runs.items()
    }


def test_trained_wiring_beats_the_serving_default(demo_world: Any, demo_reports: dict[str, Any]) -> None:
    rep = demo_reports["speculators-v1"]
    trained = rep.for_boundaries(demo_world.trained_boundaries)
    default = rep.for_boundaries(demo_world.default_boundaries)
    assert trained.name == "training" and default.name == "serving default"
    assert rep.label_source == "target-tail"  # the data's deepest slot is h9 of 12: layers 9..11 were run
    assert trained.top1 >= 0.6
    assert default.top1 <= trained.top1 - 0.12  # the issue: at least 0.12 less
    assert trained.predicted_accept_len > default.predicted_accept_len
    # the same figures the world measured on these sequences with its own evaluation
    m = demo_world.metrics
    assert trained.top1 == pytest.approx(m["trained"]["top1"], abs=0.005)
    assert default.top1 == pytest.approx(m["default"]["top1"], abs=0.005)
    assert trained.predicted_accept_len == pytest.approx(m["trained"]["predicted_accept_len"], abs=0.03)
    # the draft config names no ids: what SGLang serves is the default
    assert rep.result("draft config").slots == default.slots
    probe = rep.probe
    assert probe[0]["embed_like"] and not any(p["embed_like"] for p in probe[1:])


def test_same_figures_in_all_three_layouts(demo_world: Any, demo_reports: dict[str, Any]) -> None:
    v1, st, sf = (demo_reports[k] for k in ("speculators-v1", "speculators", "specforge"))
    assert (v1.layout, st.layout, sf.layout) == ("speculators-v1", "speculators", "specforge")
    assert sf.label_source == "target"  # SpecForge stores the final normed state
    for name in ("training", "serving default"):
        assert v1.result(name).top1 == st.result(name).top1
        assert v1.result(name).step_accept == st.result(name).step_accept
    a, c = v1.result("training"), sf.result("training")
    # SpecForge's loss mask is not shifted: position p counts where mask[p] holds, not mask[p + 1], so over a
    # row of T tokens it counts mask[0..T-2] where speculators counts mask[1..T-1]
    import torch

    rows = [torch.load(f, weights_only=True)["loss_mask"] for f in sorted(demo_world.heldout_dir.glob("data_*.pt"))]
    assert sf.positions == v1.positions - sum(int(m[-1]) - int(m[0]) for m in rows)
    assert c.top1 == pytest.approx(a.top1, abs=0.005)
    assert c.predicted_accept_len == pytest.approx(a.predicted_accept_len, abs=0.03)
    # SpecForge data holds no h9 slot: SGLang's default is named, not measured
    assert sf.result("serving default").top1 is None and "no slot for boundary 9" in sf.result("serving default").note
