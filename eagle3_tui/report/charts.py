"""The report's charts: one PNG each, drawn headless (matplotlib's Agg backend), readable without the tool:
a title, axis labels with units, a legend, restart markers labelled on the chart.

matplotlib is imported inside `_pyplot` only: `eagle3-tui --help` and the console's first frame never pay
for it. Each function draws one figure, saves it, and returns what the figure holds (`Chart`), counted
from the figure's own artists, so a test sees what a reader sees.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle3_tui.errors import UserError

if TYPE_CHECKING:
    from eagle3_tui.report.data import OverTime, PositionSeries
    from eagle3_tui.telemetry.changes import ChangeEffect

DPI = 100
WIDE = (11.0, 6.5)
# Restart and change markers: one colour a reader can name ("the red dashed lines").
MARKER_COLOUR = "#c0392b"
MARKER_GID = "marker"
HEADROOM = 1.35
MEAN_BUCKETS = 120
"""Past this many points a series is drawn as dots with the mean of this many time buckets as its line."""


@dataclass(frozen=True)
class Panel:
    """One axes of a chart as drawn: its title, the data and reference lines, the bar groups, the vertical
    marker lines (restarts, events), the legend's entries."""

    title: str
    lines: int
    bars: int
    markers: int
    legend: tuple[str, ...]


@dataclass(frozen=True)
class Chart:
    """A PNG written and what it shows."""

    path: Path
    title: str
    panels: tuple[Panel, ...]


def _pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise UserError("the report's charts need matplotlib: pip install 'matplotlib>=3.7'") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _panels(fig: Any) -> tuple[Panel, ...]:
    out = []
    for ax in fig.axes:
        legend = ax.get_legend()
        drawn = ax.get_lines()
        markers = [ln for ln in drawn if ln.get_gid() == MARKER_GID]
        # a series cut at its gaps is one: its later pieces carry its label behind "_" (kept out of the legend)
        lines = {str(ln.get_label()).lstrip("_") for ln in drawn if ln.get_gid() != MARKER_GID}
        out.append(Panel(ax.get_title(), len(lines), len(ax.containers), len(markers),
                         tuple(t.get_text() for t in legend.get_texts()) if legend is not None else ()))
    return tuple(out)


def _save(plt: Any, fig: Any, path: Path, title: str) -> Chart:
    fig.suptitle(title, fontsize=13, fontweight="bold")
    fig.tight_layout()
    panels = _panels(fig)
    buf = io.BytesIO()
    try:
        fig.savefig(buf, dpi=DPI, format="png")
    finally:
        plt.close(fig)
    _write_small_png(buf.getvalue(), path)
    return Chart(path, title, panels)


def _write_small_png(png: bytes, path: Path) -> None:
    """The PNG with a 256-colour palette: a third of the bytes (a chart has few colours), so a report
    with its charts attaches to an issue in one go. Pillow comes with matplotlib."""
    from PIL import Image

    with Image.open(io.BytesIO(png)) as im:
        im.convert("RGB").quantize(256).save(path, format="PNG", optimize=True)


def _utc(t: float) -> datetime:
    return datetime.fromtimestamp(t, tz=timezone.utc)


