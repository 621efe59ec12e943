"""doctor/advice.py: the cost model calibrated on measured configurations, `better-flags` and
`multistep-decay`, pure over Facts."""

from __future__ import annotations

import pytest

from eagle3_tui.doctor import diagnose
from eagle3_tui.doctor.advice import (
    CostModel,
    Measured,
    better_flags,
    calibrate,
    chain_limit,
    measured_configs,
    multistep_decay,
)
from eagle3_tui.doctor.facts import Facts
from eagle3_tui.eagle.predict import Prediction
from eagle3_tui.eagle.spec_config import SpecConfig
from eagle3_tui.sglang import launch
from eagle3_tui.telemetry.ledger import LedgerRow

TRUE = CostModel(t0=1 / 90, c_verify=0.0004, c_draft=0.0015, calibrated_on=0, baseline=True)
ACCEPT = {(3, 1, 4): 2.4, (5, 1, 6): 2.7, (3, 4, 8): 2.9, (5, 4, 16): 3.3, (1, 1, 2): 1.5}


def _measured(*cfgs: tuple[int, int, int]) -> list[Measured]:
    return [Measured(c, ACCEPT[c], TRUE.tok_s(c, ACCEPT[c])) for c in cfgs]


def _argv(s: int, k: int, d: int) -> list[str]:
    return ["python", "-m", "sglang.launch_server", "--model-path", "m", "--speculative-algorithm", "EAGLE3",
            "--speculative-num-steps", str(s), "--speculative-eagle-topk", str(k),
            "--speculative-num-draft-tokens", str(d)]


def _facts(served: tuple[int, int, int], measured: list[Measured], baseline: float | None = 90.0) -> Facts:
    la = launch.parse_launch(_argv(*served))
    return Facts(launch=la, effective=launch.effective(la), baseline_tps=baseline,
                 predictions=tuple(Prediction(SpecConfig(s, k, d), a) for (s, k, d), a in ACCEPT.items()),
                 measured_configs=tuple(measured))


def test_calibration_recovers_the_costs_from_three_configurations() -> None:
    m = calibrate(_measured((1, 1, 2), (3, 1, 4), (5, 4, 16)), 90.0)
    assert m is not None and m.calibrated_on == 3 and m.baseline
    assert m.c_verify == pytest.approx(TRUE.c_verify, rel=1e-6)
    assert m.c_draft == pytest.approx(TRUE.c_draft, rel=1e-6)
    one = calibrate(_measured((3, 1, 4)), 90.0)
    assert one is not None and one.c_verify == 0.0 and one.calibrated_on == 1
    assert calibrate([], 90.0) is None
    assert calibrate(_measured((3, 1, 4), (5, 1, 6)), None) is None  # no baseline: three needed
    nob = calibrate(_measured((1, 1, 2), (3, 1, 4), (5, 4, 16)), None)
    assert nob is not None and not nob.baseline


def test_better_flags_names_the_fastest_predicted_configuration() -> None:
    speeds = {c: TRUE.tok_s(c, a) for c, a in ACCEPT.items()}
    best = max(speeds, key=lambda c: speeds[c])
    f = better_flags(_facts((1, 1, 2), _measured((1, 1, 2), (3, 1, 4), (5, 4, 16))))
    assert f is not None and f.rule_id == "better-flags" and f.severity == "warning"
    assert f.title.startswith(f"steps {best[0]}, topk {best[1]}, draft {best[2]}: predicted {ACCEPT[best]:.2f}")
    ratio = speeds[best] / speeds[(1, 1, 2)]
    assert f"~{ratio:.2f}x your current tok/s" in f.title
    assert "agree within 0%" in f.title
    assert "calibrated on 3 measured configuration(s) and the baseline" in f.evidence[0].detail
    assert any("(served)" in e.detail and "measured" in e.detail for e in f.evidence)
    assert f"--speculative-num-steps {best[0]}" in f.fix
    # already serving the best: nothing to advise
    assert better_flags(_facts(best, _measured((1, 1, 2), (3, 1, 4), (5, 4, 16)))) is None


def test_no_measurement_says_so_and_does_not_advise() -> None:
    f = better_flags(_facts((1, 1, 2), []))
    assert f is not None and f.severity == "info" and f.title.startswith("no flag advice yet")
    assert "no speculative configuration was benchmarked" in f.title
    assert better_flags(Facts()) is None  # no predictions: silent


