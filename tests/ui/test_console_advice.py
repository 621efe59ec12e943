"""The doctor's `better-flags` advice offered in the Config pane as a preset, on a real Session holding
recorded state (tests/ui/recorded.py): the check report with its predictions grid, and the ledger rows
a flag sweep writes. Their accept lengths are what one sweep on the demo world measured (1/1/2: 1.45,
3/4/8: 2.21, 5/4/16: 2.67, 3/1/4: 1.81); their tok/s are what a stated cost model gives for those
(the demo's own tok/s on two shared cores were too noisy to rank: the same config measured 14 and 20
tok/s). The doctor runs on them as it does after a sweep; the preset carries the flags its fix
names, and applying it shows the launch-command diff first."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from eagle3_tui.doctor.advice import CostModel
from eagle3_tui.session import Session
from eagle3_tui.session.sweep import SweepStep
from eagle3_tui.ui.factory import make_app
from eagle3_tui.ui.themes import builtin_theme_dir
from tests.ui.recorded import clock_of, recorded_predict_report, recorded_session, until_ready

BASELINE_TPS = 38.4  # the demo's no-speculation benchmark
LOAD = 5  # the recorded server's decode lines: about five requests in flight (the cost model advises at that load)
COST = CostModel(t0=1 / BASELINE_TPS, c_verify=0.0001 / LOAD, c_draft=0.0015 / LOAD / 4, calibrated_on=0, baseline=True)
ACCEPT = {(1, 1, 2): 1.4545, (3, 4, 8): 2.2069, (5, 4, 16): 2.6667, (3, 1, 4): 1.8113}
MEASURED = {cfg: (acc, COST.tok_s(cfg, acc, LOAD)) for cfg, acc in ACCEPT.items()}


def advised_session(tmp: Path) -> Session:
    session, _ = recorded_session(tmp)
    report = recorded_predict_report()

    async def measure() -> None:
        session.known.check = report
        session.telemetry.baseline_tps = BASELINE_TPS  # what a baseline benchmark sets
        for i, (cfg, (acc, tps)) in enumerate(MEASURED.items()):
            step = SweepStep(cfg, None, acc, tps, concurrency=LOAD)
            session.records.record("sweep", session.recorder.config_snapshot(), step.to_dict(), f"sweep {i + 1}/{len(MEASURED)}")
        await session.survey.refresh_findings()

    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, measure()).result()
    return session


async def test_better_flags_is_a_preset_in_the_config_pane(tmp_path):
    session = advised_session(tmp_path)
    advice = next(f for f in session.findings if f.rule_id == "better-flags")
    preset = next(p for p in session.presets.available() if p.name == "better-flags")
    s, k, d = (preset.flags[f] for f in ("speculative-num-steps", "speculative-eagle-topk", "speculative-num-draft-tokens"))
    assert f"--speculative-num-steps {s} --speculative-eagle-topk {k} --speculative-num-draft-tokens {d}" in advice.fix
    assert advice.title in preset.description and preset.kind == "flags"
    app = make_app(session, clock=clock_of(session), theme_dirs=[builtin_theme_dir()])
    async with app.run_test(size=(120, 40)) as pilot:
        await until_ready(pilot)
        await pilot.press("3")
        pane = app.main.config_pane
        assert "better-flags" in [p.name for p in pane.presets]
        while pane.selected is None or pane.selected.name != "better-flags":
            await pilot.press("p")
        await pilot.press("enter")
        for _ in range(100):
            if type(app.screen).__name__ == "DiffModal":
                break
            await pilot.pause(0.05)
        assert type(app.screen).__name__ == "DiffModal", [n.message for n in app._notifications]
        diff = str(app.screen.query_one("#diff-text").render())
        assert f"--speculative-num-steps {s}" in diff and f"--speculative-num-draft-tokens {d}" in diff
        await pilot.press("n")
        await pilot.pause()
        assert type(app.screen).__name__ == "MainScreen"
        # the palette offers it too
        from eagle3_tui.ui.commands import ConsoleCommands

        assert "Apply preset: better-flags" in [t for t, _, _ in ConsoleCommands(app.screen)._commands()]