def over_time_chart(data: OverTime, path: Path, host: str) -> Chart:
    """Accept length (top) and generation tok/s (bottom) over wall-clock time (UTC), the check's prediction
    and the no-speculation baseline as dashed lines, restarts and changes as labelled vertical lines."""
    from matplotlib.dates import DateFormatter

    plt = _pyplot()
    fig, (acc_ax, tps_ax) = plt.subplots(2, 1, figsize=(14.0, 7.0), sharex=True)
    times = [t for t, _ in data.accept] + [t for t, _ in data.tps]
    span = (max(times) - min(times)) if times else 0.0
    cuts = [*data.cuts, *(m.t for m in data.markers if m.restart)]
    _series(acc_ax, data.accept, "accept length", "#1f77b4", span, cuts)
    _series(tps_ax, data.tps, "generation tok/s", "#2ca02c", span, cuts)
    if data.predicted is not None:
        acc_ax.axhline(data.predicted, color="#ff7f0e", linestyle="--", linewidth=1.5,
                       label=data.predicted_label or f"check predicts {data.predicted:.2f}")
    if data.baseline_tps:
        tps_ax.axhline(data.baseline_tps, color="#7f7f7f", linestyle="--", linewidth=1.5,
                       label=f"baseline {data.baseline_tps:.1f} tok/s (no speculation)")
    _markers(acc_ax, tps_ax, data)
    acc_ax.set_title("Accept length: tokens committed per verify step (1 + accepted draft tokens)", fontsize=10)
    acc_ax.set_ylabel("accept length (tokens/step)")
    tps_ax.set_title("Generation throughput", fontsize=10)
    tps_ax.set_ylabel("tok/s")
    tps_ax.set_xlabel("time (UTC)")
    tps_ax.xaxis.set_major_formatter(DateFormatter("%H:%M:%S", tz=timezone.utc))
    for ax, points, ref in ((acc_ax, data.accept, data.predicted), (tps_ax, data.tps, data.baseline_tps)):
        ax.grid(True, alpha=0.3)
        top = max([v for _, v in points] + [ref or 0.0, 1.0])
        ax.set_ylim(0, top * HEADROOM)  # room above the data for the markers' labels and the reference lines
        if ax.get_legend_handles_labels()[0]:  # beside the plot: it never hides a point
            ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, borderaxespad=0.0)
    return _save(plt, fig, path, f"{host}: accept length and tok/s over time")


def _series(ax: Any, points: Sequence[tuple[float, float]], what: str, colour: str, span: float,
            cuts: Sequence[float]) -> None:
    """Each decode line's value as a dot and, past `MEAN_BUCKETS` points, the mean of each time bucket as
    the line (the console's own downsampling, `telemetry.series.buckets`). The line is cut where nothing
    was reported for a while (`gap_s`, the console's rule) and at each restart: a new server's numbers
    are never joined to the old one's."""
    from eagle3_tui.telemetry.series import buckets, gap_s

    if not points:
        ax.text(0.5, 0.5, f"no {what} points: the server logged none", transform=ax.transAxes, ha="center",
                va="center", color="grey")
        return
    each = f"{what}, each decode line (server log)"
    if len(points) <= MEAN_BUCKETS:
        _line(ax, list(points), each, colour, gap_s(span), cuts, marker="o", markersize=2.5)
        return
    ax.plot([_utc(t) for t, _ in points], [v for _, v in points], linestyle="none", marker="o", markersize=1.8,
            color=colour, alpha=0.3, label=each)
    means = [(b.t, b.mean) for b in buckets(list(points), MEAN_BUCKETS)]
    _line(ax, means, mean_label(what, span), colour, gap_s(span), cuts, linewidth=1.6)


def mean_label(what: str, span: float) -> str:
    """The legend entry of a series' bucket means over `span` seconds of points."""
    width = span / MEAN_BUCKETS
    return f"{what}, mean of each {width:.1f} s" if width < 10 else f"{what}, mean of each {width:.0f} s"


def _line(ax: Any, points: list[tuple[float, float]], label: str, colour: str, gap: float, cuts: Sequence[float],
          **style: Any) -> None:
    from eagle3_tui.telemetry.series import split_runs

    ts = [t for t, _ in points]
    pieces: list[tuple[int, int]] = []
    for i, j in split_runs(ts, gap):
        start = i
        for k in range(i + 1, j):
            if any(ts[k - 1] < c <= ts[k] for c in cuts):
                pieces.append((start, k))
                start = k
        pieces.append((start, j))
    for n, (i, j) in enumerate(pieces):
        ax.plot([_utc(t) for t in ts[i:j]], [v for _, v in points[i:j]], color=colour,
                label=label if n == 0 else f"_{label}", **style)


