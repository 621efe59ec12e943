"""The accuracy check: progress with ETA while it runs, then the wirings side by side and the
predicted accept length for each (steps, topk, draft tokens) the check predicted, served one marked."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.markup import escape
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import DataTable, Label, ProgressBar, Static

from eagle3_tui.eagle.spec_config import SpecConfig
from eagle3_tui.eagle.wiring import format_boundaries
from eagle3_tui.ui.format import fmt_num
from eagle3_tui.ui.viewmodel import JobProgress, PredictionRow, cfg_text, prediction_rows

if TYPE_CHECKING:
    from eagle3_tui.eagle.accuracy import CheckReport, WiringResult

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


def _cell(result: WiringResult, attr: str, digits: int, pct: bool) -> str:
    value = getattr(result, attr, None)
    if attr == "boundaries":
        return format_boundaries(value)
    if attr == "step_accept" and isinstance(value, (list, tuple)):
        return " ".join(f"{v * 100:.0f}" for v in value[:6]) + ("…" if len(value) > 6 else "")
    if value is None:
        return "–"
    if pct:
        return f"{value * 100:.{digits}f}%"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


NO_CHECK = "No check yet: press c to run the standalone accuracy check."
NO_DATA = ("[$accept-warn]No training data known:[/] the doctor cannot see the wiring the draft was trained on, "
           "and the check has nothing to feed it. Press [b]d[/b] to give the data's path and the boundaries its "
           "slots hold (saved to the host's profile).")


class AccuracyPane(Vertical):
    """Progress while a check runs (`show_*`), then `report` side by side, with the `served` wiring marked.
    With no training data known (`data_known` False) it says so and d asks for it (`DataRequested`)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("d", "give_data", "Training data", show=False,
                tooltip="Give the training data's path and slots (saved to the profile)", id="check-data"),
    ]

    class DataRequested(Message):
        """The operator asked to give the training data's path and slots (the screen asks and saves)."""

    DEFAULT_CSS = """
    AccuracyPane > #check-progress { height: 3; padding: 0 1; display: none; }
    AccuracyPane.running > #check-progress { display: block; }
    AccuracyPane > #check-table { height: auto; max-height: 12; }
    AccuracyPane > #predict-table { height: auto; max-height: 12; margin-top: 1; display: none; }
    AccuracyPane.-predicted > #predict-table { display: block; }
    AccuracyPane > VerticalScroll { height: 1fr; padding: 0 1; }
    AccuracyPane > #check-keys { height: 1; color: $foreground-muted; padding: 0 1; }
    """

    report: reactive[CheckReport | None] = reactive(None, init=False)
    """The last check's report (None: no check yet)."""
    served: reactive[tuple[int, ...] | None] = reactive(None, init=False)
    """The boundaries the server is served with now."""
    served_flags: reactive[SpecConfig | None] = reactive(None, init=False)
    """The (steps, topk, draft tokens) the server runs now."""
    progress: reactive[JobProgress | None] = reactive(None, init=False)
    """The running check's progress (None: none runs)."""
    stopped: reactive[str] = reactive("", init=False, always_update=True)
    """Why the last check ended without a report (markup), shown in place of the notes."""
    data_known: reactive[bool] = reactive(True, init=False)
    """Whether the host's profile names the training data (False: the pane asks for it)."""

    def compose(self) -> ComposeResult:
        with Vertical(id="check-progress"):
            yield Label("", id="check-label")
            yield ProgressBar(total=100, show_eta=False, id="check-bar")
        yield DataTable(id="check-table", cursor_type="none", zebra_stripes=True)
        yield DataTable(id="predict-table", cursor_type="none", zebra_stripes=True)
        with VerticalScroll():
            yield Static(NO_CHECK, id="check-notes")
        yield Label("c run check · esc cancel it", id="check-keys")

    def action_give_data(self) -> None:
        self.post_message(self.DataRequested())

    def watch_data_known(self, known: bool) -> None:
        if self.report is None and self.progress is None:
            self.query_one("#check-notes", Static).update(NO_CHECK if known else NO_DATA)
            self.query_one("#check-keys", Label).update(
                "c run check · esc cancel it" + ("" if known else " · d give the training data"))

    def watch_progress(self, progress: JobProgress | None) -> None:
        self.set_class(progress is not None, "running")
        if progress is not None:
            self.query_one("#check-bar", ProgressBar).update(total=progress.total, progress=progress.done)
            self.query_one("#check-label", Label).update(progress.text)

    def watch_stopped(self, note: str) -> None:
        self.progress = None
        self.query_one("#check-notes", Static).update(note)

    def watch_report(self) -> None:
        self._show_report()

    def watch_served(self) -> None:
        self._show_report()

    def watch_served_flags(self) -> None:
        self._show_report()

    def _show_report(self) -> None:
        report = self.report
        if report is None:
            return
        self.progress = None
        served = report.for_boundaries(self.served) if self.served is not None else None
        table = self.query_one("#check-table", DataTable)
        table.clear(columns=True)
        table.add_column("", key="metric")
        for i, r in enumerate(report.wirings):
            table.add_column(Text(r.name + (" (served)" if r is served else "")), key=f"w{i}")
        for label, attr, digits, pct in _ROWS:
            table.add_row(Text(label, style="bold"), *(Text(_cell(r, attr, digits, pct)) for r in report.wirings))
        rows = prediction_rows(report, self.served, self.served_flags)
        self.set_class(bool(rows), "-predicted")
        fill_predictions(self.query_one("#predict-table", DataTable), rows)
        self.query_one("#check-notes", Static).update(report_notes(report, self.served, self.served_flags))


