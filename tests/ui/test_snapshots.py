"""Snapshot tests (pytest-textual-snapshot): main screen in each theme, the diff modal, the accuracy
results, a finding's detail and help. Deterministic: a Session on recorded state (tests/ui/recorded.py),
a clock frozen at the log's last line, charts drawn once from that data before the snapshot.

Update the baselines with `pytest tests/ui/test_snapshots.py --snapshot-update` after a deliberate change."""

from __future__ import annotations

import pytest

from eagle3_tui.ui.app import Eagle3App
from eagle3_tui.ui.screens.modals import DiffModal
from eagle3_tui.ui.themes import builtin_theme_dir
from eagle3_tui.ui.widgets.charts import TimeChart
from eagle3_tui.ui.widgets.log_pane import LogPane
from tests.ui.recorded import recorded_lines, recorded_plan, recorded_report, recorded_session, until_ready

SIZE = (120, 40)


def _app(tmp_path, theme: str = "eagle3-dark", *, with_report: bool = False) -> Eagle3App:
    session, t_end = recorded_session(tmp_path)
    if with_report:
        session.check = recorded_report()
    return Eagle3App(
        session,
        clock=lambda: t_end,
        theme_name=theme,
        theme_dirs=[builtin_theme_dir()],
        hint="demo: 2 findings · 3 config: p picks a preset, enter applies · c check · b benchmark · ? help",
    )


async def _settle(pilot) -> None:
    app = pilot.app
    await until_ready(pilot)
    pane = app.query_one(LogPane)
    pane.add_lines(recorded_lines()[-40:])
    pane.flush()
    await pilot.pause()
    charts = list(app.query(TimeChart))
    while any(c._building for c in charts):  # a tick's build in its thread: let it land first
        await pilot.pause(0.05)
    for chart in charts:
        chart.redraw()
    app._update_strips()
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
