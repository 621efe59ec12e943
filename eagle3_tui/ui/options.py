"""What the console is built from besides the session: display options and the session's lifecycle
(how it is booted, started, stopped). Plain frozen dataclasses; `ui.factory.make_app` fills them."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from textual.screen import Screen

    from eagle3_tui.session import Session

Progress = Callable[[str], None]
Boot = Callable[[Progress], Awaitable["Session"]]
SessionHook = Callable[["Session"], Coroutine[Any, Any, None]]


@dataclass(frozen=True)
class ConsoleOptions:
    """How the console looks and what its jobs ask for."""

    hint: str = ""
    """One line under the tabs (the demo's walk-through); empty hides it."""
    theme: str | None = None
    keymap: Mapping[str, str] = field(default_factory=dict)
    """Binding id → keys (a profile's `keymap`)."""
    theme_dirs: tuple[Path, ...] | None = None
    """Where theme files are read; None: the shipped themes and the user's theme dir."""
    clock: Callable[[], float] = time.time
    """Wall clock for uptimes and the charts' right edge (frozen in snapshot tests)."""
    screenshot_dir: Path | None = None
    chart_hz: float = 2.0
    boot_screen: bool = True
    """Show the progress screen while `Lifecycle.boot` runs (the demo's world build)."""
    bench_opts: Mapping[str, Any] = field(default_factory=dict)
    check_opts: Mapping[str, Any] = field(default_factory=dict)
    sweep_opts: Mapping[str, Any] = field(default_factory=dict)
    """The console sweep's `grid` (configs), `limit` (how many of the predicted best; default 4) and
    `bench` (each step's benchmark options)."""


@dataclass(frozen=True)
class Lifecycle:
    """The session's way in and out. All optional: a test may hand the app a built, idle session."""

    boot: Boot | None = None
    """Builds the session after the first frame (imports the session; for the demo, builds the world)."""
    start: SessionHook | None = None
    """Runs as the "attach" job once the session is wired (attach, start the demo server)."""
    on_exit: SessionHook | None = None
    """Runs when quitting (stop the demo server, detach)."""
    hangup: Callable[[Session], None] | None = None
    """Synchronous emergency stop for a hang-up, run from a thread when the event loop may be stuck."""
    cleanup: Callable[[], None] | None = None
    """Runs after the app has exited, whatever way (the demo's temp dir)."""
    closing: Callable[[], Coroutine[Any, Any, None]] | None = None
    """Runs when quitting, attached or not (the fleet's HTTP client and SSH tunnels)."""


@dataclass(frozen=True)
class FleetHome:
    """The console opened on a fleet: its screen is the home screen, enter drills into one server."""

    screen: Screen[None]
