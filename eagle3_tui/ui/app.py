"""The console: a Textual app over one `Session`.

The app holds no logic of its own. It renders the session's snapshots (conn, server, telemetry,
findings, check, ledger) and calls the session's async methods in workers. Session events arrive
through `session.add_listener` and are posted as `SessionEvent` messages, so a listener called from
any thread is safe and the UI thread does the rendering.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import Any, ClassVar

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.markup import escape
from textual.message import Message
from textual.widgets import Footer, Label, TabbedContent, TabPane
from textual.worker import Worker

from eagle3_tui.ui import keys
from eagle3_tui.ui.format import fmt_num
from eagle3_tui.ui.themes import (
    DEFAULT_THEME,
    SEMANTIC_DEFAULTS,
    builtin_theme_dir,
    load_themes,
    user_theme_dir,
)
from eagle3_tui.ui.widgets.chart_data import ChartData
from eagle3_tui.ui.widgets.log_pane import LogPane
from eagle3_tui.ui.widgets.status_bar import StatusBar, _predicted
from eagle3_tui.ui.widgets.strips import Strip

WINDOWS: tuple[float, ...] = (60.0, 300.0, 900.0, 3600.0, 6 * 3600.0)
TABS = ("live", "findings", "config", "accuracy", "ledger")


def _console_commands() -> Any:
    """The palette provider, imported when the palette first opens (not on the way to the first frame)."""
    from eagle3_tui.ui.commands import ConsoleCommands

    return ConsoleCommands


class SessionEvent(Message):
    """One event from the session, carried onto the UI thread."""

    def __init__(self, event: Any) -> None:
        super().__init__()
        self.event = event
        self.kind = type(event).__name__

    def can_replace(self, message: Message) -> bool:
        # Pure "something changed" pings coalesce; everything else is kept.
        return (
            self.kind == "StatsUpdated"
            and isinstance(message, SessionEvent)
            and message.kind == "StatsUpdated"
        )


class BootProgress(Message):
    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text


class Eagle3App(App[int]):
    """The console. Give it a `session`, or a `boot` coroutine that builds one (the demo's world build)."""

    CSS_PATH = "app.tcss"
    TITLE = "eagle3-tui"
    COMMANDS: ClassVar = App.COMMANDS | {_console_commands}
    BINDINGS: ClassVar[list[Binding]] = keys.APP_BINDINGS  # type: ignore[assignment]

    def __init__(
        self,
        session: Any = None,
        *,
        boot: Callable[[Callable[[str], None]], Awaitable[Any]] | None = None,
        start: Callable[[Any], Awaitable[None]] | None = None,
        on_exit: Callable[[Any], Awaitable[None]] | None = None,
        hint: str = "",
        boot_screen: bool = True,
        clock: Callable[[], float] = time.time,
        theme_name: str | None = None,
        keymap: dict[str, str] | None = None,
        theme_dirs: Iterable[Path] | None = None,
        screenshot_dir: str | Path | None = None,
        chart_hz: float = 2.0,
        bench_opts: dict[str, Any] | None = None,
        check_opts: dict[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.session: Any = session
        self._boot = boot
        self._boot_screen = boot_screen
        self._start = start
        self.on_exit_hook = on_exit
        self.hint = hint
        self.clock = clock
        self.keymap: dict[str, str] = dict(keymap or {})
        self.window_s = 300.0
        self.screenshot_dir = Path(screenshot_dir) if screenshot_dir else Path.cwd()
        self.chart_hz = chart_hz
        self.bench_opts = dict(bench_opts or {})  # e.g. num_prompts for a short benchmark
        self.check_opts = dict(check_opts or {})
        self.user_theme_names: set[str] = set()
        self._theme_errors: list[str] = []
        self._requested_theme = theme_name
        self._register_themes(
            list(theme_dirs) if theme_dirs is not None else [builtin_theme_dir(), user_theme_dir()]
        )
        self.jobs: dict[str, Worker[Any]] = {}
        self.restarting = False
        self.quitting = False
        self.exit_cleanup: Callable[[], None] | None = None  # launch.py's temp-dir removal, for a hang-up
        self.hangup_hook: Callable[[], None] | None = None  # launch.py's synchronous emergency stop
        self.panes_ready = False
        self._strips_dirty = True
        self._charts_dirty = True
        self._chart_widgets: list[Any] = []
        self.session_wired = False

    # -- themes ------------------------------------------------------------------------------------
    def _register_themes(self, dirs: list[Path]) -> None:
        themes, errors = load_themes(dirs)
        builtin = builtin_theme_dir().resolve()
        for theme in themes:
            self.register_theme(theme)
        for d in dirs:
            if d.resolve() != builtin and d.is_dir():
                self.user_theme_names |= {t.name for t in themes if (d / f"{t.name}.toml").exists()} | {
                    t.name for t in load_themes([d])[0]
                }
        self._theme_errors = [e.reason for e in errors]
        wanted = self._requested_theme or DEFAULT_THEME
        if wanted not in self.available_themes:
            self._theme_errors.append(f"theme {wanted!r} not found; using {DEFAULT_THEME}")
            wanted = DEFAULT_THEME if DEFAULT_THEME in self.available_themes else "textual-dark"
        self.theme = wanted

    def get_theme_variable_defaults(self) -> dict[str, str]:
        return dict(SEMANTIC_DEFAULTS)

    def action_next_theme(self) -> None:
        names = sorted(
            n for n in self.available_themes if n.startswith("eagle3-") or n in self.user_theme_names
        )
        if names:
            i = names.index(self.theme) if self.theme in names else -1
            self.theme = names[(i + 1) % len(names)]
            self.notify(f"theme {self.theme}", timeout=2)

    def watch_theme(self, theme: str) -> None:
        if not self.screen_stack:
            return
        for chart in self._charts():
            chart.dirty = True
        for pane in self.query(LogPane):
            pane.apply_theme()

    # -- layout ----------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield StatusBar(clock=self.clock, id="status")
        with TabbedContent(initial="live", id="tabs"):
            with TabPane("1 Live", id="live"):
                # Everything inside the panes mounts right after the first frame (plotext alone costs
                # ~100 ms to import and build): the first frame is the status bar, the tabs and the keys.
                yield Horizontal(id="charts")
                yield Horizontal(id="strips")
                yield Vertical(id="log-holder")
            with TabPane("2 Findings", id="findings"):
                pass
            with TabPane("3 Config", id="config"):
                pass
            with TabPane("4 Accuracy", id="accuracy"):
                pass
            with TabPane("5 Ledger", id="ledger"):
                pass
        yield Label(escape(self.hint), id="hint")
        yield Footer()

    def on_resize(self, event: Any) -> None:
        # Small terminals (80x24): the charts shrink so the log keeps some rows.
        self.screen.set_class(self.size.height < 32, "-short")

    def on_mount(self) -> None:
        self.screen.set_class(self.size.height < 32, "-short")
        if not self.is_headless:
            # A closed terminal (SIGHUP) or a kill (SIGTERM) quits through the normal path, so the
            # demo's server is stopped rather than left running.
            loop = asyncio.get_running_loop()
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signal.SIGTERM, self._on_signal, False)
            with contextlib.suppress(ValueError, OSError):
                signal.signal(signal.SIGHUP, self._on_sighup)
        if self.keymap:
            self.set_keymap(self.keymap)
        for reason in self._theme_errors:
            self.notify(reason, severity="warning", timeout=8)
        if not self.hint:
            self.query_one("#hint").display = False
        self.set_interval(1.0 / max(self.chart_hz, 0.1), self._chart_tick)
        self.set_interval(1.0, self._second_tick)
        # The hidden panes mount after the first frame: the first frame pays only for what it shows.
        self.call_after_refresh(self._mount_hidden_panes)
        if self._boot is not None and self.session is None:
            if self._boot_screen:
                from eagle3_tui.ui.screens.boot import BootScreen

                self.push_screen(BootScreen())
            # After the first frame: booting imports the session (and, for the demo, builds the world).
            self.call_after_refresh(self._run_boot)

    async def _mount_hidden_panes(self) -> None:
        from eagle3_tui.ui.widgets.accuracy_pane import AccuracyPane
        from eagle3_tui.ui.widgets.charts import TimeChart
        from eagle3_tui.ui.widgets.config_pane import ConfigPane
        from eagle3_tui.ui.widgets.findings import FindingsPane
        from eagle3_tui.ui.widgets.ledger_pane import LedgerPane

        charts = self.query_one("#charts", Horizontal)
        if not charts.is_attached:
            return
        await self.query_one("#strips", Horizontal).mount(
            Strip("running requests", id="strip-running"),
            Strip("token usage", id="strip-usage"),
            Label("", id="window-label"),
        )
        self._update_window_label()
        await self.query_one("#log-holder", Vertical).mount(LogPane(id="logpane"))
        self._chart_widgets = [
            TimeChart(
                "accept length",
                self._accept_data,
                color_var="chart-accept",
                y_label="tokens",
                max_hz=self.chart_hz,
                id="chart-accept",
            ),
            TimeChart(
                "generation tok/s",
                self._tps_data,
                color_var="chart-tps",
                y_label="tok/s",
                max_hz=self.chart_hz,
                id="chart-tps",
            ),
        ]
        await charts.mount(*self._chart_widgets)
        for tab, pane in (
            ("findings", FindingsPane(id="findings-pane")),
            ("config", ConfigPane(id="config-pane")),
            ("accuracy", AccuracyPane(id="accuracy-pane")),
            ("ledger", LedgerPane(id="ledger-pane")),
        ):
            target = self.query_one(f"#{tab}", TabPane)
            if not target.is_attached:
                return
            await target.mount(pane)
        self.panes_ready = True
        if self.session is not None:
            self._wire_session()

    @property
    def readonly(self) -> bool:
        return bool(getattr(self.session, "readonly", False))

    # -- session wiring ----------------------------------------------------------------------------
    def _wire_session(self) -> None:
        s = self.session
        self.session_wired = True
        s.add_listener(self._listener)
        self._render_all()
        if self._start is not None:
            self._run_job("attach", self._start(s), "attach")

    def _listener(self, event: Any) -> None:
        self.post_message(SessionEvent(event))

    @work(group="boot", exit_on_error=False)
    async def _run_boot(self) -> None:
        assert self._boot is not None

        def progress(text: str) -> None:
            self.post_message(BootProgress(text))

        try:
            self.session = await self._boot(progress)
        except Exception as err:  # a failed boot is a message on the boot screen, not a traceback
            screen = self.screen
            if getattr(screen, "is_boot_screen", False):
                screen.failed(str(err) or type(err).__name__)
            self.notify(str(err) or type(err).__name__, severity="error", timeout=30)
            return
        if getattr(self.screen, "is_boot_screen", False):
            self.pop_screen()
        if self.panes_ready:
            self._wire_session()

    def on_boot_progress(self, message: BootProgress) -> None:
        if getattr(self.screen, "is_boot_screen", False):
            self.screen.add(message.text)

    def _render_all(self) -> None:
        s = self.session
        self.query_one(StatusBar).refresh_from(s)
        self.query_one("#findings-pane").set_findings(s.findings)
        self._refresh_presets()
        self.query_one("#config-pane").set_served(s.server, self.readonly)
        if s.check is not None:
            self.query_one("#accuracy-pane").show_report(s.check, self._served_boundaries())
        self._refresh_ledger()
        self._mark_charts()
        self.refresh_bindings()

    def _served_boundaries(self) -> tuple[int, ...] | None:
        b = getattr(self.session.server, "boundaries", None)
        return tuple(b) if b is not None else None

    def preset_list(self) -> list[Any]:
        if self.session is None:
            return []
        try:
            return list(self.session.presets())
        except Exception as err:
            self.notify(f"cannot list presets: {err}", severity="error")
            return []

    def _refresh_presets(self) -> None:
        self.query_one("#config-pane").set_presets(
            self.preset_list(), getattr(self.session.server, "active_preset", None)
        )

    def _refresh_ledger(self) -> None:
        try:
            rows = self.session.ledger_rows()
        except Exception as err:  # an unreadable ledger is a toast; the rest keeps working
            self.notify(f"ledger unreadable: {err}", severity="warning")
            return
        self.query_one("#ledger-pane").set_rows(rows)

    @on(SessionEvent)
    def _on_session_event(self, message: SessionEvent) -> None:
        handler = getattr(self, f"_ev_{message.kind}", None)
        if handler is None or not self.panes_ready:
            return
        with contextlib.suppress(NoMatches):  # events that arrive while the screen is torn down
            handler(message.event)

    def _ev_ConnectionChanged(self, ev: Any) -> None:
        kind = getattr(ev.conn, "kind", "")
        self.query_one(StatusBar).refresh_from(self.session)
        if kind == "failed":
            self.notify(f"connection failed: {getattr(ev.conn, 'reason', '')}", severity="error", timeout=10)
        elif kind == "reconnecting" and getattr(ev.conn, "attempt", 0) == 1:
            self.notify("connection lost, reconnecting…", severity="warning")

    def _ev_ServerChanged(self, ev: Any) -> None:
        self.query_one(StatusBar).refresh_from(self.session)
        self.query_one("#config-pane").set_served(ev.server, self.readonly)
        self._refresh_presets()
        if getattr(ev.server, "state", "") == "failed":
            tail = list(getattr(ev.server, "log_tail", None) or [])[-5:]
            self.notify("server failed\n" + "\n".join(tail), severity="error", timeout=15)
        self._mark_charts()

    def _ev_LogBatch(self, ev: Any) -> None:
        self.query_one(LogPane).add_lines(ev.lines)

    def _ev_StatsUpdated(self, ev: Any) -> None:
        self._mark_charts()

    def _ev_FindingsChanged(self, ev: Any) -> None:
        self.query_one("#findings-pane").set_findings(ev.findings)
        self.query_one(StatusBar).refresh_from(self.session)

    def _ev_RestartProgress(self, ev: Any) -> None:
        note = f"restart: {ev.phase} {ev.message} ({ev.elapsed_s:.0f}s)"
        bar = self.query_one(StatusBar)
        bar.restart_note = note if ev.phase not in ("ready", "failed", "done") else ""
        bar.refresh_from(self.session)
        self.query_one("#config-pane").show_restart(None if not bar.restart_note else note)

    def _ev_CheckProgress(self, ev: Any) -> None:
        self.query_one("#accuracy-pane").show_progress(ev.done, ev.total, ev.eta_s, ev.wiring)

    def _ev_CheckFinished(self, ev: Any) -> None:
        pane = self.query_one("#accuracy-pane")
        if ev.error == "cancelled":
            pane.show_stopped("check cancelled: the job on the host was stopped")
        elif ev.error:
            pane.show_stopped(f"[$accept-bad]check failed:[/] {escape(str(ev.error))}")
            self.notify(f"check failed: {ev.error}", severity="error", timeout=10)
        elif ev.report is not None:
            pane.show_report(ev.report, self._served_boundaries())
            self.notify("accuracy check finished", timeout=4)
        self.query_one(StatusBar).refresh_from(self.session)
        self._mark_charts()

    def _ev_BenchProgress(self, ev: Any) -> None:
        self.query_one("#ledger-pane").show_progress(ev.done, ev.total, "benchmark")

    def _ev_BenchFinished(self, ev: Any) -> None:
        self.query_one("#ledger-pane").hide_progress()
        if ev.error:
            self.notify(f"benchmark failed: {ev.error}", severity="error", timeout=10)
        else:
            r = ev.result
            self.notify(
                f"{'baseline' if getattr(r, 'baseline', False) else 'benchmark'}: "
                f"{fmt_num(getattr(r, 'output_tps', None), 1)} tok/s, accept len {fmt_num(getattr(r, 'accept_len', None))}",
                timeout=6,
            )

    def _ev_LedgerChanged(self, ev: Any) -> None:
        self._refresh_ledger()

    def _ev_Notice(self, ev: Any) -> None:
        sev = {"error": "error", "warning": "warning"}.get(getattr(ev, "severity", "info"), "information")
        self.notify(str(ev.message), severity=sev, timeout=8 if sev != "information" else 4)  # type: ignore[arg-type]

    # -- charts --------------------------------------------------------------------------------------
    def _mark_charts(self) -> None:
        """Cheap on purpose (called for every StatsUpdated): the ticks below do the work."""
        self._charts_dirty = True
        self._strips_dirty = True

    def _charts(self) -> list[Any]:
        return self._chart_widgets

    def _chart_tick(self) -> None:
        if self.session is None or not self.panes_ready or self.quitting:
            return
        now = time.monotonic()
        if self._charts_dirty:
            self._charts_dirty = False
            for chart in self._chart_widgets:
                chart.dirty = True
        for chart in self._chart_widgets:
            chart.maybe_redraw(now)

    def _second_tick(self) -> None:
        if self.session is None or not self.panes_ready or self.quitting:
            return
        with contextlib.suppress(NoMatches):  # the screen is being torn down
            self.query_one(StatusBar).tick()
            self.query_one(LogPane).tick()
        if self._strips_dirty:  # sparklines once a second: cheap to draw, but each reads the rings
            self._strips_dirty = False
            self._update_strips()

    def _t_end(self) -> float:
        return self.clock()

    def _ring_data(self, name: str, n: int) -> ChartData:
        tel = self.session.telemetry
        data = ChartData(window_s=self.window_s)
        ring = tel.series.get(name) if hasattr(tel.series, "get") else tel.series[name]
        t_end = self._t_end()
        t0 = t_end - self.window_s
        if ring is not None and len(ring):
            for b in ring.downsample(n, t0, t_end):
                data.xs.append(b.t - t_end)
                data.ys.append(b.mean)
        for m in list(getattr(tel, "markers", []) or []):
            t, label = _marker(m)
            data.markers.append((t - t_end, label))
        return data

    def _accept_data(self, n: int) -> ChartData:
        data = self._ring_data("accept_len", n)
        predicted = _predicted(self.session)
        if predicted:
            data.references.append((float(predicted), f"check predicts {predicted:.2f}"))
        return data

    def _tps_data(self, n: int) -> ChartData:
        data = self._ring_data("gen_tps", n)
        base = getattr(self.session.telemetry, "baseline_tps", None)
        if base:
            data.references.append((float(base), f"baseline {base:.1f}"))
        return data

    def _update_strips(self) -> None:
        tel = self.session.telemetry
        t_end = self._t_end()
        for strip_id, name, fmt in (
            ("#strip-running", "running_req", lambda v: f"{v:.0f}"),
            ("#strip-usage", "token_usage", lambda v: f"{v:.2f}"),
        ):
            strip = self.query_one(strip_id, Strip)
            ring = tel.series[name]
            width = max(strip.size.width, 20)
            if len(ring):
                buckets = ring.downsample(width, t_end - self.window_s, t_end)
                values = [b.hi for b in buckets]
                last = ring.last()
                last_v = last[1] if isinstance(last, tuple) else last
                strip.set_values(values, fmt(last_v) if last_v is not None else "–")
            else:
                strip.set_values([], "–")

    def set_window(self, seconds: float) -> None:
        self.window_s = float(seconds)
        self._update_window_label()
        self._mark_charts()

    def action_window(self, step: int) -> None:
        try:
            i = WINDOWS.index(self.window_s)
        except ValueError:
            i = 1
        self.set_window(WINDOWS[max(0, min(len(WINDOWS) - 1, i + step))])

    def _update_window_label(self) -> None:
        w = self.window_s
        text = f"{w / 3600:.0f} h" if w >= 3600 else f"{w / 60:.0f} min"
        self.query_one("#window-label", Label).update(f"window {text} (-/+)")

    # -- log actions ------------------------------------------------------------------------------------
    def action_filter(self) -> None:
        self.action_show_tab("live")
        self.query_one(LogPane).open_filter()

    def action_pause(self) -> None:
        self.query_one(LogPane).toggle_pause()

    def action_log_top(self) -> None:
        self.query_one(LogPane).top()

    def action_log_bottom(self) -> None:
        self.query_one(LogPane).bottom()

    def action_wrap(self) -> None:
        pane = self.query_one(LogPane)
        pane.toggle_wrap()
        self.notify("wrap on" if pane.wrap else "wrap off", timeout=2)

    @on(LogPane.FilterError)
    def _filter_error(self, message: LogPane.FilterError) -> None:
        self.notify(message.error, severity="error")

    # -- tabs -----------------------------------------------------------------------------------------------
    def action_show_tab(self, tab: str) -> None:
        self.query_one(TabbedContent).active = tab
        focus = {
            "live": "#log",
            "findings": "#findings-list",
            "config": "#preset-list",
            "accuracy": "#check-table",
            "ledger": "#ledger-table",
        }[tab]
        self.query_one(focus).focus()
        if tab == "live":
            self._mark_charts()

    @on(TabbedContent.TabActivated)
    def _tab_changed(self, event: TabbedContent.TabActivated) -> None:
        self._mark_charts()
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if (
            action in ("filter", "pause", "log_top", "log_bottom", "wrap", "window", "cancel")
            and not self.panes_ready
        ):
            return False
        if action in keys.CHANGING and self.readonly:
            return False
        if action == "apply_preset":
            try:
                return self.query_one(TabbedContent).active == "config"
            except Exception:
                return False
        if (
            action in ("rollback", "restart", "check", "bench", "bench_baseline", "preset")
            and self.session is None
        ):
            return False
        return True

    # -- config actions -------------------------------------------------------------------------------------
    def action_preset(self, step: int) -> None:
        self.action_show_tab("config")
        pane = self.query_one("#config-pane")
        preset = pane.cycle(step)
        if preset is not None:
            pane.query_one("#preset-list").focus()

    def action_apply_preset(self) -> None:
        preset = self.query_one("#config-pane").selected
        if preset is None:
            self.notify("no preset selected", severity="warning")
            return
        self.apply_preset_named(preset.name)

    def on_option_list_option_selected(self, event: Any) -> None:
        if event.option_list.id == "preset-list" and not self.readonly:
            self.action_apply_preset()

    def apply_preset_named(self, name: str) -> None:
        if self.readonly:
            self.notify("read-only: presets cannot be applied", severity="warning")
            return
        if self._busy("restart"):
            self.notify("a restart is already running", severity="warning")
            return
        self._plan_and_confirm(name)

    @work(group="plan", exclusive=True, exit_on_error=False)
    async def _plan_and_confirm(self, name: str) -> None:
        try:
            plan = await self.session.plan_apply(name)
        except Exception as err:
            self.notify(_err_text(err), severity="error", timeout=10)
            return
        deadline = getattr(getattr(self.session, "profile", None), "restart_deadline_s", None)
        from eagle3_tui.ui.screens.modals import DiffModal

        confirmed = await self.push_screen_wait(DiffModal(plan, deadline_s=deadline))
        if confirmed:
            self._run_job("restart", self.session.apply(plan), f"apply {name}", done=f"preset {name} applied")

    def action_rollback(self) -> None:
        def go(yes: bool | None) -> None:
            if yes:
                self._run_job("restart", self.session.rollback(), "rollback", done="rolled back")

        self.push_screen(
            _confirm("Roll back the last applied change and restart the server?", yes="Roll back"), go
        )

    def action_restart(self) -> None:
        def go(yes: bool | None) -> None:
            if yes:
                self._run_job("restart", self.session.restart(), "restart", done="server restarted")

        self.push_screen(_confirm("Restart the server now? Requests in flight will fail.", yes="Restart"), go)

    # -- jobs -----------------------------------------------------------------------------------------------
    def _busy(self, group: str) -> bool:
        w = self.jobs.get(group)
        return w is not None and w.is_running

    def _run_job(
        self,
        group: str,
        coro: Awaitable[Any],
        label: str,
        *,
        done: str | None = None,
        on_error: Callable[[str], None] | None = None,
    ) -> Worker[Any]:
        """Run a session call as a worker: failures are a toast (and `on_error` resets the pane
        that showed progress), never a crash."""

        async def job() -> Any:
            try:
                result = await coro
            except asyncio.CancelledError:
                self.notify(f"{label} cancelled", severity="warning")
                if on_error is not None:
                    on_error("cancelled")
                raise
            except Exception as err:
                self.notify(f"{label} failed: {_err_text(err)}", severity="error", timeout=12)
                if on_error is not None:
                    on_error(_err_text(err))
                return None
            if done:
                self.notify(done, timeout=4)
            return result

        worker = self.run_worker(job(), group=group, name=label, exit_on_error=False)
        self.jobs[group] = worker
        return worker

    def action_check(self) -> None:
        if self._busy("check"):
            self.notify("a check is already running (esc cancels it)", severity="warning")
            return
        self.action_show_tab("accuracy")
        self.query_one("#accuracy-pane").show_started()
        self._run_job("check", self.session.run_check(**self.check_opts), "accuracy check",
                      on_error=self._check_failed)

    def _check_failed(self, why: str) -> None:
        pane = self.query_one("#accuracy-pane")
        if why == "cancelled":
            pane.show_stopped("check cancelled: the job on the host was stopped")
        else:
            pane.show_stopped(f"[$accept-bad]check failed:[/] {escape(why)}")

    def action_cancel(self) -> None:
        pane = self.query_one(LogPane)
        if pane.has_class("filtering"):
            pane.close_filter()
            return
        for group, note in (
            ("check", "check cancelled: the job on the host was stopped"),
            ("bench", "benchmark cancelled"),
        ):
            w = self.jobs.get(group)
            if w is not None and w.is_running:
                w.cancel()
                if group == "check":
                    self.query_one("#accuracy-pane").show_stopped(note)
                else:
                    self.query_one("#ledger-pane").hide_progress()
                return

    def action_bench(self) -> None:
        self._bench(baseline=False)

    def action_bench_baseline(self) -> None:
        self._bench(baseline=True)

    def _bench(self, *, baseline: bool) -> None:
        if self._busy("bench"):
            self.notify("a benchmark is already running", severity="warning")
            return
        self.action_show_tab("ledger")
        self.query_one("#ledger-pane").show_progress(0, 1, "baseline benchmark" if baseline else "benchmark")
        self._run_job(
            "bench",
            self.session.benchmark(baseline=baseline, **self.bench_opts),
            "baseline benchmark" if baseline else "benchmark",
            on_error=lambda _why: self.query_one("#ledger-pane").hide_progress(),
        )

    # -- general -------------------------------------------------------------------------------------------
    def action_help(self) -> None:
        from eagle3_tui.ui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.keymap, self.readonly))

    def action_screenshot(self) -> None:
        try:
            self.screenshot_dir.mkdir(parents=True, exist_ok=True)
            path = self.save_screenshot(path=str(self.screenshot_dir))
        except OSError as err:
            self.notify(f"screenshot failed: {err}", severity="error")
            return
        self.notify(f"screenshot saved: {path}", timeout=6)

    async def action_quit(self) -> None:
        running = [
            label
            for group, label in (("restart", "a restart"), ("check", "a check"), ("bench", "a benchmark"))
            if self._busy(group)
        ]
        if running:

            def go(yes: bool | None) -> None:
                if yes:
                    self.run_worker(self.shutdown_and_exit(), group="quit", exit_on_error=False)

            self.push_screen(
                _confirm(f"{' and '.join(running).capitalize()} is running. Quit anyway?", yes="Quit"), go
            )
            return
        await self.shutdown_and_exit()

    def _on_signal(self, hangup: bool) -> None:
        self.run_worker(self.shutdown_and_exit(), group="quit", exit_on_error=False)

    async def _settle_jobs(self) -> None:
        """Before leaving: cancel a check or benchmark (their host jobs end with them), but let a
        restart finish (it has its own deadline) so no half-started server is left behind."""
        restart = self.jobs.get("restart")
        if restart is not None and restart.is_running:
            self.notify("waiting for the restart to finish before quitting…", timeout=30)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(restart.wait(), 900)
        running = [w for w in self.jobs.values() if w.is_running]
        for w in running:
            w.cancel()
        for w in running:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(w.wait(), 30)

    def _on_sighup(self, signum: int, frame: Any) -> None:
        """The terminal is gone. Textual's loop may already be stuck writing to the dead tty, so the
        way out runs in a thread: the launcher's emergency stop (the demo's server), its cleanup,
        then exit."""
        self.quitting = True

        def leave() -> None:
            for hook in (self.hangup_hook, self.exit_cleanup):
                if hook is not None:
                    with contextlib.suppress(Exception):
                        hook()
            os._exit(129)

        threading.Thread(target=leave, name="eagle3-hangup").start()

    async def shutdown_and_exit(self) -> None:
        if self.quitting:
            return
        self.quitting = True
        await self._settle_jobs()
        if self.session is not None and self.on_exit_hook is not None:
            self.notify("stopping…", timeout=30)
            try:
                await self.on_exit_hook(self.session)
            except Exception as err:  # quitting must not crash; say what was left behind
                self.notify(f"while quitting: {_err_text(err)}", severity="error")
        self.exit(0)



def _confirm(question: str, *, yes: str) -> Any:
    from eagle3_tui.ui.screens.modals import ConfirmModal

    return ConfirmModal(question, yes=yes)


def _marker(m: Any) -> tuple[float, str]:
    if isinstance(m, tuple):
        return float(m[0]), str(m[1])
    return float(m.t), str(getattr(m, "label", ""))


def _err_text(err: BaseException) -> str:
    return str(err) or type(err).__name__
