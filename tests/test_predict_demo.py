"""On the demo world: the offline tree prediction on held-out data against the sim's measured accept
length (the sim drafts and verifies trees as SGLang does), for two trees and three chains.

Nothing here is a number read off one build: the prediction must be within 10% of the sim's own
measurement on whatever world the suite runs on (a world of another seed or CPU), and order the
configurations as the sim does wherever the sim tells them apart. `benchmarks/predict_worlds_bench.py`
prints the table for seeds 0, 1 and 2.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import pytest

from eagle3_tui.sim.measure import PREDICT_CONFIGS as CONFIGS
from tests.plugins.world import make_draft_dir

# the check and 5 x 32 greedy requests in one fixture: about a CPU-minute, many more on a loaded machine
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

# The agreement asked of the prediction. Two configurations the sim measures within this fraction of
# each other are a tie as far as the prediction goes (on the demo worlds the chains of 7 and 15 and the
# 3/4/8 tree lie within a few % of each other, in an order that changes with the world and the
# requests); farther apart, the prediction must order them as the sim does.
REL = 0.10


@pytest.fixture(scope="module")
def both(demo_world: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict]:
    import torch

    from eagle3_tui.eagle.accuracy import CheckOptions, run_check
    from eagle3_tui.sim.measure import measure_accept_len

    torch.set_num_threads(1)
    w = demo_world
    draft = make_draft_dir(w, tmp_path_factory.mktemp("draft"), layer_ids=w.fix_layer_ids)
    report = run_check(CheckOptions(str(draft), w.heldout_glob, str(w.target_dir), steps=3,
                                    data_slots=list(w.slot_boundaries), predict=list(CONFIGS)))
    return report, {c: measure_accept_len(w.target_dir, draft, c) for c in CONFIGS}


def test_prediction_agrees_with_the_sim_within_10_percent(both: tuple[Any, dict]) -> None:
    report, measured = both
    assert report.split == "training" or report.split == "validation"
    rows = {(r["steps"], r["topk"], r["draft_tokens"]): r for r in report.predictions}
    assert set(rows) == set(CONFIGS)
    assert {r["wiring"] for r in rows.values()} == {"training"}  # the draft config serves it: one wiring
    print({c: (rows[c]["accept_len"], round(measured[c], 3)) for c in CONFIGS})
    for c in CONFIGS:
        pred = rows[c]["accept_len"]
        assert pred == pytest.approx(measured[c], rel=REL), (c, pred, measured[c])
    assert report.to_dict()["predictions"] == report.predictions


def test_the_prediction_orders_configurations_as_the_sim_does(both: tuple[Any, dict]) -> None:
    report, measured = both
    rows = {(r["steps"], r["topk"], r["draft_tokens"]): r["accept_len"] for r in report.predictions}
    for a, b in combinations(CONFIGS, 2):
        if abs(measured[a] - measured[b]) <= REL * min(measured[a], measured[b]):
            continue
        assert (measured[a] > measured[b]) == (rows[a] > rows[b]), (a, b, rows[a], rows[b], measured[a], measured[b])
    # what holds on any world: more verify tokens in a wider tree accept more, measured and predicted
    assert measured[(5, 4, 16)] > measured[(3, 4, 8)] > measured[(3, 1, 4)]
    assert rows[(5, 4, 16)] > rows[(3, 4, 8)] > rows[(3, 1, 4)]
