"""The accuracy check: progress with ETA while it runs, then the wirings side by side."""

from __future__ import annotations

from typing import Any

from rich.text import Text
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
        yield DataTable(id="check-table", cursor_type="none", zebra_stripes=True)
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
        results = list(getattr(report, "wirings", None) or [])
        table = self.query_one(DataTable)
        table.clear(columns=True)
        table.add_column("", key="metric")
        for i, r in enumerate(results):
            name = str(getattr(r, "name", f"wiring {i}"))
            if served is not None and tuple(getattr(r, "boundaries", ()) or ()) == tuple(served):
                name += " (served)"
            table.add_column(Text(name), key=f"w{i}")
        for label, attr, digits, pct in _ROWS:
            table.add_row(Text(label, style="bold"), *(Text(_cell(r, attr, digits, pct)) for r in results))
        self.query_one("#check-notes", Static).update(report_notes(report))


def report_notes(report: Any) -> str:
    """The data, the norm probe, the checkpoint findings and the notes of a CheckReport, as markup."""
    lines: list[str] = []
    wirings = list(getattr(report, "wirings", None) or [])
    scored = [w for w in wirings if w.top1 is not None]
    if scored:
        best = max(scored, key=lambda w: w.top1)
        steps = getattr(report, "steps", "?")
        lines.append(
            f"[b]Best wiring:[/b] [$accept-good]{escape(best.name)}[/] {escape(fmt_boundaries(best.boundaries))}"
            f" top-1 {best.top1 * 100:.1f}% · predicted accept len {fmt_num(best.predicted_accept_len)}"
            f" (chain of {steps} step{'' if steps == 1 else 's'})"
        )
    lines.append(
        f"[$foreground-muted]data {escape(str(getattr(report, 'data', '')))} ({escape(str(getattr(report, 'layout', '')))}),"
        f" {getattr(report, 'files_read', 0)}/{getattr(report, 'files_total', 0)} files,"
        f" {getattr(report, 'positions', 0)} positions, {escape(str(getattr(report, 'device', '')))}"
        f" {escape(str(getattr(report, 'dtype', '')))}, {fmt_num(getattr(report, 'elapsed_s', None), 1)} s[/]"
    )
    probe = list(getattr(report, "probe", None) or [])
    if probe:
        lines.append("[b]Norm probe[/b] (which data slot holds the embedding output)")
        for p in probe:
            d = p if isinstance(p, dict) else vars(p)
            b = d.get("boundary")
            where = f" = {fmt_boundaries([b])[1:-1]}" if b is not None else ""
            cos = d.get("embed_cosine")
            cos_txt = f", cosine with the embedding {cos:.2f}" if isinstance(cos, (int, float)) else ""
            emb = " [$accept-warn]embedding-like[/]" if d.get("embed_like") else ""
            lines.append(
                f"  slot {d.get('slot')}{escape(where)}: mean norm {fmt_num(d.get('mean_norm'))}{escape(cos_txt)}{emb}"
            )
    findings = list(getattr(report, "findings", None) or [])
    lines.append("[b]Checkpoint[/b]" + ("" if findings else ": every tensor maps onto SGLang's llama_eagle3"))
    for f in findings:
        d = f if isinstance(f, dict) else vars(f)
        lines.append(
            f"  [$accept-bad]{escape(str(d.get('kind', '')))}[/] {escape(str(d.get('tensor', '')))}: {escape(str(d.get('message', '')))}"
        )
    for note in getattr(report, "notes", None) or []:
        lines.append(f"[$foreground-muted]· {escape(str(note))}[/]")
    return "\n".join(lines)
