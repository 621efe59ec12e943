"""The console app: what is app-wide. Themes, the keymap, the palette, help, screenshots, quitting
and signals, and booting the session; the tabs, the session's events and its jobs are the main
screen's (screens/main.py). Build it with `eagle3_tui.ui.factory.make_app`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import threading
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, ClassVar

from textual import on, work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.dom import DOMNode
from textual.message import Message
from textual.screen import Screen

from eagle3_tui.errors import EXIT_SIGNAL_BASE, signal_line
from eagle3_tui.ui.jobs import err_text
from eagle3_tui.ui.options import ConsoleOptions, Lifecycle
from eagle3_tui.ui.screens.main import MainScreen
from eagle3_tui.ui.themes import (
    DEFAULT_THEME,
    SEMANTIC_DEFAULTS,
    builtin_theme_dir,
    load_themes,
    user_theme_dir,
)
from eagle3_tui.ui.widgets.config_pane import ConfigPane
from eagle3_tui.ui.widgets.live_pane import LivePane
from eagle3_tui.ui.widgets.log_pane import LogPane

if TYPE_CHECKING:
    from eagle3_tui.session import Session
    from eagle3_tui.ui.options import FleetHome


SWITCH_INTERVAL_S = 0.001
"""The GIL switch interval while the console runs (see `Eagle3App._on_mount_switch_interval`)."""


def _console_commands() -> Any:
    """The palette provider, imported when the palette first opens (not on the way to the first frame)."""
    from eagle3_tui.ui.commands import ConsoleCommands

    return ConsoleCommands


class Eagle3App(App[int]):
    """The console over one session: given now, or built by `lifecycle.boot` after the first frame."""

    CSS_PATH = "app.tcss"
    TITLE = "eagle3-tui"
    COMMANDS: ClassVar = App.COMMANDS | {_console_commands}
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark,f1", "help", "Help", tooltip="Help: every key", id="help"),
        Binding("t", "next_theme", "Next theme", show=False, id="theme-next"),
        Binding("ctrl+s", "screenshot", "Save SVG screenshot", show=False, id="screenshot"),
        Binding("q,ctrl+q", "quit", "Quit", id="quit"),
    ]

    class BootProgress(Message):
        """One line of progress from the boot coroutine (the demo's world build)."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(
        self,
        session: Session | None = None,
        *,
        options: ConsoleOptions | None = None,
        lifecycle: Lifecycle | None = None,
        fleet: FleetHome | None = None,
    ) -> None:
        super().__init__()
        self.options = options or ConsoleOptions()
        self.lifecycle = lifecycle or Lifecycle()
        self.keymap: dict[str, str] = dict(self.options.keymap)
        self.screenshot_dir = self.options.screenshot_dir or Path.cwd()
        self.quitting = False
        self.stopped_by: int | None = None
        """The signal that ended the console (SIGTERM, SIGINT, SIGHUP), None for a quit."""
        self.user_theme_names: set[str] = set()
        self._theme_errors: list[str] = []
        self.fleet = fleet
        """The fleet this console opened on (None: one server); `main` is then the server drilled into."""
        self.main = MainScreen(self.options, back=self.back_to_fleet if fleet is not None else None)
        self._switch_interval: float | None = None
        self._initial_session = session
        dirs = self.options.theme_dirs
        self._register_themes(list(dirs) if dirs is not None else [builtin_theme_dir(), user_theme_dir()])

    @property
    def session(self) -> Session | None:
        return self.main.session

    def get_default_screen(self) -> Screen[Any]:
        return self.fleet.screen if self.fleet is not None else self.main

    def key_owners(self) -> list[type[DOMNode]]:
        """Every class that declares console keys, in the order help lists them."""
        from eagle3_tui.ui.widgets.accuracy_pane import AccuracyPane

        if self.fleet is not None and self.main.session is None:  # on the Fleet screen
            return [type(self.fleet.screen), type(self)]
        return [LogPane, LivePane, ConfigPane, AccuracyPane, MainScreen, type(self)]

    def hidden_keys(self) -> tuple[str, ...]:
        """Keys that mean nothing in this console: back to a fleet it was not opened on."""
        return ("fleet-back",) if self.fleet is None else ()

    # -- the fleet --------------------------------------------------------------------------------------
    def open_server(self, session: Session) -> None:
        """Drill into one server of the fleet: the one-server console over `session`, attached as usual."""
        if self.main.session is not None:
            return
        self.main = MainScreen(self.options, back=self.back_to_fleet)
        self.push_screen(self.main)
        self.main.attach_session(session, self.lifecycle.start)

    def back_to_fleet(self) -> None:
        """Leave the server for the fleet: its jobs settled, its session closed, the fleet shown again."""
        main = self.main
        if self.fleet is None or self.screen is not main:
            return
        session = main.session
        main.detach_session()
        self.main = MainScreen(self.options, back=self.back_to_fleet)
        self.pop_screen()
        on_exit = self.lifecycle.on_exit
        if session is not None and on_exit is not None:
            async def leave() -> None:
                await main.jobs.settle()
                await on_exit(session)

            self.run_worker(leave(), group="leave-server", exit_on_error=False)

    # -- themes ------------------------------------------------------------------------------------
    def _register_themes(self, dirs: list[Path]) -> None:
        themes, errors = load_themes(dirs)
        builtin = builtin_theme_dir().resolve()
        for theme in themes:
            self.register_theme(theme)
        for d in dirs:
            if d.resolve() != builtin and d.is_dir():
                self.user_theme_names |= {t.name for t in load_themes([d])[0]}
        self._theme_errors = [e.reason for e in errors]
        wanted = self.options.theme or DEFAULT_THEME
        if wanted not in self.available_themes:
            self._theme_errors.append(f"theme {wanted!r} not found; using {DEFAULT_THEME}")
            wanted = DEFAULT_THEME if DEFAULT_THEME in self.available_themes else "textual-dark"
        self.theme = wanted

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(SEMANTIC_DEFAULTS)

    def action_next_theme(self) -> None:
        names = sorted(n for n in self.available_themes if n.startswith("eagle3-") or n in self.user_theme_names)
        if names:
            i = names.index(self.theme) if self.theme in names else -1
            self.theme = names[(i + 1) % len(names)]
            self.notify(f"theme {self.theme}", timeout=2)

    def watch_theme(self, theme: str) -> None:
        if self.screen_stack:
            self.main.theme_changed()

    # -- start ------------------------------------------------------------------------------------------
    def _on_mount_switch_interval(self) -> None:
        """While the console runs, the interpreter offers the GIL to another thread every
        `SWITCH_INTERVAL_S` (Python's default: 5 ms). The log feed parses in a worker thread; each time
        the event loop comes back from waiting (a key, a timer) it may have to wait that long for the
        GIL, several times per key press. Restored when the app ends."""
        self._switch_interval = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch_interval, SWITCH_INTERVAL_S))

    def on_unmount(self) -> None:
        if self._switch_interval is not None:
            sys.setswitchinterval(self._switch_interval)
            self._switch_interval = None

    def on_mount(self) -> None:
        self._on_mount_switch_interval()
        if not self.is_headless:
            # A kill (SIGTERM, SIGINT) quits through the normal path, so the demo's server is stopped
            # rather than left running; a closed terminal (SIGHUP) through the emergency one.
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                    loop.add_signal_handler(sig, self._on_signal, sig)
            with contextlib.suppress(ValueError, OSError):
                signal.signal(signal.SIGHUP, self._on_sighup)
        if self.keymap:
            self.set_keymap(self.keymap)
        for reason in self._theme_errors:
            self.notify(reason, severity="warning", timeout=8)
        if self._initial_session is not None:
            self.main.attach_session(self._initial_session, self.lifecycle.start)
        elif self.lifecycle.boot is not None:
            if self.options.boot_screen:
                from eagle3_tui.ui.screens.boot import BootScreen

                self.push_screen(BootScreen())
            # After the first frame: booting imports the session (and, for the demo, builds the world).
            self.call_after_refresh(self._run_boot)

    @work(group="boot", exit_on_error=False)
    async def _run_boot(self) -> None:
        from eagle3_tui.ui.screens.boot import BootScreen

        boot = self.lifecycle.boot
        assert boot is not None
        def progress(text: str) -> None:
            self.post_message(self.BootProgress(text))

        try:
            session = await boot(progress)
        except Exception as err:  # a failed boot is a message on the boot screen, not a traceback
            if isinstance(self.screen, BootScreen):
                self.screen.failed(err_text(err))
            self.notify(err_text(err), severity="error", timeout=30)
            return
        if isinstance(self.screen, BootScreen):
            self.pop_screen()
        self.main.attach_session(session, self.lifecycle.start)

    @on(BootProgress)
    def _show_boot_progress(self, message: BootProgress) -> None:
        from eagle3_tui.ui.screens.boot import BootScreen

        if isinstance(self.screen, BootScreen):
            self.screen.add(message.text)

    # -- general keys -------------------------------------------------------------------------------------
    def action_help(self) -> None:
        from eagle3_tui.ui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.keymap, self.main.readonly, self.key_owners(), self.hidden_keys()))

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        target = Path(path) if path else self.screenshot_dir
        try:
            target.mkdir(parents=True, exist_ok=True)
            saved = self.save_screenshot(filename, path=str(target))
        except OSError as err:
            self.notify(f"screenshot failed: {err}", severity="error")
            return
        self.notify(f"screenshot saved: {saved}", timeout=6)

    # -- leaving --------------------------------------------------------------------------------------------
    async def action_quit(self) -> None:
        running = self.main.jobs.running_labels()
        if not running:
            await self.shutdown_and_exit()
            return
        from eagle3_tui.ui.screens.modals import ConfirmModal

        def go(yes: bool | None) -> None:
            if yes:
                self.run_worker(self.shutdown_and_exit(), group="quit", exit_on_error=False)

        question = f"{' and '.join(running).capitalize()} is running. Quit anyway?"
        self.push_screen(ConfirmModal(question, yes="Quit"), go)

    def _on_signal(self, signum: int) -> None:
        """Quit as `q` does, then end like any command a signal stops (`stopped_by`; cli.main's line)."""
        if self.stopped_by is None:
            self.stopped_by = signum
        self.run_worker(self.shutdown_and_exit(), group="quit", exit_on_error=False)

    def _on_sighup(self, signum: int, frame: FrameType | None) -> None:
        """The terminal is gone. Textual's loop may already be stuck writing to the dead tty, so the
        way out runs in a thread: the lifecycle's emergency stop (the demo's server), its cleanup,
        then exit."""
        self.quitting = True
        self.stopped_by = signal.SIGHUP
        session, hangup, cleanup = self.session, self.lifecycle.hangup, self.lifecycle.cleanup

        def leave() -> None:
            if hangup is not None and session is not None:
                with contextlib.suppress(Exception):
                    hangup(session)
            if cleanup is not None:
                with contextlib.suppress(Exception):
                    cleanup()
            with contextlib.suppress(OSError):  # the terminal is usually gone; a pipe or a log still gets it
                os.write(2, (signal_line(signal.SIGHUP) + "\n").encode())
            os._exit(EXIT_SIGNAL_BASE + signal.SIGHUP)

        threading.Thread(target=leave, name="eagle3-hangup").start()

    async def shutdown_and_exit(self) -> None:
        """Settle the jobs, run the lifecycle's exit hook (stop the demo server, detach), exit."""
        if self.quitting:
            return
        self.quitting = True
        await self.main.jobs.settle()
        session, on_exit = self.session, self.lifecycle.on_exit
        self.main.detach_session()
        if session is not None and on_exit is not None:
            self.notify("stopping…", timeout=30)
            try:
                await on_exit(session)
            except Exception as err:  # quitting must not crash; say what was left behind
                self.notify(f"while quitting: {err_text(err)}", severity="error")
        if self.lifecycle.closing is not None:
            with contextlib.suppress(Exception):
                await self.lifecycle.closing()
        code = 0 if self.stopped_by is None else EXIT_SIGNAL_BASE + self.stopped_by
        self.exit(code, return_code=code)
