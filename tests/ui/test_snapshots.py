"""Snapshot tests (pytest-textual-snapshot): main screen in each theme, the diff modal, the accuracy
results, a finding's detail and help. The app is built by `make_app`, the factory the CLI uses, over a
Session fed the recorded server log through its own log feed (tests/ui/recorded.py); the log's last
40 lines reach the log pane as the session's LogBatch once the app listens. Deterministic: the session
is closed, the clock frozen at the newest data point, the charts drawn once before the snapshot.

Update the baselines with `pytest tests/ui/test_snapshots.py --snapshot-update` after a deliberate change."""

from __future__ import annotations

import pytest

from eagle3_tui.ui.app import Eagle3App
from eagle3_tui.ui.factory import make_app
from eagle3_tui.ui.screens.modals import DiffModal
from eagle3_tui.ui.themes import builtin_theme_dir
from eagle3_tui.ui.widgets.charts import TimeChart
from eagle3_tui.ui.widgets.log_pane import LogPane
from tests.ui.recorded import (
    clock_of,
    recorded_plan,
    recorded_predict_report,
    recorded_report,
    recorded_session,
    until_ready,
)

SIZE = (120, 40)
HELD = 40  # the log's last lines, fed once the app listens


def _app(tmp_path, theme: str = "eagle3-dark", *, with_report: bool = False, report=None) -> Eagle3App:
    session, held = recorded_session(tmp_path, hold_back=HELD)
    if with_report or report is not None:
        session.known.check = report if report is not None else recorded_report()
    app = make_app(
        session,
        clock=clock_of(session),
        theme=theme,
        theme_dirs=[builtin_theme_dir()],
        hint="demo: 2 findings · 3 config: p picks a preset, enter applies · c check · b benchmark · ? help",
    )
    app.held_lines = held  # type: ignore[attr-defined]
    return app


async def _settle(pilot) -> None:
    app = pilot.app
    await until_ready(pilot)
    pane = app.query_one(LogPane)
    app.session.ingest_log(app.held_lines, log_time=True)  # the session's LogBatch reaches the pane
    while pane.total_lines < HELD:
        await pilot.pause(0.02)
    pane.flush()
    await pilot.pause()
    charts = list(app.query(TimeChart))
    while any(c._building for c in charts):  # a tick's build in its thread: let it land first
        await pilot.pause(0.05)
    for chart in charts:
        chart.redraw()
    app.main.live.update_strips()
    app.main._show_status()
    await pilot.pause()


@pytest.mark.parametrize("theme", ["eagle3-dark", "eagle3-light", "eagle3-high-contrast"])
def test_main_screen(snap_compare, tmp_path, theme):
    assert snap_compare(_app(tmp_path, theme, with_report=True), run_before=_settle, terminal_size=SIZE)


def test_diff_modal(snap_compare, tmp_path):
    app = _app(tmp_path)

    async def run_before(pilot):
        await _settle(pilot)
        await pilot.press("3")
        app.push_screen(DiffModal(recorded_plan(app.session), deadline_s=900))
        await pilot.pause()

    assert snap_compare(app, run_before=run_before, terminal_size=SIZE)


def test_accuracy_results(snap_compare, tmp_path):
    app = _app(tmp_path, with_report=True)

    async def run_before(pilot):
        await _settle(pilot)
        await pilot.press("4")
        await pilot.pause()

    assert snap_compare(app, run_before=run_before, terminal_size=SIZE)


def test_accuracy_predictions(snap_compare, tmp_path):
    """The predictions grid under the wirings: rows steps/topk/draft, a column per wiring predicted
    (the best and the served one), the served 1/1/2 on the served wiring marked."""
    app = _app(tmp_path, report=recorded_predict_report())

    async def run_before(pilot):
        await _settle(pilot)
        await pilot.press("4")
        await pilot.pause()

    assert snap_compare(app, run_before=run_before, terminal_size=SIZE)


def test_findings_detail(snap_compare, tmp_path):
    app = _app(tmp_path)

    async def run_before(pilot):
        await _settle(pilot)
        await pilot.press("2", "down")
        await pilot.pause()

    assert snap_compare(app, run_before=run_before, terminal_size=SIZE)


def test_help(snap_compare, tmp_path):
    app = _app(tmp_path)

    async def run_before(pilot):
        await _settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap_compare(app, run_before=run_before, terminal_size=SIZE)
