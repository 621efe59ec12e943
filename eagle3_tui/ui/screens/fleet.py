"""The Fleet screen: one row per server, sortable and filterable; enter opens the one-server console.

The screen holds a fleet (`eagle3_tui.fleet`: the reads, the row model, the cells) and refreshes it every
interval in a worker; a server that fails marks its own row. What drilling in does is the app's (it owns
the session's lifecycle): the screen hands it the row's entry.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.markup import escape
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Label

from eagle3_tui.fleet import COLUMNS, ago, cells, detail, filter_rows, sort_rows

if TYPE_CHECKING:
    from eagle3_tui.fleet import Fleet, FleetEntry, FleetRow

SORTS = tuple(dict.fromkeys(sort for _, _, sort in COLUMNS))


class FleetScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "drill", "Open", tooltip="Open the selected server in the one-server console",
                id="fleet-drill"),
        Binding("s", "sort(1)", "Sort", tooltip="Sort by the next column (the header's ▲▼ says which)",
                id="fleet-sort"),
        Binding("S", "reverse", "Reverse sort", show=False, id="fleet-sort-reverse"),
        Binding("slash", "filter", "Filter", tooltip="Filter the rows (words; !word excludes; 'outlier', 'down')",
                id="fleet-filter"),
        Binding("escape", "close_filter", "Clear the filter", show=False, id="fleet-filter-close"),
        Binding("r", "refresh", "Refresh", tooltip="Read every server now", id="fleet-refresh"),
    ]

    DEFAULT_CSS = """
    FleetScreen #fleet-table { height: 1fr; }
    FleetScreen #fleet-filter { display: none; }
    FleetScreen #fleet-filter.-open { display: block; }
    FleetScreen #fleet-detail { height: 1; padding: 0 1; color: $foreground-muted; }
    FleetScreen #fleet-summary { height: 1; padding: 0 1; }
    """

    def __init__(self, fleet: Fleet, *, interval_s: float, open_server: Callable[[FleetEntry], None],
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.fleet = fleet
        self.interval_s = interval_s
        self.open_server = open_server
        self.clock = clock
        self.sort_key = "status"
        self.descending = False
        self.query_text = ""
        self.shown: list[FleetRow] = []
        self.refreshes = 0
        self._reading = False

    def compose(self) -> ComposeResult:
        yield Label("", id="fleet-summary")
        yield Input(placeholder="filter: words all rows must contain; !word excludes; esc clears", id="fleet-filter")
        table: DataTable[Text] = DataTable(id="fleet-table", cursor_type="row", zebra_stripes=True)
        yield table
        yield Label("", id="fleet-detail")
        yield Footer()

    def on_mount(self) -> None:
        self.table.add_columns(*(f"{title}  " for _, title, _ in COLUMNS))  # room for the sort arrow
        self._show()
        self.action_refresh()
        self.set_interval(self.interval_s, self.action_refresh)
        self.table.focus()

    @property
    def table(self) -> DataTable[Text]:
        return self.query_one("#fleet-table", DataTable)

    # -- refresh ---------------------------------------------------------------------------------------
    def action_refresh(self) -> None:
        self._refresh()

    @work(group="fleet-refresh", exit_on_error=False)
    async def _refresh(self) -> None:
        if self._reading:
            return  # the last read is still out (its servers' deadlines bound it)
        self._reading = True
        try:
            await self.fleet.refresh()
        except Exception as err:  # each server's failure stays on its row; this would be a bug, said once
            self.notify(f"fleet refresh failed: {type(err).__name__}: {err}", severity="error")
        finally:
            self._reading = False
        self.refreshes += 1
        self._show()

    # -- the table -------------------------------------------------------------------------------------
    def _show(self) -> None:
        table = self.table
        selected = self.selected_name()
        self.shown = sort_rows(filter_rows(self.fleet.rows, self.query_text), self.sort_key, self.descending)
        now = self.clock()
        table.clear()
        for i, (_, title, sort) in enumerate(COLUMNS):
            arrow = (" ▼" if self.descending else " ▲") if sort == self.sort_key and title != "per position" else "  "
            table.ordered_columns[i].label = Text(title + arrow)
        for r in self.shown:
            row = list(cells(r, now))
            style = "bold red" if r.status != "ok" else ("bold yellow" if r.outlier else "")
            table.add_row(*(Text(c, style=style) for c in row), key=r.name)
        if selected is not None and any(r.name == selected for r in self.shown):
            table.move_cursor(row=[r.name for r in self.shown].index(selected))
        self._summary()
        self._detail()

    def _summary(self) -> None:
        rows = self.fleet.rows
        down = sum(r.status in ("down", "garbage") for r in rows)
        outliers = sum(bool(r.outlier) for r in rows)
        parts = [f"fleet: {len(rows)} servers (enter opens one)", f"{down} not answering", f"{outliers} outlier(s)",
                 f"sorted by {self.sort_key}{' (reversed)' if self.descending else ''}"]
        read = [r.updated for r in rows if r.updated is not None]
        if read:
            parts.append(f"read {ago(max(read), self.clock())}")
        if self.query_text:
            parts.append(f"filter {self.query_text!r}: {len(self.shown)} shown")
        if self.fleet.problem:
            parts.append(f"[b red]{escape(self.fleet.problem)}[/]")
        self.query_one("#fleet-summary", Label).update(" · ".join(parts))

    def selected_name(self) -> str | None:
        table = self.table
        if not self.shown or table.cursor_row < 0 or table.cursor_row >= len(self.shown):
            return None
        return self.shown[table.cursor_row].name

    def _detail(self) -> None:
        name = self.selected_name()
        row = next((r for r in self.shown if r.name == name), None)
        self.query_one("#fleet-detail", Label).update(escape(detail(row, self.clock())) if row is not None else "")

    @on(DataTable.RowHighlighted)
    def _highlighted(self) -> None:
        self._detail()

    @on(DataTable.RowSelected)
    def _selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_drill()

    @on(DataTable.HeaderSelected)
    def _header(self, event: DataTable.HeaderSelected) -> None:
        sort = COLUMNS[event.column_index][2]
        self.descending = not self.descending if sort == self.sort_key else False
        self.sort_key = sort
        self._show()

    # -- keys ------------------------------------------------------------------------------------------
    def action_sort(self, step: int) -> None:
        self.sort_key = SORTS[(SORTS.index(self.sort_key) + step) % len(SORTS)]
        self.descending = False
        self._show()
        self.notify(f"sorted by {self.sort_key}", timeout=2)

    def action_reverse(self) -> None:
        self.descending = not self.descending
        self._show()

    def action_filter(self) -> None:
        box = self.query_one("#fleet-filter", Input)
        box.add_class("-open")
        box.focus()

    def action_close_filter(self) -> None:
        box = self.query_one("#fleet-filter", Input)
        box.remove_class("-open")
        if box.value:
            box.value = ""
        self.query_text = ""
        self._show()
        self.table.focus()

    @on(Input.Changed, "#fleet-filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.query_text = event.value.strip()
        self._show()

    @on(Input.Submitted, "#fleet-filter")
    def _filter_done(self) -> None:
        self.table.focus()

    def action_drill(self) -> None:
        name = self.selected_name()
        entry = self.fleet.entry_for(name) if name is not None else None
        if entry is None:
            self.notify("no server selected", severity="warning")
            return
        self.open_server(entry)
