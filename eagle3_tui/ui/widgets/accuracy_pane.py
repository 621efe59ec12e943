"""The accuracy check: progress with ETA while it runs, then the wirings side by side."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.markup import escape
from textual.widgets import DataTable, Label, ProgressBar, Static

from eagle3_tui.ui.format import fmt_boundaries, fmt_duration, fmt_num

# (row label, attribute, digits, as percent)
_ROWS: list[tuple[str, str, int, bool]] = [
    ("boundaries", "boundaries", 0, False),
    ("top-1", "top1", 1, True),
    ("top-5", "top5", 1, True),
    ("step accept", "step_accept", 1, True),
    ("predicted accept len", "predicted_accept_len", 2, False),
    ("tokens/s", "tokens_per_s", 0, False),
    ("positions", "positions", 0, False),
]


def _cell(result: Any, attr: str, digits: int, pct: bool) -> str:
    value = getattr(result, attr, None)
    if attr == "boundaries":
        return fmt_boundaries(value)
    if attr == "step_accept" and isinstance(value, (list, tuple)):
        return " ".join(f"{v * 100:.0f}" for v in value[:6]) + ("…" if len(value) > 6 else "")
    if value is None:
        return "–"
    if pct:
        return f"{value * 100:.{digits}f}%"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


class AccuracyPane(Vertical):
    DEFAULT_CSS = """
    AccuracyPane > #check-progress { height: 3; padding: 0 1; display: none; }
    AccuracyPane.running > #check-progress { display: block; }
    AccuracyPane > #check-table { height: auto; max-height: 12; }
    AccuracyPane > VerticalScroll { height: 1fr; padding: 0 1; }
    AccuracyPane > #check-keys { height: 1; color: $foreground-muted; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        with Vertical(id="check-progress"):
            yield Label("", id="check-label")
            yield ProgressBar(total=100, show_eta=False, id="check-bar")
        yield DataTable(id="check-table", cursor_type="column", zebra_stripes=True)
        with VerticalScroll():
            yield Static("No check yet: press c to run the standalone accuracy check.", id="check-notes")
        yield Label("c run check · esc cancel it", id="check-keys")

    def show_progress(self, done: int, total: int, eta_s: float | None, wiring: str | None) -> None:
        self.add_class("running")
        bar = self.query_one("#check-bar", ProgressBar)
        bar.update(total=max(total, 1), progress=done)
        what = f" · {escape(wiring)}" if wiring else ""
        self.query_one("#check-label", Label).update(
            f"checking {done}/{total}{what} · ETA {fmt_duration(eta_s)} · esc cancels"
        )

    def show_started(self) -> None:
        self.add_class("running")
        self.query_one("#check-label", Label).update("starting the check on the host…")
        self.query_one("#check-bar", ProgressBar).update(total=None, progress=0)

    def show_stopped(self, note: str) -> None:
        self.remove_class("running")
        self.query_one("#check-notes", Static).update(note)

    def show_report(self, report: Any, served: tuple[int, ...] | None) -> None:
        self.remove_class("running")
        results = list(getattr(report, "results", None) or [])
        table = self.query_one(DataTable)
        table.clear(columns=True)
        table.add_column("", key="metric")
        for i, r in enumerate(results):
            name = str(getattr(r, "name", f"wiring {i}"))
            if served is not None and tuple(getattr(r, "boundaries", ()) or ()) == tuple(served):
                name += " (served)"
            table.add_column(name, key=f"w{i}")
        for label, attr, digits, pct in _ROWS:
            table.add_row(label, *(_cell(r, attr, digits, pct) for r in results))
        self.query_one("#check-notes", Static).update(report_notes(report))


def report_notes(report: Any) -> str:
    """The norm probe, the checkpoint findings and anything else the report says, as markup."""
    lines: list[str] = []
    best = getattr(report, "best", None)
    if best:
        lines.append(f"[b]Best wiring:[/b] {escape(str(best))}")
    probe = getattr(report, "norm_probe", None)
    if probe:
        lines.append("[b]Norm probe[/b]")
        if isinstance(probe, dict):
            for k, v in probe.items():
                lines.append(f"  {escape(str(k))}: {escape(fmt_num(v) if isinstance(v, float) else str(v))}")
        else:
            lines.append(f"  {escape(str(probe))}")
    findings = list(getattr(report, "findings", None) or [])
    lines.append("[b]Findings[/b]" if findings else "[b]Findings[/b]: none")
    for f in findings:
        sev = getattr(f, "severity", getattr(f, "kind", ""))
        title = getattr(f, "title", None) or getattr(f, "message", None) or str(f)
        var = "$accept-bad" if sev in ("error", "unknown", "missing", "shape", "fc-width") else "$accept-warn"
        lines.append(f"  [{var}]{escape(str(sev))}[/] {escape(str(title))}")
        fix = getattr(f, "fix", None)
        if fix:
            lines.append(f"      fix: {escape(str(fix))}")
    tps = getattr(report, "tokens_per_s", None)
    if tps:
        lines.append(f"[$foreground-muted]drafter forward: {tps:,.0f} tokens/s[/]")
    return "\n".join(lines)
