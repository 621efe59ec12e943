"""The first-run screen: progress of building the demo world (or attaching), line by line."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import BindingType
from textual.containers import Vertical
from textual.markup import escape
from textual.screen import Screen
from textual.widgets import Label, LoadingIndicator, Log


class BootScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [("q,ctrl+q", "app.quit", "Quit")]

    def compose(self) -> ComposeResult:
        with Vertical(id="boot"):
            yield Label("[b]eagle3-tui[/b] getting ready…", id="boot-title")
            yield LoadingIndicator(id="boot-spinner")
            yield Log(max_lines=500, id="boot-log")

    def add(self, text: str) -> None:
        self.query_one("#boot-log", Log).write_line(text)
        self.query_one("#boot-title", Label).update(f"[b]eagle3-tui[/b] {escape(text)}")

    def failed(self, reason: str) -> None:
        self.query_one("#boot-spinner").display = False
        self.query_one("#boot-title", Label).update(
            f"[b $error]could not start:[/] {escape(reason)}  (q quits)"
        )
