"""The run ledger as a table; `b` benchmarks, `B` runs a baseline, `S` sweeps the flags (its
progress over the benchmark's, its rows arriving as each configuration is measured)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import DataTable, Label, ProgressBar

from eagle3_tui.eagle.wiring import format_boundaries
from eagle3_tui.ui.viewmodel import JobProgress

if TYPE_CHECKING:
    from eagle3_tui.telemetry.ledger import LedgerRow

# Config keys shown as their own columns, in this order.
_CONFIG_KEYS = ("preset", "steps", "topk", "draft_tokens", "boundaries")


def _short(value: Any) -> str:
    """A cell: numbers with two decimals, anything else as text."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(str(v) for v in value) + "]"
    return str(value)


def _boundaries(value: Any) -> str:
    if isinstance(value, (list, tuple)) and all(isinstance(v, int) for v in value):
        return format_boundaries(value)
    return _short(value)


def row_cells(row: LedgerRow) -> list[str]:
    """Cells for one LedgerRow: id, when, kind, engine (and release), config columns, accept len, tok/s, speedup, note
    (the host is the session's own, so it is not a column)."""
    when = time.strftime("%m-%d %H:%M", time.localtime(row.ts))
    cells = [str(row.id), when, row.kind, row.engine or "–"]
    cells += [
        _boundaries(row.config.get(k)) if k == "boundaries" else _short(row.config.get(k)) for k in _CONFIG_KEYS
    ]
    cells += [_short(row.accept_len), _short(row.tok_s), _short(row.results.get("speedup")), row.note or ""]
    return cells


class LedgerPane(Vertical):
    DEFAULT_CSS = """
    LedgerPane > DataTable { height: 1fr; }
    LedgerPane > #bench-row { height: 2; padding: 0 1; display: none; }
    LedgerPane.running > #bench-row { display: block; }
    LedgerPane > #sweep-row { height: 2; padding: 0 1; display: none; }
    LedgerPane.sweeping > #sweep-row { display: block; }
    LedgerPane > #ledger-keys { height: 1; color: $foreground-muted; padding: 0 1; }
    """

    rows: reactive[tuple[LedgerRow, ...]] = reactive((), init=False)
    """The ledger's rows for this host, oldest first."""
    progress: reactive[JobProgress | None] = reactive(None, init=False)
    """The running benchmark's progress (None: none runs)."""
    sweep: reactive[JobProgress | None] = reactive(None, init=False)
    """The running flag sweep's progress (None: none runs)."""

    def compose(self) -> ComposeResult:
        with Vertical(id="sweep-row"):
            yield Label("", id="sweep-label")
            yield ProgressBar(total=100, show_eta=False, id="sweep-bar")
        with Vertical(id="bench-row"):
            yield Label("", id="bench-label")
            yield ProgressBar(total=100, show_eta=False, id="bench-bar")
        yield DataTable[Text](id="ledger-table", cursor_type="row", zebra_stripes=True)
        yield Label("b benchmark · B baseline (no speculation) · S flag sweep · esc stops it", id="ledger-keys")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns(
            "#", "when", "kind", "engine", "preset", "steps", "topk", "draft", "boundaries", "accept", "tok/s", "speedup", "note"
        )

    def watch_rows(self, rows: tuple[LedgerRow, ...]) -> None:
        table = self.query_one(DataTable)
        table.clear()
        for row in rows:
            table.add_row(*(Text(c) for c in row_cells(row)))
        if rows:
            table.move_cursor(row=len(rows) - 1)

    def watch_progress(self, progress: JobProgress | None) -> None:
        self.set_class(progress is not None, "running")
        if progress is not None:
            self.query_one("#bench-bar", ProgressBar).update(total=progress.total, progress=progress.done)
            self.query_one("#bench-label", Label).update(progress.text)

    def watch_sweep(self, progress: JobProgress | None) -> None:
        self.set_class(progress is not None, "sweeping")
        if progress is not None:
            self.query_one("#sweep-bar", ProgressBar).update(total=progress.total, progress=progress.done)
            self.query_one("#sweep-label", Label).update(progress.text)
