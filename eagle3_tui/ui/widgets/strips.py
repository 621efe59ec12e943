"""Sparkline strips: cheap (<1 ms) mini-charts for running requests and token usage."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from textual.containers import Vertical
from textual.widgets import Label, Sparkline


class Strip(Vertical):
    """One labelled Sparkline row (running requests, token usage)."""

    DEFAULT_CSS = """
    Strip { height: 2; width: 1fr; margin-right: 2; }
    Strip > Label { height: 1; color: $foreground-muted; }
    Strip > Sparkline { height: 1; width: 1fr; }
    """

    def __init__(self, label: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._label = label

    def compose(self):  # type: ignore[override]
        yield Label(self._label, classes="strip-label")
        yield Sparkline([], summary_function=max)

    def set_values(self, values: Sequence[float], last: str) -> None:
        self.query_one(Label).update(f"{self._label}  {last}")
        self.query_one(Sparkline).data = list(values)
