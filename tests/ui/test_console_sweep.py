"""Pilot test of the console's flag sweep on the demo: the real sim server through LocalHost, the
session's own `Sweep` (the one restart path, a benchmark per configuration, ledger rows), nothing
mocked. `S` asks first; the ledger pane shows the sweep's progress; `esc` stops it after the
configuration being served and the starting launch command comes back exactly."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable

from eagle3_tui.profile import demo_profile
from eagle3_tui.session import Session
from eagle3_tui.session.demo.lifecycle import attach_and_start, stop_and_close
from eagle3_tui.session.presets.catalog import set_flags
from eagle3_tui.ui import keys
from eagle3_tui.ui.app import Eagle3App
from eagle3_tui.ui.commands import ConsoleCommands
from eagle3_tui.ui.factory import make_app
from eagle3_tui.ui.options import Lifecycle
from eagle3_tui.ui.themes import builtin_theme_dir
from tests.plugins.ports import free_port
from tests.plugins.world import stop_processes_under
from tests.ui.recorded import until_ready
from tests.ui.test_console_live import wait_until

pytestmark = pytest.mark.slow

GRID = [(3, 4, 8), (5, 1, 6), (3, 1, 4)]


@pytest.fixture
def sweep_app(demo_world: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Eagle3App]:
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    profile = demo_profile(demo_world, port=free_port(), state_dir=tmp_path / "demo")
    # one background request, not the demo's four: the CPU goes to the sweep's restarts and benchmarks
    profile.launch_command = set_flags(profile.launch_command, {"sim-background-load": 1})
    yield make_app(
        Session(profile),
        lifecycle=Lifecycle(start=attach_and_start, on_exit=stop_and_close),
        theme_dirs=[builtin_theme_dir()],
        sweep_opts={"grid": GRID, "bench": {"num_prompts": 4, "concurrency": 2, "max_tokens": 16}},
    )
    stop_processes_under(tmp_path)


@pytest.mark.timeout(900)
async def test_sweep_confirms_shows_progress_and_esc_stops_and_restores(sweep_app: Eagle3App):
    app = sweep_app
    seen: list[str] = []
    async with app.run_test(size=(120, 40)) as pilot:
        await until_ready(pilot)
        s = app.session
        await wait_until(pilot, lambda: s.server.state == "ready", "the demo server to be ready", 180)
        start_argv = list(s.spec.argv)
        draft_cfg = Path(s.profile.draft_path, "config.json").read_bytes()
        rows_before = len(s.records.rows())
        # the palette and help list it
        sweep_key = keys.all_keys(app.key_owners())["sweep"]
        assert (sweep_key.binding.key, sweep_key.binding.action) == ("S", "sweep")
        palette = [t for t, _, _ in ConsoleCommands(app.screen)._commands()]
        assert any(t.startswith("Flag sweep") for t in palette), palette

        await pilot.press("S")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "ConfirmModal", "the sweep confirmation", 10)
        question = str(app.screen.query_one("#confirm-question").render())
        assert "3/4/8, 5/1/6, 3/1/4" in question and "restore" in question
        await pilot.press("y")
        ledger = app.main.ledger_pane
        await wait_until(pilot, lambda: app.main.jobs.busy("sweep"), "the sweep to start", 10)
        assert app.main.tabs.active == "ledger" and ledger.has_class("sweeping")
        assert ledger.sweep is not None and ledger.sweep.text.startswith("sweep 0/3 · serving 3/4/8…")
        seen.append(ledger.sweep.text)
        # esc while the first configuration is being served: the sweep stops after it
        await pilot.press("escape")
        assert "stopping after this step" in ledger.sweep.text
        seen.append(ledger.sweep.text)
        await wait_until(pilot, lambda: s.server.topk == 4 or not app.main.jobs.busy("sweep"),
                         "the first configuration served", 180)

        def progressed() -> bool:
            if ledger.sweep is not None and ledger.sweep.text not in seen:
                seen.append(ledger.sweep.text)
            return not app.main.jobs.busy("sweep")

        await wait_until(pilot, progressed, "the sweep to stop and restore", 300)
        assert any(t.startswith("sweep 1/3 · 3/4/8 accept ") and t.endswith("restoring the start…") for t in seen), seen
        toasts = [n.message for n in app._notifications]
        assert any(m.startswith("sweep stopped after 1 configuration; start restored") for m in toasts), toasts
        assert not ledger.has_class("sweeping")
        # the start is back, byte for byte, and served
        assert list(s.spec.argv) == start_argv
        assert Path(s.profile.draft_path, "config.json").read_bytes() == draft_cfg
        await wait_until(pilot, lambda: s.server.state == "ready" and s.server.steps == 1, "the start served", 60)
        # the ledger refreshed as the row arrived: one sweep row for 3/4/8, measured
        rows = s.records.rows()[rows_before:]
        sweeps = [r for r in rows if r.kind == "sweep"]
        assert len(sweeps) == 1 and (sweeps[0].results["steps"], sweeps[0].results["topk"]) == (3, 4), rows
        assert sweeps[0].results["accept_len"] and sweeps[0].results["tok_s"]
        assert app.query_one("#ledger-table", DataTable).row_count == len(s.records.rows())
        started = time.monotonic()
        await pilot.press("q")
        while not app.quitting and time.monotonic() - started < 30:
            await pilot.pause(0.1)