def _markers(top: Any, bottom: Any, data: OverTime) -> None:
    """Restarts and changes as red dashed lines, labelled at the top; other events (a benchmark's end)
    as faint dotted lines. One legend entry for each kind drawn."""
    restarts = [m for m in data.markers if m.restart]
    others = [m for m in data.markers if not m.restart]
    for n, m in enumerate(restarts):
        for ax in (top, bottom):
            ax.axvline(_utc(m.t), color=MARKER_COLOUR, linestyle="--", linewidth=1.1, gid=MARKER_GID,
                       label="restart / change" if (n == 0 and ax is top) else "_restart")
        top.annotate(m.label, xy=(_utc(m.t), 1.0), xycoords=("data", "axes fraction"), xytext=(3, -3),
                     textcoords="offset points", rotation=90, ha="left", va="top", fontsize=8, color=MARKER_COLOUR,
                     bbox={"facecolor": "white", "edgecolor": "none", "alpha": 0.85, "pad": 1.0})
    for n, m in enumerate(others):
        for ax in (top, bottom):
            ax.axvline(_utc(m.t), color="#999999", linestyle=":", linewidth=1.0, gid=MARKER_GID,
                       label=f"{m.label} ended" if (n == 0 and ax is top) else "_event")


def positions_chart(series: Sequence[PositionSeries], path: Path, host: str) -> Chart:
    """Acceptance rate per draft position, one bar group per source (live, benchmark, the check's prediction)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(9.0, 5.0))
    n = max(len(s.rates) for s in series)
    width = 0.8 / len(series)
    for k, s in enumerate(series):
        xs = [i + 1 + (k - (len(series) - 1) / 2) * width for i in range(len(s.rates))]
        bars = ax.bar(xs, [0.0 if math.isnan(r) else r for r in s.rates], width=width * 0.95, label=s.label)
        ax.bar_label(bars, labels=["–" if math.isnan(r) else f"{r:.2f}" for r in s.rates], fontsize=8, padding=2)
    ax.set_xticks(range(1, n + 1))
    ax.set_xlim(0.4, max(n, 3) + 0.6)
    ax.set_xlabel("draft position (1 = the first drafted token)")
    ax.set_ylabel("acceptance rate (share of drafts accepted there)")
    ax.set_ylim(0, 1.1)
    ax.set_title("Each position is accepted only when every position before it is", fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(loc="upper right", fontsize=8)
    return _save(plt, fig, path, f"{host}: per-position acceptance")


def changes_chart(changes: Sequence[ChangeEffect], path: Path, host: str) -> Chart:
    """Before and after each applied change: accept length (left) and tok/s (right), from the ledger's
    benchmarks on either side of it; a side not measured is marked so, never drawn as zero."""
    plt = _pyplot()
    fig, (acc_ax, tps_ax) = plt.subplots(1, 2, figsize=WIDE)
    labels = [_wrap(c.label) for c in changes]
    xs = list(range(len(changes)))
    for ax, value, unit, title, digits in (
            (acc_ax, "accept_len", "accept length (tokens/step)", "Accept length before / after", 2),
            (tps_ax, "tok_s", "tok/s", "Output tok/s before / after (benchmark)", 1)):
        for k, (side, colour) in enumerate((("before", "#9ecae1"), ("after", "#3182bd"))):
            vals = [getattr(getattr(c, side), value, None) if getattr(c, side) is not None else None
                    for c in changes]
            pos = [x + (k - 0.5) * 0.38 for x in xs]
            bars = ax.bar(pos, [v or 0.0 for v in vals], width=0.36, color=colour, label=side)
            ax.bar_label(bars, labels=["not\nmeasured" if v is None else f"{v:.{digits}f}" for v in vals],
                         fontsize=8, padding=2)
        ax.set_xticks(xs, labels, fontsize=8)
        ax.set_xlim(-0.75, max(len(changes), 2) - 0.25)  # one change: bars of a readable width, not the panel's
        ax.set_ylabel(unit)
        ax.set_title(title, fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
        ax.margins(y=0.15)
        ax.legend(loc="upper left", fontsize=8)
    return _save(plt, fig, path, f"{host}: each applied change, before and after (ledger benchmarks)")


def _wrap(text: str, width: int = 22) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width)) or text
