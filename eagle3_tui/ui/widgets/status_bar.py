"""The two-line status bar: connection, server, effective flags, wiring, preset, live numbers.

It draws `parts`, which the screen computes with the view model (`viewmodel.status_parts`) on every
state event and once a second (the uptime moves); before a session exists it shows `message`.
"""

from __future__ import annotations

from textual.app import RenderResult
from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from eagle3_tui.ui.viewmodel import StatusParts


class StatusBar(Widget):
    DEFAULT_CSS = """
    StatusBar { height: 2; padding: 0 1; background: $panel; color: $foreground; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    parts: reactive[StatusParts | None] = reactive(None)
    """What the bar shows (from the view model); None until a session is attached."""
    message: reactive[str] = reactive("connecting…")
    """Shown while there are no parts yet (booting, attaching)."""

    def render(self) -> RenderResult:
        if self.parts is None:
            return Content(self.message)
        return Content.from_markup(self.parts.markup())