def test_measured_configs_from_ledger_rows() -> None:
    rows = [
        LedgerRow(1, 0.0, "benchmark", "h", {"steps": 3, "topk": 1, "draft_tokens": 4, "boundaries": [0, 2, 6]},
                  {"accept_len": 2.0, "output_tps": 50.0}),
        LedgerRow(2, 1.0, "benchmark", "h", {"steps": 3, "topk": 1, "draft_tokens": 4, "boundaries": [0, 2, 6]},
                  {"accept_len": 2.2, "output_tps": 55.0}),
        LedgerRow(3, 2.0, "sweep", "h", {"boundaries": [0, 2, 6]},
                  {"steps": 3, "topk": 4, "draft_tokens": 8, "accept_len": 2.9, "tok_s": 60.0}),
        LedgerRow(4, 3.0, "baseline", "h", {"steps": None}, {"output_tps": 90.0}),
        LedgerRow(5, 4.0, "benchmark", "h", {"steps": 5, "topk": 1, "draft_tokens": 6, "boundaries": [2, 6, 9]},
                  {"accept_len": 1.4, "output_tps": 40.0}),
        LedgerRow(6, 5.0, "sweep", "h", {"boundaries": [0, 2, 6]},
                  {"steps": 1, "topk": 2, "draft_tokens": 8, "accept_len": None, "error": "crashed"}),
    ]
    got = {m.config: (m.accept_len, m.tok_s) for m in measured_configs(rows, [0, 2, 6])}
    assert got == {(3, 1, 4): (2.2, 55.0), (3, 4, 8): (2.9, 60.0)}


def test_multistep_decay_when_live_matches_and_later_steps_fall() -> None:
    f = Facts(step_accept=(0.77, 0.45, 0.40), predicted_accept_len=1.85, live_accept_len=1.8,
              accept_rate_definition="accepted / (verify steps x num_draft_tokens), the bonus token included")
    got = multistep_decay(f)
    assert got is not None and got.rule_id == "multistep-decay"
    assert "43%" in got.title and "77%" in got.title
    assert "test-time-training" in got.fix
    assert any("bonus token" in e.detail for e in got.evidence)
    assert chain_limit([0.77, 0.45, 0.40]) == pytest.approx(1 + 0.77 + 0.3465 + 0.3465 * 0.4 / 0.6, abs=1e-6)
    # far below the prediction: that is the online-offline gap, not a training limit
    assert multistep_decay(Facts(step_accept=(0.77, 0.45, 0.4), predicted_accept_len=2.6, live_accept_len=1.5)) is None
    # flat acceptance: no decay
    assert multistep_decay(Facts(step_accept=(0.7, 0.75, 0.74), predicted_accept_len=2.6, live_accept_len=2.5)) is None


def test_the_engine_runs_the_advice_rules() -> None:
    found = {x.rule_id for x in diagnose(_facts((1, 1, 2), _measured((1, 1, 2), (3, 1, 4), (5, 4, 16))))}
    assert "better-flags" in found


def test_session_facts_carry_the_tree_prediction_for_the_served_flags() -> None:
    from eagle3_tui.eagle.accuracy import CheckReport, WiringResult, predicted_accept_len
    from eagle3_tui.session.events import ServerView
    from eagle3_tui.session.host.facts import FactsSnapshot, build_facts

    rep = CheckReport("d", "x", wirings=[WiringResult("training", [0, 2, 6], [0, 1, 2], top1=0.7,
                                                      step_accept=[0.7, 0.75, 0.74], predicted_accept_len=2.63)],
                      predictions=[{"steps": 3, "topk": 4, "draft_tokens": 8, "accept_len": 3.25,
                                    "wiring": "training", "boundaries": [0, 2, 6]},
                                   {"steps": 3, "topk": 4, "draft_tokens": 8, "accept_len": 1.9,
                                    "wiring": "serving default", "boundaries": [2, 6, 9]}])
    server = ServerView(speculative=True, steps=3, topk=4, draft_tokens=8, boundaries=(0, 2, 6))
    m = Measured((3, 4, 8), 3.3, 120.0)
    f = build_facts(FactsSnapshot(server=server, check=rep, measured=(m,)))
    assert f.predicted_accept_len == 3.25  # the tree's, not the chain's 2.63
    assert f.step_accept == (0.7, 0.75, 0.74)
    assert [p.wiring for p in f.predictions] == ["training"]
    assert f.measured_configs == (m,)
    assert predicted_accept_len(rep, [0, 2, 6]) == 2.63  # without the flags: the chain check's number
    assert predicted_accept_len(rep, [0, 2, 6], (5, 4, 16)) == 2.63  # not predicted: the chain's
