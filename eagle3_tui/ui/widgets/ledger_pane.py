"""The run ledger as a table; `b` benchmarks, `B` runs a baseline."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Label, ProgressBar

# Keys pulled out of a row's config/results into their own columns, in this order.
_CONFIG_KEYS = ("preset", "steps", "topk", "draft_tokens", "boundaries")
_RESULT_KEYS: tuple[tuple[str, ...], ...] = (
    ("accept_len", "accept_len_log", "accept_len_client"),
    ("tok_s", "output_tps"),
    ("speedup",),
)


def _short(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.2f}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(str(v) for v in value) + "]"
    return str(value)


def row_cells(row: Any) -> list[str]:
    """Cells for one LedgerRow: id, when, kind, host, chosen config/result keys, note."""
    data: Mapping[str, Any] = dataclasses.asdict(row) if dataclasses.is_dataclass(row) else dict(vars(row))
    config = data.get("config") or {}
    results = data.get("results") or {}
    ts = data.get("ts") or data.get("time") or data.get("created")
    when = time.strftime("%m-%d %H:%M", time.localtime(ts)) if isinstance(ts, (int, float)) else _short(ts)
    cells = [_short(data.get("id")), when, _short(data.get("kind")), _short(data.get("host"))]
    cells += [_short(config.get(k)) for k in _CONFIG_KEYS]
    cells += [
        _short(next((results[k] for k in keys if results.get(k) is not None), None)) for keys in _RESULT_KEYS
    ]
    cells.append(_short(data.get("note") or ""))
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
            "#", "when", "kind", "host", *_CONFIG_KEYS, "accept len", "tok/s", "speedup", "note"
        )

    def set_rows(self, rows: Sequence[Any]) -> None:
        table = self.query_one(DataTable)
        table.clear()
        for row in rows:
            table.add_row(*row_cells(row))
        if rows:
            table.move_cursor(row=len(rows) - 1)

    def show_progress(self, done: int, total: int, label: str) -> None:
        self.add_class("running")
        self.query_one("#bench-bar", ProgressBar).update(total=max(total, 1), progress=done)
        self.query_one("#bench-label", Label).update(f"{label}: {done}/{total} requests")

    def hide_progress(self) -> None:
        self.remove_class("running")
