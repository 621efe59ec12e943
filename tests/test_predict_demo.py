"""On the demo world: the offline tree prediction on held-out data against the sim's measured accept
length (the sim drafts and verifies trees as SGLang 0.5.6 does), for two trees and a chain.

Numbers at the time of writing (8 demo prompts x 48 tokens; held-out check, 6000 positions):

    config   predicted  measured
    3/1/4      2.71       2.73
    3/4/8      3.25       3.46
    5/4/16     4.32       4.50
    7/1/8      3.51       3.65
    15/1/16    3.96       3.86

With 8 verify tokens the chain of 7 accepts a little more than the 3/4/8 tree on this tiny world
(its draft follows the periodic copy spans deep); with 16 the 5/4/16 tree beats the chain of 15.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.plugins.world import make_draft_dir

pytestmark = pytest.mark.slow

CONFIGS = [(3, 1, 4), (3, 4, 8), (5, 4, 16), (7, 1, 8), (15, 1, 16)]


def _measured(world: Any, draft: Path, steps: int, topk: int, draft_tokens: int) -> float:
    from eagle3_tui.sim.engine import Engine
    from eagle3_tui.sim.prompts import demo_prompts

    e = Engine(Path(world.target_dir), draft, num_steps=steps, embed_patch=True, topk=topk,
               num_draft_tokens=draft_tokens)
    acc = ver = 0
    for text in demo_prompts()[:8]:
        seq = e.new_sequence(e.tokenizer.encode(text), 48, frozenset())
        e.prefill(seq)
        while not seq.finished:
            e.step(seq)
        acc, ver = acc + seq.accepted_drafts, ver + seq.verify_ct
    return (acc + ver) / ver


@pytest.fixture(scope="module")
def both(demo_world: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict]:
    import torch

    from eagle3_tui.eagle.accuracy import CheckOptions, run_check

    torch.set_num_threads(1)
    w = demo_world
    draft = make_draft_dir(w, tmp_path_factory.mktemp("draft"), layer_ids=w.fix_layer_ids)
    report = run_check(CheckOptions(str(draft), w.heldout_glob, str(w.target_dir), steps=3,
                                    data_slots=list(w.slot_boundaries), predict=CONFIGS))
    return report, {c: _measured(w, draft, *c) for c in CONFIGS}


def test_prediction_agrees_with_the_sim_within_10_percent(both: tuple[Any, dict]) -> None:
    report, measured = both
    assert report.split == "training" or report.split == "validation"
    rows = {(r["steps"], r["topk"], r["draft_tokens"]): r for r in report.predictions}
    assert set(rows) == set(CONFIGS)
    assert {r["wiring"] for r in rows.values()} == {"training"}  # the draft config serves it: one wiring
    for c in CONFIGS[:3]:
        pred = rows[c]["accept_len"]
        assert pred == pytest.approx(measured[c], rel=0.10), (c, pred, measured[c])
    assert report.to_dict()["predictions"] == report.predictions


def test_the_prediction_orders_configurations_as_the_sim_does(both: tuple[Any, dict]) -> None:
    """On this tiny world a chain of 7 accepts about as much as the 3/4/8 tree with the same 8 verify
    tokens (its draft follows the periodic copy spans deep): the prediction must say the same."""
    report, measured = both
    rows = {(r["steps"], r["topk"], r["draft_tokens"]): r["accept_len"] for r in report.predictions}
    print({c: (rows[c], round(measured[c], 3)) for c in CONFIGS})
    for c in ((7, 1, 8), (15, 1, 16)):
        assert rows[c] == pytest.approx(measured[c], rel=0.10), (c, rows[c], measured[c])
    # 16 verify tokens: the tree beats the chain, measured and predicted
    assert measured[(5, 4, 16)] > measured[(15, 1, 16)] and rows[(5, 4, 16)] > rows[(15, 1, 16)]
    assert measured[(5, 4, 16)] > measured[(3, 4, 8)] > measured[(3, 1, 4)]
    assert rows[(5, 4, 16)] > rows[(3, 4, 8)] > rows[(3, 1, 4)]
