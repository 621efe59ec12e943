"""The flag sweep through LocalHost against the real sim server: three configurations served in turn
(one made to fail: more draft tokens than its tree proposes, which crashes the server at warm-up as
SGLang's topk does), the predicted best first, a ledger row each with its prediction, and the starting
launch command and draft config restored byte for byte; a cancelled sweep restores too."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from eagle3_tui.eagle.accuracy import CheckReport, WiringResult
from eagle3_tui.session import Session
from eagle3_tui.session.sweep import Sweep, order_configs, prediction_for, served_config
from tests.test_session_e2e import _profile, _stop

pytestmark = pytest.mark.slow

BENCH = {"num_prompts": 2, "concurrency": 2, "max_tokens": 16}
FAILS = (1, 2, 8)  # 1 step of topk 2 proposes 2 nodes, not 7


def _Report() -> CheckReport:
    """A check whose served wiring (the draft config's, boundaries 2, 6, 9) predicted two configurations."""
    return CheckReport("d", "x", wirings=[WiringResult("draft config", [2, 6, 9], [0, 1, 2], top1=0.5,
                                                       predicted_accept_len=2.0)], predictions=[
        {"steps": 3, "topk": 1, "draft_tokens": 4, "accept_len": 2.7, "boundaries": [2, 6, 9]},
        {"steps": 3, "topk": 4, "draft_tokens": 8, "accept_len": 3.2, "boundaries": [2, 6, 9]},
    ])


@pytest.fixture
def ledger_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "data"
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(d))
    return d


