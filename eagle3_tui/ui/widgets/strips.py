"""Sparkline strips: cheap mini-charts for running requests and token usage."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.reactive import reactive
from textual.widgets import Label, Sparkline

from eagle3_tui.ui.viewmodel import StripView


class Strip(Vertical):
    """One labelled Sparkline row (running requests, token usage)."""

    DEFAULT_CSS = """
    Strip { height: 2; width: 1fr; margin-right: 2; }
    Strip > Label { height: 1; color: $foreground-muted; }
    Strip > Sparkline { height: 1; width: 1fr; }
    """

    view: reactive[StripView] = reactive(StripView)
    """The values drawn and the newest one as text (the view model's `strip_view`)."""

    def __init__(self, label: str, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._label = label

    def compose(self) -> ComposeResult:
        yield Label(self._label, classes="strip-label")
        yield Sparkline([], summary_function=max)

    def watch_view(self, view: StripView) -> None:
        self.query_one(Label).update(f"{self._label}  {view.last}")
        self.query_one(Sparkline).data = list(view.values)
