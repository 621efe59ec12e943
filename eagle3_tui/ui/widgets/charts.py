"""Live charts: plotext line charts with reference lines and markers, and Sparkline strips.

plotext builds are slow on the UI thread (research/perf_anchors.md), so a chart only
rebuilds when its data changed, when it is on screen, and at most `max_hz` times a second; it
always draws downsampled buckets (about two per column), never raw points.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.app import RenderResult
from textual.color import Color
from textual_plotext import PlotextPlot

from eagle3_tui.ui.viewmodel import ChartData


def _rgb(app: Any, var: str, fallback: str) -> tuple[int, int, int]:
    value = app.theme_variables.get(var, fallback) if app is not None else fallback
    try:
        return Color.parse(value).rgb
    except Exception:
        return Color.parse(fallback).rgb


def fit_marker_labels(
    markers: list[tuple[float, str]], xmin: float, seconds_per_col: float
) -> list[tuple[float, str]]:
    """Markers inside the window, each label cut to the columns before the next marker (dropped
    under 3), so close restarts and config changes do not print over each other."""
    inside = sorted((x, label) for x, label in markers if xmin <= x <= 0)
    out: list[tuple[float, str]] = []
    for i, (x, label) in enumerate(inside):
        nxt = inside[i + 1][0] if i + 1 < len(inside) else 0.0
        room = int((nxt - x) / seconds_per_col) - 1 if seconds_per_col > 0 else len(label)
        if i + 1 == len(inside):
            room = max(room, len(label))  # the newest label may run to the right edge
        out.append((x, label[:room] if room >= 3 else ""))
    return out


class TimeChart(PlotextPlot):
    """A line chart over a time window fed by a `source()` that returns ChartData."""

    DEFAULT_CSS = "TimeChart { height: 1fr; width: 1fr; }"

    def __init__(
        self,
        title: str,
        source: Callable[[int, bool], ChartData],
        *,
        color_var: str,
        y_label: str,
        max_hz: float = 2.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.title = title
        self.source = source
        self.color_var = color_var
        self.y_label = y_label
        self.min_interval = 1.0 / max_hz
        self.dirty = True
        self.last_draw = 0.0
        self.draws = 0  # how many times the plot was rebuilt (tests and the benchmark read it)
        self._frame: RenderResult | None = None
        self._building = False
        self.points_drawn = 0

    def on_resize(self) -> None:
        self.dirty = True

    def render(self) -> RenderResult:
        """The frame built by the last redraw; plotext only builds in `redraw` (PlotextPlot would
        rebuild on every refresh of the widget, whatever caused it)."""
        if self._frame is None and not self._building:
            self._frame = super().render()
        return self._frame if self._frame is not None else Text("")

    def maybe_redraw(self, now: float | None = None) -> bool:
        """Rebuild the plot if dirty, visible and not rebuilt within the rate limit. On the event loop
        only the ring points are copied (and the theme's colours read); their bucketing, the plot's
        set-up and the plotext build run in a thread so keys are not kept waiting
        behind them."""
        now = time.monotonic() if now is None else now
        if self._building or not self.dirty or not self.is_on_screen or now - self.last_draw < self.min_interval:
            return False
        plan = self._plan(defer=True)
        self._building = True
        self.last_draw = now
        theme_name = self._get_plotext_theme_name(self.app.theme)
        size = self.size
        self.run_worker(lambda: self._build_thread(plan, theme_name, size), thread=True, exit_on_error=False)
        return True

    def _build_thread(self, plan: _Plan, theme_name: str, size: Any) -> None:
        try:
            self._configure(plan)
            frame: Text | None = self._build(theme_name, size)
        except Exception:  # a plot that cannot be drawn keeps the last frame
            frame = None
        self.app.call_from_thread(self._set_frame, frame, len(plan.data.xs))

    def _set_frame(self, frame: RenderResult | None, points: int | None = None) -> None:
        self._building = False
        if points is not None:
            self.points_drawn = points
        if frame is not None:
            self._frame = frame
            self.refresh()

    def _build(self, theme_name: str, size: Any) -> Text:
        plt = self.plt
        plt.plotsize(size.width, size.height)
        plt._set_size(size.width, size.height)
        plt.theme(theme_name)
        return Text.from_ansi(plt.build())

    def redraw(self) -> None:
        """Configure and build now, on this thread (tests and snapshots use it)."""
        plan = self._plan(defer=False)
        self._configure(plan)
        self.points_drawn = len(plan.data.xs)
        self._frame = self._build(self._get_plotext_theme_name(self.app.theme), self.size)
        self.refresh()

    def _plan(self, *, defer: bool) -> _Plan:
        """What the next build draws, read on the event loop (where the rings and the theme live):
        the source's data (`defer`: the ring points copied, not yet bucketed) and the colours."""
        width = max(self.size.width, 20)
        data = self.source(width * 2, defer)
        app = self.app
        self.draws += 1
        self.dirty = False
        return _Plan(
            data,
            width,
            line=_rgb(app, self.color_var, "#4ea1ff"),
            reference=_rgb(app, "chart-reference", "#8b95a7"),
            marker=_rgb(app, "chart-marker", "#ffb454"),
            canvas=_rgb(app, "surface", "#1a202a"),
        )

    def _configure(self, plan: _Plan) -> None:
        """Set the plot up from a plan (any thread: it touches only this chart's plotext figure)."""
        data = plan.data.resolve()
        width = plan.width
        ref_color, marker_color, canvas = plan.reference, plan.marker, plan.canvas
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title(self.title)
        plt.xlabel("seconds ago")
        plt.ylabel(self.y_label)
        xmin = -data.window_s
        plt.xlim(xmin, 0)
        for xs, ys in data.runs():
            plt.plot(xs, ys, marker="braille", color=plan.line)
        ys = list(data.ys)
        for y, label in data.references:
            plt.hline(y, ref_color)
            ys.append(y)
            plt.text(label, x=xmin + data.window_s * 0.01, y=y, color=ref_color, background=canvas, alignment="left")
        seconds_per_col = data.window_s / max(width - 8, 10)
        for x, label in fit_marker_labels(data.markers, xmin, seconds_per_col):
            plt.vline(x, marker_color)
            if label:
                plt.text(label, x=x, y=(max(ys) if ys else 1.0), color=marker_color, background=canvas, alignment="left")
        if ys:
            lo, hi = min(ys), max(ys)
            pad = max((hi - lo) * 0.1, 0.1)
            plt.ylim(max(0.0, lo - pad), hi + pad)


@dataclass(frozen=True, slots=True)
class _Plan:
    """One build's input, taken on the event loop (`TimeChart._plan`)."""

    data: ChartData
    width: int
    line: tuple[int, int, int]
    reference: tuple[int, int, int]
    marker: tuple[int, int, int]
    canvas: tuple[int, int, int]