def test_served_config_and_order() -> None:
    argv = ["python", "-m", "sglang.launch_server", "--model-path", "m", "--speculative-algorithm", "EAGLE3",
            "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "16"]
    assert served_config(argv) == (3, 1, 4)
    assert served_config(argv[:5]) is None
    assert prediction_for(_Report(), (3, 4, 8)) == 3.2
    assert prediction_for(_Report(), (5, 4, 16)) is None
    order = order_configs([(3, 1, 4), FAILS, (3, 4, 8)], lambda c: prediction_for(_Report(), c))
    assert order == [(3, 4, 8), (3, 1, 4), FAILS]


async def _sweep(session: Session, **kw: object) -> tuple[object, list[str]]:
    events: list[tuple[int, int]] = []
    sweep = Sweep(session, [(3, 1, 4), FAILS, (3, 4, 8)], bench=BENCH, report=_Report(),
                  on_progress=lambda done, total, step, eta: events.append((done, total)), **kw)  # type: ignore[arg-type]
    return sweep, events  # type: ignore[return-value]


@pytest.mark.usefixtures("ledger_dir")
async def test_sweep_through_localhost_restores_the_start(demo_world, tmp_path) -> None:
    await _story(Session(_profile(demo_world, tmp_path)), cancel=True)


@pytest.mark.usefixtures("ledger_dir")
async def test_sweep_through_ssh_restores_the_start(demo_world, tmp_path, ssh_host) -> None:
    profile = _profile(demo_world, tmp_path)
    profile.local, profile.name = False, "ssh-sweep"
    await _story(Session(profile, host=ssh_host), cancel=False)


async def _advice(session: Session) -> None:
    """The doctor on the sweep's measurements: a check predicting the served flags and the grid, one
    benchmark of the start, and the cost model calibrated on the three configurations measured."""
    from eagle3_tui.doctor.advice import calibrate, measured_configs
    from eagle3_tui.session.host.facts import build_facts

    report = await session.accuracy.run(predict=[(1, 1, 2), (3, 1, 4), (3, 4, 8)], samples=1500)
    served_b = list(session.server.boundaries)
    rows = {(r["steps"], r["topk"], r["draft_tokens"]): r["accept_len"] for r in report.predictions
            if r["boundaries"] == served_b}
    assert set(rows) == {(1, 1, 2), (3, 1, 4), (3, 4, 8)} and rows[(3, 4, 8)] > rows[(1, 1, 2)]
    await session.bench.run(**BENCH)
    measured = measured_configs(session.records.rows(), session.server.boundaries)
    assert {m.config for m in measured} == {(1, 1, 2), (3, 1, 4), (3, 4, 8)}
    model = calibrate(measured, session.telemetry.baseline_tps)
    assert model is not None and model.calibrated_on == 3
    facts = build_facts(session.survey.facts_snapshot())
    assert facts.predicted_accept_len == rows[(1, 1, 2)]  # the prediction for the served flags
    found = {f.rule_id: f for f in await session.survey.refresh_findings()}
    if "better-flags" in found:  # on a busy CPU the served 1/1/2 may really be the fastest
        assert "calibrated on 3 measured configuration(s)" in found["better-flags"].evidence[0].detail
    print({m.config: (round(m.accept_len, 2), round(m.tok_s, 1), rows[m.config]) for m in measured})


async def _story(session: Session, *, cancel: bool) -> None:
    profile = session.profile
    try:
        await session.attach()
        await session.control.start()
        start_argv = list(session.spec.argv)
        config = Path(session.target.draft_config_path)
        config_bytes = config.read_bytes()
        launch_file = Path(profile.local_state_dir()) / "launch.json"
        sweep, events = await _sweep(session)
        result = await sweep.run()
        assert [s.config for s in result.steps] == [(3, 4, 8), (3, 1, 4), FAILS]
        ok, chain, bad = result.steps
        assert ok.error is None and chain.error is None and ok.accept_len and chain.accept_len
        assert ok.predicted == 3.2 and chain.predicted == 2.7
        assert bad.error and bad.accept_len is None
        assert events == [(1, 3), (2, 3), (3, 3)]
        # the start is back, byte for byte, and serving
        assert result.restored and result.restore_error is None
        assert list(session.spec.argv) == start_argv
        assert session.server.state == "ready" and (session.server.steps, session.server.draft_tokens) == (1, 2)
        assert config.read_bytes() == config_bytes
        if launch_file.exists():
            assert list(__import__("json").loads(launch_file.read_text())["argv"]) == start_argv
        assert session.presets.can_rollback() is None  # the sweep's one undo record is gone
        rows = [r for r in session.records.rows() if r.kind == "sweep"]
        assert [(r.results["steps"], r.results["topk"]) for r in rows] == [(3, 4), (3, 1), (1, 2)]
        assert rows[0].results["predicted_accept_len"] == 3.2 and rows[0].accept_len == ok.accept_len
        assert rows[2].results["error"] and "(failed)" in rows[2].note

        if not cancel:
            return
        await _advice(session)
        # cancelled in the middle of its first restart: the start comes back all the same
        sweep, _ = await _sweep(session)
        task = asyncio.ensure_future(sweep.run())
        while not session.restarting:
            await asyncio.sleep(0.05)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(600):
            if not session.restarting and list(session.spec.argv) == start_argv and session.server.state == "ready":
                break
            await asyncio.sleep(0.1)
        assert list(session.spec.argv) == start_argv and session.server.state == "ready"
        assert config.read_bytes() == config_bytes
    finally:
        await _stop(session)


def test_check_prediction_grid_and_table() -> None:
    from eagle3_tui.commands.sweep import format_predictions, prediction_grid
    from eagle3_tui.eagle.spec_config import STANDARD_GRID
    from eagle3_tui.errors import UserError
    from eagle3_tui.profile import Preset, Profile
    from eagle3_tui.telemetry.ledger import Ledger

    argv = ["python", "-m", "sglang.launch_server", "--model-path", "m", "--speculative-algorithm", "EAGLE3",
            "--speculative-num-steps", "4", "--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "6"]
    profile = Profile("h", local=True, launch_command=argv)
    grid = prediction_grid([], profile)
    assert grid[0] == (4, 2, 6) and grid[1:] == list(STANDARD_GRID)
    assert prediction_grid([], None) == list(STANDARD_GRID)
    # the console's grid: a flag preset's flags and the ledger's configurations on this host come next
    profile.presets = [Preset("deeper", "flags", flags={"speculative-num-steps": 5})]
    Ledger().record("benchmark", "h", {"steps": 7, "topk": 1, "draft_tokens": 8}, {})
    assert prediction_grid([], profile)[:3] == [(4, 2, 6), (5, 2, 6), (7, 1, 8)]
    assert prediction_grid(["3,4,8", "3/4/8"], profile) == [(3, 4, 8)]
    assert prediction_grid(["none"], profile) == []
    with pytest.raises(UserError, match="propose only"):
        prediction_grid(["1,2,8"], None)
    rep = _Report()
    for r in rep.predictions:
        r["wiring"] = "training"
    lines = format_predictions(rep, served=(3, 4, 8))
    assert lines[-1] == "  training: 3/1/4 2.70, 3/4/8* 3.20"


def test_sweep_cli_arguments_and_readonly() -> None:
    from eagle3_tui.cli import build_parser
    from eagle3_tui.commands import sweep as cmd
    from eagle3_tui.session import ReadOnlyError

    a = build_parser().parse_args(["sweep", "--local", "--grid", "3,4,8", "--grid", "5/4/16", "--best", "1",
                                   "-n", "2", "--yes", "--json"])
    assert a.func is cmd.run and cmd.parse_grid(a.grid) == [(3, 4, 8), (5, 4, 16)]
    assert (a.best, a.num_prompts, a.yes, a.json) == (1, 2, True, True)
    ro = build_parser().parse_args(["sweep", "--local", "--readonly"])
    with pytest.raises(ReadOnlyError, match="read-only"):
        cmd.run(ro)


@pytest.mark.usefixtures("ledger_dir")
async def test_the_served_configuration_is_measured_without_a_restart(demo_world, tmp_path) -> None:
    """A sweep over the configuration served now benchmarks it as it runs: the same server, no undo record."""
    session = Session(_profile(demo_world, tmp_path))
    try:
        await session.attach()
        await session.control.start()
        start, pid = list(session.spec.argv), session.server.pid
        assert served_config(start) == (1, 1, 2)
        result = await Sweep(session, [(1, 1, 2)], bench=BENCH, report=_Report()).run()
        (step,) = result.steps
        assert step.error is None and step.accept_len
        assert session.server.pid == pid and session.server.state == "ready"
        assert result.restored and list(session.spec.argv) == start and session.presets.can_rollback() is None
    finally:
        await _stop(session)