def fill_predictions(table: DataTable[Text], rows: list[PredictionRow]) -> None:
    """One row per (steps, topk, draft tokens), one column per wiring predicted; the served wiring's
    column says so and the served configuration's row and cell are marked ▶."""
    table.clear(columns=True)
    if not rows:
        return
    wirings = list(dict.fromkeys(r.wiring for r in rows))
    configs = list(dict.fromkeys(r.config for r in rows))
    cell = {(r.wiring, r.config): r for r in rows}
    table.add_column(Text("steps/topk/draft", style="bold"), key="cfg")
    for i, w in enumerate(wirings):
        first = next(r for r in rows if r.wiring == w)
        label = f"{w} ({first.boundaries})" + (" served" if first.served_wiring else "")
        table.add_column(Text(label, style="bold"), key=f"p{i}")
    for cfg in configs:
        mine = [cell.get((w, cfg)) for w in wirings]
        served = any(r is not None and r.served_flags for r in mine)
        head = Text(("▶ " if served else "  ") + cfg_text(cfg), style="bold" if served else "")
        table.add_row(head, *(_prediction_cell(r) for r in mine))


def _prediction_cell(row: PredictionRow | None) -> Text:
    if row is None or row.accept_len is None:
        return Text("–")
    if row.served_flags:
        return Text(f"▶ {row.accept_len:.2f} served", style="bold reverse")
    return Text(f"{row.accept_len:.2f}")


def report_notes(report: CheckReport, served: tuple[int, ...] | None = None, served_flags: SpecConfig | None = None) -> str:
    """The best and the served wiring, the data, the norm probe, the checkpoint findings and the
    notes of a CheckReport, as markup."""
    from eagle3_tui.eagle.accuracy import predicted_accept_len

    lines: list[str] = []
    best = report.best()
    if best is not None and best.top1 is not None:
        steps = report.steps
        lines.append(
            f"[b]Best wiring:[/b] [$accept-good]{escape(best.name)}[/] {escape(format_boundaries(best.boundaries))}"
            f" top-1 {best.top1 * 100:.1f}% · predicted accept len {fmt_num(best.predicted_accept_len)}"
            f" (chain of {steps} step{'' if steps == 1 else 's'})"
        )
    expected = predicted_accept_len(report, served, served_flags)
    if served is not None:
        flags = f" with {cfg_text(served_flags)}" if served_flags is not None else ""
        lines.append(
            f"[b]Served now:[/b] {escape(format_boundaries(served))}{flags}: predicted accept len {fmt_num(expected)}"
            + ("" if expected is not None else " (no wiring of the check feeds exactly these boundaries)")
        )
    lines.append(
        f"[$foreground-muted]data {escape(report.data)} ({escape(report.layout)}),"
        f" {report.files_read}/{report.files_total} files, {report.positions} positions,"
        f" {escape(report.device)} {escape(report.dtype)}, {fmt_num(report.elapsed_s, 1)} s[/]"
    )
    probe = list(report.probe)
    if probe:
        lines.append("[b]Norm probe[/b] (which data slot holds the embedding output)")
        for p in probe:
            d = p if isinstance(p, dict) else vars(p)
            b = d.get("boundary")
            where = f" = {format_boundaries([b])}" if b is not None else ""
            cos = d.get("embed_cosine")
            cos_txt = f", cosine with the embedding {cos:.2f}" if isinstance(cos, (int, float)) else ""
            emb = " [$accept-warn]embedding-like[/]" if d.get("embed_like") else ""
            lines.append(
                f"  slot {d.get('slot')}{escape(where)}: mean norm {fmt_num(d.get('mean_norm'))}{escape(cos_txt)}{emb}"
            )
    findings = list(report.findings)
    lines.append("[b]Checkpoint[/b]" + ("" if findings else ": every tensor maps onto SGLang's llama_eagle3"))
    for f in findings:
        d = f if isinstance(f, dict) else vars(f)
        lines.append(
            f"  [$accept-bad]{escape(str(d.get('kind', '')))}[/] {escape(str(d.get('tensor', '')))}: {escape(str(d.get('message', '')))}"
        )
    for note in report.notes:
        lines.append(f"[$foreground-muted]· {escape(str(note))}[/]")
    return "\n".join(lines)
