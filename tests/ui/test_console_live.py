"""Pilot tests of the console against the real sim server through LocalHost: the demo's story.

The session is the one `eagle3-tui --demo` builds (`demo_profile` + `Session`, started through
`session.control.start()`): the seeds' broken flags, no layer-id key. Nothing is mocked.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable

from eagle3_tui.profile import demo_profile
from eagle3_tui.session import Session
from eagle3_tui.session.demo.lifecycle import attach_and_start, stop_and_close
from eagle3_tui.ui import viewmodel as vm
from eagle3_tui.ui.app import Eagle3App
from eagle3_tui.ui.factory import make_app
from eagle3_tui.ui.options import Lifecycle
from eagle3_tui.ui.themes import builtin_theme_dir
from tests.plugins.ports import free_port
from tests.plugins.world import stop_processes_under
from tests.ui.recorded import until_ready

pytestmark = pytest.mark.slow


async def wait_until(pilot: Any, cond: Callable[[], bool], what: str, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            app = pilot.app
            tail = "\n".join(app.session.recent_log(15)) if app.session is not None else ""
            notes = [n.message for n in app._notifications]
            raise AssertionError(f"timed out waiting for {what}; toasts {notes}; server {app.session.server}\n{tail}")
        await asyncio.sleep(0.1)
    await pilot.pause()


def accept_points_since(session: Session, t0: float) -> list[float]:
    return [v for t, v in session.telemetry.series["accept_len"].window(t0, None)]


def check_processes(draft_dir: str) -> list[str]:
    """Command lines of running accuracy-check jobs on this draft dir."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "accuracy.py" in cmd and draft_dir in cmd:
            found.append(cmd)
    return found


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def apply_preset(pilot: Any, name: str, diff_text: str) -> None:
    """Select `name` with p, open the diff with enter, check it, confirm with y, wait for the restart."""
    app = pilot.app
    s = app.session
    pane = app.query_one("#config-pane")
    names = [p.name for p in pane.presets]
    assert name in names, names
    for _ in range(len(names)):
        if pane.selected.name == name:
            break
        await pilot.press("p")
    old_pid = s.server.pid
    await pilot.press("enter")
    await wait_until(pilot, lambda: type(app.screen).__name__ == "DiffModal", f"the diff modal for {name}", 30)
    assert diff_text in str(app.screen.query_one("#diff-text").render())
    await pilot.press("y")
    await wait_until(
        pilot,
        lambda: s.server.state == "ready" and s.server.pid != old_pid and not app.main.jobs.busy("restart"),
        f"the restart with {name}",
        180,
    )


@pytest.fixture
def demo_app(demo_world: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Eagle3App]:
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    profile = demo_profile(demo_world, port=free_port(), state_dir=tmp_path / "demo")
    profile.launch_command = [*profile.launch_command, "--decode-log-interval", "8"]  # stats sooner
    session = Session(profile)
    yield make_app(
        session,
        lifecycle=Lifecycle(start=attach_and_start, on_exit=stop_and_close),
        theme_dirs=[builtin_theme_dir()],
        screenshot_dir=tmp_path / "shots",
        bench_opts={"num_prompts": 6, "concurrency": 3, "max_tokens": 24},
        check_opts={"samples": 600, "threads": 1},
    )
    # The app stops its server on quit; a test that fails before quitting must not leave it running.
    stop_processes_under(tmp_path)


