"""The demo's boot screen and the main screen's deferred pane mount (the CI hang of 2026-12-01).

Textual hands a `call_after_refresh` callback to whichever screen is on top when the message is
processed; during the demo's boot that is the boot screen, and a boot that ends before the boot screen
repaints pops it with the callback unrun. The console then sat at "connecting…" with no charts and never
started its server. An instant boot (a cached world, a fast machine) loses that race every time: the
panes must still mount and the start hook run.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from eagle3_tui.profile import demo_profile
from eagle3_tui.session import Session
from eagle3_tui.ui.factory import make_app
from eagle3_tui.ui.options import Lifecycle
from eagle3_tui.ui.screens.boot import BootScreen
from tests.plugins.ports import free_port


async def test_instant_boot_mounts_panes_and_runs_start(demo_world: Any, tmp_path: Path) -> None:
    started: list[Session] = []
    profile = demo_profile(demo_world, port=free_port(), state_dir=tmp_path / "demo")

    async def boot(progress: Any) -> Session:
        return Session(profile)

    async def start(session: Session) -> None:
        started.append(session)

    app = make_app(lifecycle=Lifecycle(boot=boot, start=start), boot_screen=True)
    async with app.run_test(size=(120, 40)) as pilot:
        deadline = time.monotonic() + 30
        while not (app.main.panes_ready and started) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert app.main.panes_ready, "the panes never mounted"
        assert started and started[0] is app.session, "the start hook never ran"
        assert not isinstance(app.screen, BootScreen)
        await pilot.press("ctrl+q")


async def test_the_built_console_freezes_the_heap_and_gives_it_back_when_it_goes(demo_world: Any, tmp_path: Path) -> None:
    """Once wired, the main screen takes the console's objects out of the collector's sight (full
    collections walked ~100k objects in a log flood: the slowest key presses); when it goes they are
    the collector's again, so an app that ends in a longer-lived process is freed."""
    import gc

    profile = demo_profile(demo_world, port=free_port(), state_dir=tmp_path / "demo")

    async def boot(progress: Any) -> Session:
        return Session(profile)

    async def start(session: Session) -> None:
        return None

    before = gc.get_freeze_count()
    app = make_app(lifecycle=Lifecycle(boot=boot, start=start), boot_screen=True)
    async with app.run_test(size=(120, 40)) as pilot:
        deadline = time.monotonic() + 30
        while not (app.main.session_wired and gc.get_freeze_count() > before) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert gc.get_freeze_count() > before, "the heap was not frozen once the console was built"
        await pilot.press("ctrl+q")
    assert gc.get_freeze_count() == 0
