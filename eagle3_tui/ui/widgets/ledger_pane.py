"""The run ledger as a table; `b` benchmarks, `B` runs a baseline."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Label, ProgressBar

# Config keys shown as their own columns, in this order.
_CONFIG_KEYS = ("preset", "steps", "topk", "draft_tokens", "boundaries")


def _short(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(str(v) for v in value) + "]"
    return str(value)


def row_cells(row: Any) -> list[str]:
    """Cells for one LedgerRow: id, when, kind, config columns, accept len, tok/s, speedup, note
    (the host is the session's own, so it is not a column)."""
    when = time.strftime("%m-%d %H:%M", time.localtime(row.ts))
    cells = [str(row.id), when, row.kind]
    cells += [_short(row.config.get(k)) for k in _CONFIG_KEYS]
    cells += [_short(row.accept_len), _short(row.tok_s), _short(row.results.get("speedup")), row.note or ""]
    return cells


class LedgerPane(Vertical):
    DEFAULT_CSS = """
    LedgerPane > DataTable { height: 1fr; }
    LedgerPane > #bench-row { height: 2; padding: 0 1; display: none; }
    LedgerPane.running > #bench-row { display: block; }
    LedgerPane > #ledger-keys { height: 1; color: $foreground-muted; padding: 0 1; }
    """

    def compose(self) -> ComposeResult:
        with Vertical(id="bench-row"):
            yield Label("", id="bench-label")
            yield ProgressBar(total=100, show_eta=False, id="bench-bar")
        table = DataTable(id="ledger-table", cursor_type="row", zebra_stripes=True)
        yield table
        yield Label("b benchmark · B baseline (no speculation)", id="ledger-keys")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns(
            "#", "when", "kind", "preset", "steps", "topk", "draft", "boundaries", "accept", "tok/s", "speedup", "note"
        )

    def set_rows(self, rows: Sequence[Any]) -> None:
        table = self.query_one(DataTable)
        table.clear()
        for row in rows:
            table.add_row(*(Text(c) for c in row_cells(row)))
        if rows:
            table.move_cursor(row=len(rows) - 1)

    def show_progress(self, done: int, total: int, label: str) -> None:
        self.add_class("running")
        self.query_one("#bench-bar", ProgressBar).update(total=max(total, 1), progress=done)
        self.query_one("#bench-label", Label).update(f"{label}: {done}/{total} requests")

    def hide_progress(self) -> None:
        self.remove_class("running")
