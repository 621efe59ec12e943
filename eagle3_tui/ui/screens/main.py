"""The main screen: the status bar, the five tabs and the session's jobs.

Session events arrive as `FromSession.*` messages (ui/messages.py), each with its own handler; what a
widget shows comes from the view model over a snapshot of the session. The screen owns the verbs that
start jobs on the host (apply, roll back, restart, check, benchmark) so they work from every tab; the
panes own the keys that only mean something inside them.
"""

from __future__ import annotations

import contextlib
import functools
import gc
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar, TypeVar, cast

from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.dom import DOMNode
from textual.markup import escape
from textual.message import Message
from textual.screen import Screen
from textual.widget import MountError, Widget
from textual.widgets import Footer, Label, TabbedContent, TabPane

from eagle3_tui.ui import keys
from eagle3_tui.ui import viewmodel as vm
from eagle3_tui.ui.jobs import Jobs, err_text
from eagle3_tui.ui.messages import FromSession, SessionMessage, message_for
from eagle3_tui.ui.options import ConsoleOptions, SessionHook
from eagle3_tui.ui.widgets.config_pane import ConfigPane
from eagle3_tui.ui.widgets.live_pane import LivePane
from eagle3_tui.ui.widgets.log_pane import LogPane
from eagle3_tui.ui.widgets.status_bar import StatusBar

if TYPE_CHECKING:
    from eagle3_tui.profile import Preset
    from eagle3_tui.session import Session, Sweep, SweepResult, SweepStep
    from eagle3_tui.telemetry.ledger import LedgerRow
    from eagle3_tui.ui.keys import Key
    from eagle3_tui.ui.screens.modals import ConfirmModal
    from eagle3_tui.ui.widgets.accuracy_pane import AccuracyPane
    from eagle3_tui.ui.widgets.findings import FindingsPane
    from eagle3_tui.ui.widgets.ledger_pane import LedgerPane

M = TypeVar("M", bound=SessionMessage)

# Tab id → the widget that takes the focus when the tab is shown.
FOCUS = {
    "live": "#log",
    "findings": "#findings-list",
    "config": "#preset-list",
    "accuracy": "#check-table",
    "ledger": "#ledger-table",
}
CHECK_STOPPED = "check cancelled: the job on the host was stopped"
SWEEP_LIMIT = 4  # the console sweep serves this many of the predicted best unless sweep_opts says otherwise


def while_mounted(handler: Callable[[MainScreen, M], None]) -> Callable[[MainScreen, M], None]:
    """A session message handler that does nothing before the panes exist or while they are torn down."""

    @functools.wraps(handler)
    def guarded(self: MainScreen, message: M) -> None:
        if not self.panes_ready:
            return
        with contextlib.suppress(NoMatches):
            handler(self, message)

    return guarded


class MainScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("p", "preset(1)", "Preset", tooltip="Select the next preset (Config pane)", id="preset-next"),
        Binding("P", "preset(-1)", "Previous preset", show=False, id="preset-prev"),
        Binding("u", "rollback", "Roll back last apply", show=False, id="rollback"),
        Binding("R", "restart", "Restart server", show=False, id="restart"),
        Binding("c", "check", "Check", tooltip="Run the standalone accuracy check on the host", id="check"),
        Binding("escape", "cancel", "Cancel the check / benchmark, stop a sweep", show=False, id="cancel"),
        Binding("b", "bench", "Bench", tooltip="Run a benchmark through the HTTP API", id="bench"),
        Binding("B", "bench_baseline", "Baseline benchmark (no speculation)", show=False, id="bench-baseline"),
        Binding(
            "S", "sweep", "Flag sweep",
            tooltip="Flag sweep: serve the best configs in turn, benchmark each, restore",
            show=False, id="sweep",
        ),
        Binding("r", "report", "Write report (Markdown + PNG charts)",
                tooltip="Write the shareable report: Markdown with PNG charts, into a new folder", show=False, id="report"),
        Binding("1", "show_tab('live')", "Live", show=False, id="tab-live"),
        Binding("2", "show_tab('findings')", "Findings", show=False, id="tab-findings"),
        Binding("3", "show_tab('config')", "Config", show=False, id="tab-config"),
        Binding("4", "show_tab('accuracy')", "Accuracy", show=False, id="tab-accuracy"),
        Binding("5", "show_tab('ledger')", "Ledger", show=False, id="tab-ledger"),
        Binding("backspace", "back", "Fleet", tooltip="Back to the fleet (esc too, when nothing runs to cancel)",
                id="fleet-back"),
    ]

    class SweepProgressed(Message):
        """A sweep step ended (posted from the sweep's progress callback)."""

        def __init__(self, done: int, total: int, step: SweepStep | None, eta_s: float | None) -> None:
            super().__init__()
            self.done, self.total, self.step, self.eta_s = done, total, step, eta_s

    def __init__(self, options: ConsoleOptions, *, back: Callable[[], None] | None = None) -> None:
        super().__init__()
        self.options = options
        self.back = back
        """Returns to the fleet this server was opened from (None: no fleet)."""
        self.clock = options.clock
        self.session: Session | None = None
        self.jobs = Jobs(self)
        self.panes_ready = False
        self._panes_mounting = False
        self.session_wired = False
        self._heap_frozen = False
        self.restart_note = ""
        self._start: SessionHook | None = None
        self._shown_by_key: str | None = None
        self.sweep: Sweep | None = None
        """The running flag sweep (None: none runs)."""
        self._sweep_stopping = False

    # -- layout -----------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        with TabbedContent(initial="live", id="tabs"):
            with TabPane("1 Live", id="live"):
                yield LivePane(self.snapshot, clock=self.clock, chart_hz=self.options.chart_hz, id="live-pane")
            for title, tab in (("2 Findings", "findings"), ("3 Config", "config"), ("4 Accuracy", "accuracy"), ("5 Ledger", "ledger")):
                yield TabPane(title, id=tab)
        yield Label(escape(self.options.hint), id="hint")
        yield Footer()

    def on_mount(self) -> None:
        self._set_short()
        self.query_one("#hint").display = bool(self.options.hint)
        self.set_interval(1.0 / max(self.options.chart_hz, 0.1), self._chart_tick)
        self.set_interval(1.0, self._second_tick)
        self._schedule_panes()

    def on_screen_resume(self) -> None:
        self._schedule_panes()

    def _schedule_panes(self) -> None:
        """Mount the panes after the next frame: the first frame pays only for what it shows.

        Textual hands a deferred callback to whichever screen is on top when it is processed: the boot
        screen, during the demo's boot. A boot that ends before that screen repaints pops it with the
        callback unrun, so resuming this screen schedules the mount again (textual 8.2,
        `MessagePump._on_invoke_later`); the flags keep it to one mount."""
        if not self.panes_ready and not self._panes_mounting:
            self.call_after_refresh(self._mount_panes)

    def on_resize(self) -> None:
        self._set_short()

    def _set_short(self) -> None:
        # Small terminals (80x24): the charts shrink so the log keeps some rows.
        self.set_class(self.app.size.height < 32, "-short")

    async def _mount_panes(self) -> None:
        live = self.live
        if self.panes_ready or self._panes_mounting or not live.is_attached:
            return
        self._panes_mounting = True
        try:
            await self._mount_pane_widgets(live)
        except MountError:
            if not getattr(self.app, "quitting", False):
                raise
            # a quit (q, a signal) landed while the panes mounted: the screen is going away with them
        finally:
            self._panes_mounting = False

    async def _mount_pane_widgets(self, live: LivePane) -> None:
        from eagle3_tui.ui.widgets.accuracy_pane import AccuracyPane
        from eagle3_tui.ui.widgets.findings import FindingsPane
        from eagle3_tui.ui.widgets.ledger_pane import LedgerPane

        await live.mount_charts()
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
        self._focus_tab(self.tabs.active)
        if self.session is not None:
            self._wire_session()

    # -- typed accessors ----------------------------------------------------------------------------
    @property
    def tabs(self) -> TabbedContent:
        return self.query_one(TabbedContent)

    @property
    def status(self) -> StatusBar:
        return self.query_one(StatusBar)

    @property
    def live(self) -> LivePane:
        return self.query_one(LivePane)

    @property
    def log_pane(self) -> LogPane:
        return self.query_one(LogPane)

    @property
    def findings_pane(self) -> FindingsPane:
        from eagle3_tui.ui.widgets.findings import FindingsPane

        return self.query_one(FindingsPane)

    @property
    def config_pane(self) -> ConfigPane:
        return self.query_one(ConfigPane)

    @property
    def accuracy_pane(self) -> AccuracyPane:
        from eagle3_tui.ui.widgets.accuracy_pane import AccuracyPane

        return self.query_one(AccuracyPane)

    @property
    def ledger_pane(self) -> LedgerPane:
        from eagle3_tui.ui.widgets.ledger_pane import LedgerPane

        return self.query_one(LedgerPane)

    @property
    def readonly(self) -> bool:
        return bool(self.session is not None and self.session.readonly)

    def snapshot(self) -> vm.Snapshot | None:
        return vm.snapshot_of(self.session) if self.session is not None else None

    # -- the session --------------------------------------------------------------------------------
    def attach_session(self, session: Session, start: SessionHook | None = None) -> None:
        """Show this session (now, or once the panes are mounted) and run `start` as the attach job."""
        self.session = session
        self._start = start
        if self.panes_ready:
            self._wire_session()

    def _freeze_heap(self) -> None:
        """The console is built: take its objects out of the collector's sight, as run_console does
        with the imports'. A full collection walks every tracked object, several a minute in a log
        flood: they were the slowest key presses (benchmarks/ui_bench.py; benchmarks/MEASURED.md).
        Objects that die later are freed as usual,
        unless in a cycle: `on_unmount` gives them back to the collector (an app in a test process)."""
        gc.freeze()
        self._heap_frozen = True

    def on_unmount(self) -> None:
        if self._heap_frozen:
            gc.unfreeze()
            self._heap_frozen = False

    def _wire_session(self) -> None:
        session = self.session
        assert session is not None
        self.session_wired = True
        session.add_listener(self._listener)
        self._render_all(session)
        self.call_after_refresh(self._freeze_heap)
        if self._start is not None:
            self.jobs.run("attach", self._start(session), "attach")

    def detach_session(self) -> None:
        if self.session is not None and self.session_wired:
            with contextlib.suppress(ValueError):
                self.session.remove_listener(self._listener)

    def _listener(self, event: object) -> None:
        """Called by the session, from any task or thread: post the event's message to this screen."""
        message = message_for(event)
        if message is not None:
            self.post_message(message)

    def _render_all(self, session: Session) -> None:
        self._show_status()
        self.findings_pane.findings = tuple(session.findings or ())
        self._show_presets()
        self.config_pane.served = session.server
        self.config_pane.readonly = session.readonly
        self.accuracy_pane.served = session.server.boundaries
        self.accuracy_pane.served_flags = vm.served_config(session.server)
        self.accuracy_pane.report = session.check
        self.accuracy_pane.data_known = bool(session.profile.data_glob or session.profile.data_slots)
        self._reload_ledger_rows()
        self.live.mark_dirty()
        self.refresh_bindings()

    def _show_status(self) -> None:
        snap = self.snapshot()
        if snap is not None:
            self.status.parts = vm.status_parts(snap, now=self.clock(), restart_note=self.restart_note)

    def preset_list(self) -> list[Preset]:
        if self.session is None:
            return []
        try:
            return list(self.session.presets.available())
        except Exception as err:
            self.notify(f"cannot list presets: {err_text(err)}", severity="error")
            return []

    def _show_presets(self) -> None:
        pane = self.config_pane
        pane.presets = tuple(self.preset_list())
        pane.active = self.session.server.active_preset if self.session is not None else None

    def _ledger_or_none(self) -> list[LedgerRow]:
        """The ledger's rows, or none when it cannot be read (the check runs all the same)."""
        try:
            return list(self.session.records.rows()) if self.session is not None else []
        except Exception:
            return []

    def _reload_ledger_rows(self) -> None:
        if self.session is None:
            return
        try:
            rows = self.session.records.rows()
        except Exception as err:  # an unreadable ledger is a toast; the rest keeps working
            self.notify(f"ledger unreadable: {err_text(err)}", severity="warning")
            return
        self.ledger_pane.rows = tuple(rows)

    # -- one handler per session event ----------------------------------------------------------------
    @on(FromSession.ConnectionChanged)
    @while_mounted
    def _show_connection(self, message: FromSession.ConnectionChanged) -> None:
        conn = message.event.conn
        self._show_status()
        if conn.kind == "failed":
            self.notify(f"connection failed: {conn.reason or ''}", severity="error", timeout=10)
        elif conn.kind == "reconnecting" and conn.attempt == 1:
            self.notify("connection lost, reconnecting…", severity="warning")

    @on(FromSession.ServerChanged)
    @while_mounted
    def _show_server(self, message: FromSession.ServerChanged) -> None:
        server = message.event.server
        self._show_status()
        self.config_pane.served = server
        self.accuracy_pane.served = server.boundaries
        self.accuracy_pane.served_flags = vm.served_config(server)
        self._show_presets()
        self.refresh_bindings()  # the deployment found may refuse actions (check_action)
        if server.state == "failed":
            self.notify("server failed\n" + "\n".join(list(server.log_tail)[-5:]), severity="error", timeout=15)
        self.live.mark_dirty()

    @on(FromSession.LogBatch)
    @while_mounted
    def _append_log(self, message: FromSession.LogBatch) -> None:
        self.log_pane.add_batch(message.event.lines, message.event.events)

    @on(FromSession.StatsUpdated)
    @while_mounted
    def _mark_charts(self, message: FromSession.StatsUpdated) -> None:
        self.live.mark_dirty()

    @on(FromSession.HttpSample)
    @while_mounted
    def _log_http_sample(self, message: FromSession.HttpSample) -> None:
        """No log file: each HTTP point is a line in the log pane, so the pane says what the charts draw."""
        from eagle3_tui.telemetry.metrics import decode_line

        session = self.session
        steps = session.telemetry.num_steps if session is not None else None
        self.log_pane.add_lines([decode_line(message.event.stats, steps)])

    @on(FromSession.FindingsChanged)
    @while_mounted
    def _show_findings(self, message: FromSession.FindingsChanged) -> None:
        self.findings_pane.findings = tuple(message.event.findings)
        self._show_status()

    @on(FromSession.RestartProgress)
    @while_mounted
    def _show_restart_progress(self, message: FromSession.RestartProgress) -> None:
        ev = message.event
        self.restart_note = vm.restart_note(ev.phase, ev.message, ev.elapsed_s)
        self.config_pane.restart_note = self.restart_note
        self._show_status()

    @on(FromSession.CheckProgress)
    @while_mounted
    def _show_check_progress(self, message: FromSession.CheckProgress) -> None:
        ev = message.event
        self.accuracy_pane.progress = vm.check_progress(ev.done, ev.total, ev.eta_s, ev.wiring)

    @on(FromSession.CheckFinished)
    @while_mounted
    def _show_check_result(self, message: FromSession.CheckFinished) -> None:
        ev = message.event
        pane = self.accuracy_pane
        if ev.error == "cancelled":
            pane.stopped = CHECK_STOPPED
        elif ev.error:
            pane.stopped = f"[$accept-bad]check failed:[/] {escape(str(ev.error))}"
            self.notify(f"check failed: {ev.error}", severity="error", timeout=10)
        elif ev.report is not None:
            pane.report = ev.report
            self.notify("accuracy check finished", timeout=4)
        self._show_status()
        self.live.mark_dirty()

    @on(FromSession.BenchProgress)
    @while_mounted
    def _show_bench_progress(self, message: FromSession.BenchProgress) -> None:
        self.ledger_pane.progress = vm.bench_progress(message.event.done, message.event.total, "benchmark")

    @on(FromSession.BenchFinished)
    @while_mounted
    def _show_bench_result(self, message: FromSession.BenchFinished) -> None:
        ev = message.event
        self.ledger_pane.progress = None
        if ev.error:
            self.notify(f"benchmark failed: {ev.error}", severity="error", timeout=10)
        elif ev.result is not None:
            self.notify(vm.bench_summary(ev.result), timeout=6)

    @on(FromSession.LedgerChanged)
    @while_mounted
    def _reload_ledger(self, message: FromSession.LedgerChanged) -> None:
        self._reload_ledger_rows()

    @on(FromSession.Notice)
    @while_mounted
    def _show_notice(self, message: FromSession.Notice) -> None:
        sev = message.event.severity
        self.notify(str(message.event.message), severity=sev, timeout=4 if sev == "information" else 8)

    # -- ticks ------------------------------------------------------------------------------------------
    def _ticking(self) -> bool:
        return self.session is not None and self.panes_ready and not getattr(self.app, "quitting", False)

    def _chart_tick(self) -> None:
        if self._ticking():
            self.live.chart_tick()

    def _second_tick(self) -> None:
        if self._ticking():
            with contextlib.suppress(NoMatches):  # the screen is being torn down
                self._show_status()
            # The strips in a callback of their own: the status summary and the strips each read every
            # ring (costly while a busy server logs), and a key press can run between the two.
            self.call_later(self._strips_tick)

    def _strips_tick(self) -> None:
        if self._ticking():
            with contextlib.suppress(NoMatches):
                self.live.second_tick()

    def theme_changed(self) -> None:
        if self.panes_ready:
            self.live.theme_changed()

    def set_window(self, seconds: float) -> None:
        self.live.window_s = float(seconds)

    # -- tabs -----------------------------------------------------------------------------------------------
    def action_show_tab(self, tab: str) -> None:
        if self.tabs.active != tab:
            self._shown_by_key = tab  # its TabActivated is ours: the focus is set here, not there
        self.tabs.active = tab
        self._focus_tab(tab)

    def _focus_tab(self, tab: str) -> None:
        if self.panes_ready:
            self.query_one(FOCUS[tab]).focus()
        if tab == "live":
            self.live.mark_dirty()

    @on(TabbedContent.TabActivated)
    def _tab_changed(self, event: TabbedContent.TabActivated) -> None:
        # A click on a tab lands where its keys work, as the digit keys do.
        if event.pane.id == self._shown_by_key:
            self._shown_by_key = None
        else:
            with contextlib.suppress(NoMatches):
                self._focus_tab(event.pane.id or "live")
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in keys.CHANGING and self.readonly:
            return False
        if self.refused(action) is not None:
            return None  # shown disabled; pressing its key says why (on_key)
        if action in ("rollback", "restart", "sweep", "check", "bench", "bench_baseline", "preset", "report"):
            return self.session is not None and self.panes_ready
        if action == "cancel":
            busy = self.jobs.busy("check") or self.jobs.busy("bench") or self.jobs.busy("sweep")
            return busy or self.back is not None  # esc with nothing to cancel goes back to the fleet
        if action == "back":
            return self.back is not None
        return True

    def refused(self, action: str) -> str | None:
        """Why the deployment (container, pod, unit, nodes) makes `action` unsafe; None when it is not."""
        from eagle3_tui.actions import host_action

        act = host_action(action)
        needs = act.needs if act is not None else ()
        if not needs or self.session is None:
            return None
        dep = self.session.deployment
        why = dep.refusals()
        reason = next((why[a] for a in needs if a in why), None)
        return None if reason is None else f"{dep.label or dep.kind}: {reason}"

    def on_key(self, event: events.Key) -> None:
        """A disabled action's key (check_action said no, so no binding ran it): say why."""
        binding = keys.owner_of_key(event.key, self.BINDINGS, self.options.keymap)
        why = None if binding is None else self.refused(binding.action)
        if binding is not None and why is not None:
            event.stop()
            self._say_refused(binding.action, why)

    def _say_refused(self, action: str, why: str) -> None:
        """Why an action is refused; a restart of a server in a pane or a pipe is offered into a log file."""
        session = self.session
        if action != "restart" or session is None or not session.deployment.restarts_into_log:
            self.notify(why, severity="warning", timeout=10)
            return
        if self._restarting():
            return

        def go(yes: bool | None) -> None:
            if yes:
                self.jobs.run("restart", session.control.restart(into_log=True), "restart", done="server restarted into a log file")

        question = (f"{why}.\n\nRestart it now, detached, logging to a file the console follows? "
                    "Requests in flight will fail.")
        self.app.push_screen(_confirm(question, yes="Restart into a log file"), go)

    def run_key(self, key: Key) -> None:
        """Run a key's action on the node that owns it, with that node's tab shown (the palette)."""
        why = self.refused(key.binding.action)
        if why is not None:
            self._say_refused(key.binding.action, why)
            return
        owner = key.owner
        node: DOMNode
        if isinstance(self.app, owner):
            node = self.app
        elif isinstance(self, owner):
            node = self
        else:
            node = self.query_one(cast("type[Widget]", owner))
            pane = next((a for a in node.ancestors_with_self if isinstance(a, TabPane)), None)
            if pane is not None and pane.id:
                self.action_show_tab(pane.id)
        self.call_later(self.app.run_action, key.binding.action, node)

    # -- config: presets, rollback, restart ---------------------------------------------------------------
    def action_preset(self, step: int) -> None:
        self.action_show_tab("config")
        self.config_pane.cycle(step)

    @on(LogPane.FilterError)
    def _filter_error(self, message: LogPane.FilterError) -> None:
        self.notify(message.error, severity="error")

    @on(ConfigPane.ApplyRequested)
    def _apply_requested(self, message: ConfigPane.ApplyRequested) -> None:
        self.apply_preset_named(message.name)

    def apply_preset_named(self, name: str) -> None:
        if self.readonly:
            self.notify("read-only: presets cannot be applied", severity="warning")
            return
        if self._restarting():
            return
        self._plan_and_confirm(name)

    def _restarting(self) -> bool:
        """A restart or a sweep runs (said as a toast): no other change may start beside it."""
        for group, what in (("restart", "a restart is already running"),
                            ("sweep", "a flag sweep is running (esc stops it after this step)")):
            if self.jobs.busy(group):
                self.notify(what, severity="warning")
                return True
        return False

    @work(group="plan", exclusive=True, exit_on_error=False)
    async def _plan_and_confirm(self, name: str) -> None:
        from eagle3_tui.ui.screens.modals import DiffModal

        session = self.session
        assert session is not None
        try:
            plan = await session.presets.plan(name)
        except Exception as err:
            self.notify(err_text(err), severity="error", timeout=10)
            return
        deadline = session.profile.restart_deadline_s
        if await self.app.push_screen_wait(DiffModal(plan, deadline_s=deadline)):
            self.jobs.run("restart", session.presets.apply(plan), f"apply {name}", done=f"preset {name} applied")

    def action_rollback(self) -> None:
        session = self.session
        assert session is not None
        if self._restarting():
            return

        def go(yes: bool | None) -> None:
            if yes:
                self.jobs.run("restart", session.presets.rollback(), "rollback", done="rolled back")

        self.app.push_screen(_confirm("Roll back the last applied change and restart the server?", yes="Roll back"), go)

    def action_restart(self) -> None:
        session = self.session
        assert session is not None
        if self._restarting():
            return

        def go(yes: bool | None) -> None:
            if yes:
                self.jobs.run("restart", session.control.restart(), "restart", done="server restarted")

        self.app.push_screen(_confirm("Restart the server now? Requests in flight will fail.", yes="Restart"), go)

    # -- accuracy check and benchmarks -------------------------------------------------------------------
    def action_check(self) -> None:
        session = self.session
        assert session is not None
        if self.jobs.busy("check"):
            self.notify("a check is already running (esc cancels it)", severity="warning")
            return
        self.action_show_tab("accuracy")
        self.accuracy_pane.progress = vm.CHECK_STARTING
        opts = dict(self.options.check_opts)
        if "predict" not in opts:  # the served flags, each flag preset's, the ledger's and the standard grid
            opts["predict"] = vm.check_grid(session.server, [p.flags for p in self.preset_list() if p.kind == "flags"],
                                            vm.ledger_configs(r.config for r in self._ledger_or_none()))
        self.jobs.run("check", session.accuracy.run(**opts), "accuracy check", on_error=self._check_failed)

    def on_accuracy_pane_data_requested(self) -> None:
        """d in the Accuracy pane: ask for the training data; the session reads and saves it, the doctor reruns.
        (Named, not `@on`, so the pane's module is not imported before the first frame.)"""
        from eagle3_tui.ui.screens.data_modal import DataModal

        session = self.session
        if session is None:
            return
        prof = session.profile

        async def submit(glob: str, slots: tuple[int, ...] | None) -> str:
            got = await session.accuracy.use_training_data(glob, slots, save=prof.source is not None)
            self.accuracy_pane.data_known = True
            await session.survey.refresh_findings()
            self._show_presets()  # the training wiring's preset, now that the slots are known
            return got.summary() + (f"; saved to {prof.source}" if prof.source else "")

        def done(summary: str | None) -> None:
            if summary:
                self.notify(summary, timeout=8)

        self.app.push_screen(DataModal(submit, glob=prof.data_glob or "", slots=prof.data_slots,
                                       where=prof.source or ""), done)

    def _check_failed(self, why: str) -> None:
        if why == "cancelled":
            self.accuracy_pane.stopped = CHECK_STOPPED
        else:
            self.accuracy_pane.stopped = f"[$accept-bad]check failed:[/] {escape(why)}"

    def action_cancel(self) -> None:
        if self.sweep is not None and self.jobs.busy("sweep"):
            self.sweep.stop()  # after the current step, then the start is restored
            self._sweep_stopping = True
            shown = self.ledger_pane.sweep
            if shown is not None:
                self.ledger_pane.sweep = vm.JobProgress(shown.text.replace(
                    "esc stops after this step and restores", "stopping after this step, then restoring the start"),
                    shown.done, shown.total)
            self.notify("the sweep stops after this step and restores the start", timeout=6)
        elif self.jobs.cancel("check"):
            self.accuracy_pane.stopped = CHECK_STOPPED
        elif self.jobs.cancel("bench"):
            self.ledger_pane.progress = None
        elif self.back is not None and not self.jobs.running_labels():
            self.back()

    def action_back(self) -> None:
        if self.back is not None:
            self.back()

    def action_bench(self) -> None:
        self._bench(baseline=False)

    def action_bench_baseline(self) -> None:
        self._bench(baseline=True)

    def _bench(self, *, baseline: bool) -> None:
        session = self.session
        assert session is not None
        if self.jobs.busy("bench"):
            self.notify("a benchmark is already running", severity="warning")
            return
        label = "baseline benchmark" if baseline else "benchmark"
        self.action_show_tab("ledger")
        self.ledger_pane.progress = vm.bench_progress(0, 1, label)
        self.jobs.run(
            "bench",
            session.bench.run(baseline=baseline, **self.options.bench_opts),
            label,
            on_error=self._bench_failed,
        )


    def _bench_failed(self, why: str) -> None:
        self.ledger_pane.progress = None

    # -- the report -------------------------------------------------------------------------------------------
    def action_report(self) -> None:
        """Write the shareable report where screenshots go and say where. It writes only local files, so
        --readonly leaves it on."""
        session = self.session
        assert session is not None
        if self.jobs.busy("report"):
            self.notify("a report is already being written", severity="warning")
            return
        self.jobs.run("report", self._write_report(session), "report")

    async def _write_report(self, session: Session) -> None:
        import asyncio

        from eagle3_tui.report import gather, write_report

        data = gather(session)  # here, on the thread that owns the telemetry rings
        path = await asyncio.to_thread(write_report, data, base=self.options.screenshot_dir)
        self.notify(f"report written: {path}", timeout=12)

    # -- the flag sweep ------------------------------------------------------------------------------------
    def action_sweep(self) -> None:
        from eagle3_tui.session import Sweep

        session = self.session
        assert session is not None
        if self.readonly:
            self.notify("read-only: a flag sweep restarts the server", severity="warning")
            return
        if self._restarting():
            return
        opts = self.options.sweep_opts
        grid = list(opts.get("grid") or vm.sweep_grid(session.check, session.server.boundaries,
                                                      vm.served_config(session.server)))
        sweep = Sweep(session, grid, bench=opts.get("bench"), limit=opts.get("limit", SWEEP_LIMIT),
                      on_progress=self._sweep_progress)
        if not sweep.configs:
            self.notify("nothing to sweep: no configuration given", severity="warning")
            return
        listed = ", ".join(vm.cfg_text(c) for c in sweep.configs)
        order = "predicted best first" if session.check is not None and session.check.predictions else "in grid order"
        question = (f"Flag sweep: serve {len(sweep.configs)} configurations ({order}: {listed}), steps/topk/draft "
                    "tokens, each with a restart and a short benchmark, then restore the starting launch command? "
                    "The server restarts several times; requests in flight fail.")

        def go(yes: bool | None) -> None:
            if yes:
                self._start_sweep(sweep)

        self.app.push_screen(_confirm(question, yes="Sweep"), go)

    def _start_sweep(self, sweep: Sweep) -> None:
        self.sweep = sweep
        self._sweep_stopping = False
        self.action_show_tab("ledger")
        self.ledger_pane.sweep = vm.sweep_progress(0, len(sweep.configs), None, None, sweep.configs[0])
        self.jobs.run("sweep", self._run_sweep(sweep), "flag sweep", on_error=self._sweep_failed)

    async def _run_sweep(self, sweep: Sweep) -> SweepResult:
        try:
            result = await sweep.run()
        finally:
            self.sweep = None
        self.ledger_pane.sweep = None
        text, bad = vm.sweep_summary(result)
        self.notify(text, severity="error" if bad else "information", timeout=12 if bad else 8)
        return result

    def _sweep_progress(self, done: int, total: int, step: SweepStep | None, eta_s: float | None) -> None:
        self.post_message(self.SweepProgressed(done, total, step, eta_s))

    @on(SweepProgressed)
    def _show_sweep_progress(self, message: SweepProgressed) -> None:
        sweep = self.sweep
        if not self.panes_ready or sweep is None:
            return
        going_on = message.done < message.total and not self._sweep_stopping
        upcoming = sweep.configs[message.done] if going_on else None
        self.ledger_pane.sweep = vm.sweep_progress(message.done, message.total, message.step, message.eta_s, upcoming,
                                                   stopping=self._sweep_stopping)

    def _sweep_failed(self, why: str) -> None:
        self.ledger_pane.sweep = None


def _confirm(question: str, *, yes: str) -> ConfirmModal:
    from eagle3_tui.ui.screens.modals import ConfirmModal

    return ConfirmModal(question, yes=yes)
