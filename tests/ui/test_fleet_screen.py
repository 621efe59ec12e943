"""Pilot tests of the Fleet screen, built as `eagle3-tui --fleet FILE` builds it (ui/launch.py), over
loopback servers: sorting, filtering, a row that fails, enter into the one-server console and back."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from textual.widgets import DataTable, Input

from eagle3_tui.ui.commands import ConsoleCommands
from eagle3_tui.ui.launch import build_fleet_app
from eagle3_tui.ui.screens.fleet import SORTS, FleetScreen
from eagle3_tui.ui.screens.help import HelpScreen, help_markup
from eagle3_tui.ui.screens.main import MainScreen
from tests.fleet_fakes import fake_server, sglang_metrics, vllm_metrics
from tests.plugins.ports import free_port


def fleet_args(path: Path) -> argparse.Namespace:
    return argparse.Namespace(fleet=str(path), hosts=[], prometheus=None, fleet_engine="sglang", profile=None,
                              readonly=True, accept_new_host_key=False)


def write_fleet(tmp_path: Path, servers: list[tuple[str, str, str]]) -> Path:
    text = "interval_s = 0.5\ntimeout_s = 1\n" + "".join(
        f'[[server]]\nname = "{n}"\nbase_url = "{u}"\nengine = "{e}"\n' for n, u, e in servers)
    path = tmp_path / "fleet.toml"
    path.write_text(text)
    return path


async def until(pilot: Any, cond: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)
    await pilot.pause()


def first_column(screen: FleetScreen) -> list[str]:
    table = screen.query_one("#fleet-table", DataTable)
    return [str(table.get_row_at(i)[0]) for i in range(table.row_count)]


async def test_sort_filter_drill_in_and_back(tmp_path: Path) -> None:
    with fake_server() as a, fake_server() as b, fake_server() as v:
        a.set("/metrics", sglang_metrics(2.4, 1000.0))
        b.set("/metrics", sglang_metrics(1.2, 1000.0))
        v.set("/metrics", vllm_metrics())
        gone = f"http://127.0.0.1:{free_port()}"
        path = write_fleet(tmp_path, [("alpha", a.base_url, "sglang"), ("bravo", b.base_url, "sglang"),
                                      ("victor", v.base_url, "vllm"), ("zulu", gone, "sglang")])
        app = build_fleet_app(fleet_args(path))
        async with app.run_test(size=(180, 40)) as pilot:
            screen = app.screen
            assert isinstance(screen, FleetScreen)
            await until(pilot, lambda: screen.refreshes >= 1, "the first refresh")
            # sorted by status first: the server that is gone on top, then the outlier among the SGLang pair
            assert first_column(screen)[:2] == ["zulu", "bravo"]
            rows = {r.name: r for r in screen.fleet.rows}
            assert rows["zulu"].status == "down" and rows["bravo"].outlier and rows["victor"].status == "ok"

            await pilot.press("s")  # the next column's key: engine (ties by name)
            assert screen.sort_key == "engine" and first_column(screen) == ["alpha", "bravo", "zulu", "victor"]
            await pilot.press(*["s"] * (len(SORTS) - 2))  # round to the first column
            assert screen.sort_key == "name" and first_column(screen) == ["alpha", "bravo", "victor", "zulu"]
            await pilot.press("S")
            assert first_column(screen) == ["zulu", "victor", "bravo", "alpha"]
            header = str(screen.query_one("#fleet-table", DataTable).ordered_columns[0].label)
            assert header.startswith("server ▼")

            await pilot.press("slash")
            box = screen.query_one("#fleet-filter", Input)
            assert box.has_focus
            await pilot.press(*"vllm")
            assert first_column(screen) == ["victor"]
            await pilot.press("escape")
            assert first_column(screen) == ["zulu", "victor", "bravo", "alpha"] and screen.query_text == ""

            # the palette on the Fleet screen offers its keys (run on it), not a server's
            commands = {t: run for t, run, _ in ConsoleCommands(screen)._commands()}
            assert "Read every server now" in commands and "Run a benchmark through the HTTP API" not in commands
            before = screen.refreshes
            commands["Read every server now"]()
            await until(pilot, lambda: screen.refreshes > before, "a refresh from the palette")

            # enter on alpha: the one-server console for its base URL (this machine, its port)
            table = screen.query_one("#fleet-table", DataTable)
            table.move_cursor(row=first_column(screen).index("alpha"))
            await pilot.press("enter")
            await until(pilot, lambda: isinstance(app.screen, MainScreen), "the one-server console")
            session = app.session
            assert session is not None and session.profile.local and session.profile.port == a.port
            assert session.readonly

            await pilot.press("backspace")
            await until(pilot, lambda: app.screen is screen, "the fleet again")
            assert app.session is None
            refreshed = screen.refreshes
            await until(pilot, lambda: screen.refreshes > refreshed, "the fleet refreshing after coming back")

            await pilot.press("question_mark")
            await pilot.pause()
            assert isinstance(app.screen, HelpScreen)
            listed = help_markup({}, False, app.key_owners(), app.hidden_keys())
            assert "Fleet" in listed and "Open the selected server" in listed and "Preset" not in listed
