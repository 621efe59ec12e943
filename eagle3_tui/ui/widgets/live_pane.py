"""The Live tab: the two charts, the sparkline strips and the log; owns the chart window's keys.

The charts (plotext is slow to import and build) mount right after the first frame. What they draw
comes from the view model over the session snapshot that `snapshot` returns; this pane only decides
when: `mark_dirty` is cheap (called for every StatsUpdated), the ticks do the work.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.widgets import Label

from eagle3_tui.ui import viewmodel as vm
from eagle3_tui.ui.widgets.log_pane import LogPane
from eagle3_tui.ui.widgets.strips import Strip

if TYPE_CHECKING:
    from eagle3_tui.ui.widgets.charts import TimeChart


class LivePane(Vertical):
    """Charts over a time window (`window_s`), the strips, and the log pane."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("minus", "window(-1)", "Narrow chart window", show=False, id="window-narrow"),
        Binding("plus,equals_sign", "window(1)", "Widen chart window", show=False, id="window-widen"),
    ]

    window_s: reactive[float] = reactive(300.0, init=False)
    """Seconds of data the charts and strips span, ending at the clock's now."""

    def __init__(
        self,
        snapshot: Callable[[], vm.Snapshot | None],
        *,
        clock: Callable[[], float],
        chart_hz: float = 2.0,
        id: str | None = None,
    ) -> None:
        super().__init__(id=id)
        self.snapshot = snapshot
        self.clock = clock
        self.chart_hz = chart_hz
        self.charts: list[TimeChart] = []
        self.charts_ready = False
        self._charts_dirty = True
        self._strips_dirty = True

    def compose(self) -> ComposeResult:
        yield Horizontal(id="charts")
        yield Horizontal(id="strips")
        with Vertical(id="log-holder"):
            yield LogPane(id="logpane")

    @property
    def log_pane(self) -> LogPane:
        return self.query_one(LogPane)

    async def mount_charts(self) -> None:
        """After the first frame: the plotext charts and the strips."""
        from eagle3_tui.ui.widgets.charts import TimeChart

        await self.query_one("#strips", Horizontal).mount(
            Strip("running requests", id="strip-running"),
            Strip("token usage", id="strip-usage"),
            Label(vm.window_label(self.window_s), id="window-label"),
        )
        await self.mount(Label("", id="positions"), after=self.query_one("#strips", Horizontal))
        self.charts = [
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
        await self.query_one("#charts", Horizontal).mount(*self.charts)
        self.charts_ready = True

    # -- data -------------------------------------------------------------------------------------
    def _accept_data(self, points: int, defer: bool = False) -> vm.ChartData:
        snap = self.snapshot()
        if snap is None:
            return vm.ChartData(window_s=self.window_s)
        return vm.accept_series(snap, t_end=self.clock(), window_s=self.window_s, points=points, defer=defer)

    def _tps_data(self, points: int, defer: bool = False) -> vm.ChartData:
        snap = self.snapshot()
        if snap is None:
            return vm.ChartData(window_s=self.window_s)
        return vm.tps_series(snap, t_end=self.clock(), window_s=self.window_s, points=points, defer=defer)

    def mark_dirty(self) -> None:
        """Cheap on purpose (called for every StatsUpdated): the ticks below do the work."""
        self._charts_dirty = True
        self._strips_dirty = True

    def theme_changed(self) -> None:
        for chart in self.charts:
            chart.dirty = True
        self.log_pane.apply_theme()

    def chart_tick(self) -> None:
        """Rebuild the charts that changed (each chart itself only draws when visible, rate-limited)."""
        if not self.charts_ready:
            return
        if self._charts_dirty:
            self._charts_dirty = False
            for chart in self.charts:
                chart.dirty = True
        now = time.monotonic()
        for chart in self.charts:
            chart.maybe_redraw(now)

    def second_tick(self) -> None:
        self.log_pane.tick()
        if self._strips_dirty and self.charts_ready:  # sparklines once a second: cheap, but each reads a ring
            self._strips_dirty = False
            self.update_strips()

    def update_strips(self) -> None:
        snap = self.snapshot()
        if snap is None:
            return
        t_end = self.clock()
        self.query_one("#positions", Label).update(vm.positions_line(snap.telemetry, snap.server.engine))
        for strip_id, name, fmt in vm.STRIPS:
            strip = self.query_one(f"#{strip_id}", Strip)
            strip.view = vm.strip_view(
                snap.telemetry, name, fmt, t_end=t_end, window_s=self.window_s, width=strip.size.width
            )

    # -- the window keys --------------------------------------------------------------------------
    def action_window(self, step: int) -> None:
        self.window_s = vm.step_window(self.window_s, step)

    def watch_window_s(self, window_s: float) -> None:
        if self.charts_ready:
            self.query_one("#window-label", Label).update(vm.window_label(window_s))
        self.mark_dirty()