@pytest.mark.timeout(1800)  # includes the one-time world build when this test is the first to need it
async def test_demo_story_preset_restart_check_bench_rollback_quit(demo_app: Eagle3App):
    app = demo_app
    async with app.run_test(size=(120, 40)) as pilot:
        await until_ready(pilot)
        s = app.session
        await wait_until(pilot, lambda: s.server.state == "ready", "the demo server to be ready", 180)
        await wait_until(pilot, lambda: len(s.telemetry.series["accept_len"]) >= 3, "first decode stats")
        status = str(app.query_one("#status").render())
        assert "steps 1" in status and "asked 16" in status and "accept" in status
        # the log pane shows the live log, the chart has drawn the stats
        assert any("Decode batch" in line for line in app.query_one("#log").lines)
        await pilot.pause(1.2)
        assert app.query_one("#chart-accept").points_drawn >= 1
        # the doctor's findings: the overridden steps flag is among them
        await pilot.press("2")
        assert any(f.rule_id == "steps-override" for f in app.query_one("#findings-pane").findings)

        # config pane: pick the training wiring, see the JSON diff, confirm: the server restarts
        await pilot.press("3")
        await apply_preset(pilot, "train-[:-1]", "eagle_aux_hidden_state_layer_ids")
        assert s.server.layer_ids == (-1, 1, 5)
        # on the demo's 0.5.6 the ids reach prefill only: the doctor names the CUDA graphs, whose
        # flag preset makes them reach decode too
        await wait_until(pilot, lambda: any(f.rule_id == "ids-prefill-only" for f in s.findings),
                         "the ids-prefill-only finding", 30)
        await apply_preset(pilot, "disable-cuda-graph", "--disable-cuda-graph")
        assert "--disable-cuda-graph" in s.server.argv
        # then the steps flag: topk 1 caps accept length at steps + 1 = 2; steps 15 lifts the cap
        assert max(accept_points_since(s, 0)) <= 2.0
        await apply_preset(pilot, "steps=15", "--speculative-num-steps 15")
        assert s.server.steps == 15
        t_fix = time.time()  # after the restart: the old server's last lines are not the new one's
        await wait_until(pilot, lambda: len(accept_points_since(s, t_fix)) >= 3, "decode stats after the fix")
        after = accept_points_since(s, t_fix)
        assert sum(after) / len(after) > 2.05, after
        assert any("preset steps=15" in m.label for m in s.telemetry.markers)
        snap = app.main.snapshot()
        data = vm.accept_series(snap, t_end=time.time(), window_s=app.main.live.window_s, points=200)
        assert any("preset" in label for _, label in data.markers) and max(data.ys) > 2.05

        # accuracy check: start, cancel (the job on the host ends), start again, results side by side.
        # The check to cancel is a long one: the fixture's 600 samples can end before the escape on a quiet machine.
        quick = app.main.options
        app.main.options = dataclasses.replace(quick, check_opts={**quick.check_opts, "samples": 200_000})
        await pilot.press("c")
        await wait_until(pilot, lambda: app.main.jobs.busy("check"), "the check to start", 10)
        await wait_until(pilot, lambda: bool(check_processes(s.profile.draft_path)), "the check job on the host", 60)
        # quitting while a check runs asks first; "n" keeps everything running
        await pilot.press("q")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "ConfirmModal", "the quit confirmation", 10)
        assert "check" in str(app.screen.query_one("#confirm-question").render())
        await pilot.press("n")
        assert not app.quitting and app.main.jobs.busy("check"), ([n.message for n in app._notifications], s.check)
        await pilot.pause(1.0)
        await pilot.press("escape")
        await wait_until(pilot, lambda: not app.main.jobs.busy("check"), "the check to stop", 30)
        assert s.check is None
        # the job on the host ended with it
        draft = s.profile.draft_path
        deadline = time.monotonic() + 15
        while check_processes(draft) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        assert not check_processes(draft), check_processes(draft)
        app.main.options = quick
        await pilot.press("c")
        await wait_until(pilot, lambda: s.check is not None, "the check report", 300)
        table = app.query_one("#check-table", DataTable)
        assert len(table.columns) == 1 + len(s.check.wirings) >= 3
        assert "Best wiring" in str(app.query_one("#check-notes").render())
        # the check predicted the served flags (and each flag preset's): the status bar and the chart
        # line give the 15/1/16 prediction now, and the predictions table marks it
        assert {(r["steps"], r["topk"], r["draft_tokens"]) for r in s.check.predictions} >= {(15, 1, 16), (1, 1, 2)}
        snap = app.main.snapshot()
        at15 = vm.predicted(snap)
        assert vm.predicted_for_flags(snap) and at15 is not None
        line = vm.accept_series(snap, t_end=time.time(), window_s=300, points=50).references
        assert line == [(at15, f"check predicts {at15:.2f} (15/1/16)")]
        assert "▶" in "".join(str(c) for c in app.query_one("#predict-table", DataTable).get_row_at(0))

        # benchmark: a ledger row appears
        rows_before = len(s.records.rows())
        await pilot.press("b")
        await wait_until(pilot, lambda: len(s.records.rows()) > rows_before and not app.main.jobs.busy("bench"), "the benchmark", 180)
        assert app.query_one("#ledger-table", DataTable).row_count == len(s.records.rows())
        # B: a baseline needs the server without speculation; the session says how, as a toast
        await pilot.press("B")
        await wait_until(pilot, lambda: any("no-speculation" in n.message for n in app._notifications), "the baseline hint", 30)
        await wait_until(pilot, lambda: not app.query_one("#ledger-pane").has_class("running"), "the progress to clear", 10)

        # rollback: confirm, restart, the last apply (steps=15) is undone
        await pilot.press("u")
        await pilot.press("y")
        await wait_until(
            pilot,
            lambda: s.server.state == "ready" and s.server.steps == 1 and not app.main.jobs.busy("restart"),
            "the rollback restart",
            180,
        )
        # back at steps 1: the same report, the 1/1/2 prediction
        back = app.main.snapshot()
        assert vm.predicted(back) != at15 and vm.predicted_for_flags(back)
        served_pid = s.server.pid
        assert pid_alive(served_pid)
        await pilot.press("q")
        deadline = time.monotonic() + 60
        while pid_alive(served_pid) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert app.quitting and not pid_alive(served_pid), "quitting the demo must stop its server"
