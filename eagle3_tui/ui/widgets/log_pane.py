"""The live log: batched writes, failures and warnings coloured from the parsed events, regex filter,
pause, wrap, and monitoring polls hidden unless asked for.

Lines arrive in batches from the session; they go into a bounded deque (the pane's own history,
used to re-filter and re-wrap) and into a pending list that a timer flushes with one
`Log.write_lines` call (per-line writes are far slower). Nothing here grows with the log.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from rich.highlighter import Highlighter
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.color import Color
from textual.containers import Vertical
from textual.markup import escape
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Input, Label

from eagle3_tui.ui.format import wrap_line
from eagle3_tui.ui.log_levels import Level, LineLevels
from eagle3_tui.ui.log_polls import count_polls, without_polls
from eagle3_tui.ui.widgets.measured_log import MeasuredLog

if TYPE_CHECKING:  # the log model comes with the session, after the first frame
    from eagle3_tui.session import AnyLogEvent as LogEvent


class LogHighlighter(Highlighter):
    """Whole-line colour for the lines the session parsed as failures, warnings or the ready line;
    the styles come from the theme's variables."""

    def __init__(self, levels: LineLevels) -> None:
        self.levels = levels
        self.styles: dict[Level, Style] = {
            "bad": Style(color="red"),
            "warn": Style(color="yellow"),
            "good": Style(color="green", bold=True),
        }

    def set_colors(self, bad: str, warn: str, good: str) -> None:
        self.styles = {
            "bad": Style(color=Color.parse(bad).rich_color),
            "warn": Style(color=Color.parse(warn).rich_color),
            "good": Style(color=Color.parse(good).rich_color, bold=True),
        }

    def highlight(self, text: Text) -> None:
        level = self.levels.level(text.plain)
        if level is not None:
            text.stylize(self.styles[level])


def compile_filter(text: str) -> tuple[re.Pattern[str] | None, bool]:
    """`/pattern` filter text → (regex, inverted). A leading `!` inverts; raises re.error on a bad regex."""
    inverted = text.startswith("!")
    body = text[1:] if inverted else text
    if not body:
        return None, False
    return re.compile(body), inverted


class LogPane(Vertical):
    """Log widget + filter input + a one-line state label; owns the log's keys."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            "slash",
            "filter",
            "Filter",
            tooltip="Filter the log (regex; a leading ! inverts; empty clears)",
            id="log-filter",
        ),
        Binding("space", "pause", "Pause", tooltip="Pause / resume following the log", id="log-pause"),
        Binding("g", "log_top", "Log top", show=False, id="log-top"),
        Binding("G", "log_bottom", "Log bottom", show=False, id="log-bottom"),
        Binding("w", "wrap", "Wrap long lines", show=False, id="log-wrap"),
        Binding("h", "polls", "Show / hide polls (GET /server_info, /metrics ...)", show=False, id="log-polls"),
        Binding("escape", "close_filter", "Close the filter", show=False, id="log-filter-close"),
    ]

    DEFAULT_CSS = """
    LogPane { height: 1fr; }
    LogPane > #log-state { height: 1; width: 1fr; color: $foreground-muted; }
    LogPane > #log-filter { display: none; height: 3; }
    LogPane.filtering > #log-filter { display: block; }
    LogPane > Log { height: 1fr; }
    """

    class FilterError(Message):
        """The filter text is not a valid regex (the old filter stays)."""

        def __init__(self, error: str) -> None:
            super().__init__()
            self.error = error

    class FilterChanged(Message):
        """A new filter applies (`text` empty: no filter)."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    paused: reactive[bool] = reactive(False, init=False)
    """Following stopped: new lines are kept and counted, the view stays."""
    wrap: reactive[bool] = reactive(False, init=False)
    """Long lines are cut into rows of the pane's width."""
    show_polls: reactive[bool] = reactive(False, init=False)
    """Monitoring polls' access lines (`log_polls`) are shown; hidden by default, and counted."""

    def __init__(self, *, history: int = 10_000, rebuild_rows: int = 2_000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rebuild_rows = rebuild_rows
        self.flush_cap = 400  # rows per write while following (a flood: 2,000 rows/s on screen)
        self.flooded = False
        """The last write was cut to `flush_cap`: the next tick is skipped (see `_flush_tick`)."""
        self.skipped_on_screen = 0
        self.history: deque[str] = deque(maxlen=history)
        self.pending: list[str] = []
        self.new_while_paused = 0
        self.pattern: re.Pattern[str] | None = None
        self.inverted = False
        self.filter_text = ""
        self.total_lines = 0
        self.polls_seen = 0
        self._polls_stated = 0  # the count the state row shows
        self.levels = LineLevels(capacity=2 * history)
        self.highlighter = LogHighlighter(self.levels)

    def compose(self) -> ComposeResult:
        # The filter box is mounted by the first `/` (an Input is not cheap, and the first frame hides it).
        yield Label("", id="log-state")
        log = MeasuredLog(max_lines=self.history.maxlen, highlight=True, id="log")
        log.highlighter = self.highlighter
        yield log

    def on_mount(self) -> None:
        self.apply_theme()
        self.set_interval(0.1, self._flush_tick)
        self._update_state()

    @property
    def log_widget(self) -> MeasuredLog:
        return self.query_one(MeasuredLog)

    def apply_theme(self) -> None:
        v = self.app.theme_variables
        self.highlighter.set_colors(
            v.get("accept-bad", "red"), v.get("accept-warn", "yellow"), v.get("accept-good", "green")
        )
        if self.is_mounted:
            self.rebuild()

    # -- feeding -------------------------------------------------------------------------------
    def add_batch(self, lines: Sequence[str], events: Sequence[LogEvent]) -> None:
        """One LogBatch: the events say which lines are failures, warnings or the ready line."""
        if self.levels.add(lines, events) and self.is_mounted:
            log = self.log_widget
            log.notify_style_update()  # a failure's lines were drawn before its record ended
            log.refresh()
        self.add_lines(lines)

    def add_lines(self, lines: Iterable[str]) -> None:
        """Cheap: the widget is written by `flush` on a timer."""
        lines = list(lines)
        self.total_lines += len(lines)
        self.polls_seen += count_polls(lines)
        self.history.extend(lines)
        if self.paused:
            self.new_while_paused += len(lines)
            return
        self.pending.extend(self._visible(lines))
        cap = self.history.maxlen or 10_000
        if len(self.pending) > cap:
            del self.pending[: len(self.pending) - cap]

    def _visible(self, lines: Iterable[str], last: int | None = None) -> list[str]:
        """Filtered (then cut to the `last` rows), then wrapped: the rows the widget should show."""
        if not self.show_polls and self.polls_seen:
            lines = without_polls(list(lines))
        pattern = self.pattern
        if pattern is not None:
            if self.inverted:
                lines = [ln for ln in lines if not pattern.search(ln)]
            else:
                lines = [ln for ln in lines if pattern.search(ln)]
        lines = list(lines)
        if last is not None:
            lines = lines[-last:]
        if not self.wrap:
            return lines
        width = max(self.log_widget.size.width - 1, 20)
        out: list[str] = []
        for ln in lines:
            rows = wrap_line(ln, width)
            level = self.levels.level(ln) if len(rows) > 1 else None
            if level is not None:
                for row in rows:
                    self.levels.set(row, level)
            out.extend(rows)
        return out[-last:] if last is not None else out

    def _flush_tick(self) -> None:
        """Ten writes a second; in a flood (the last write was cut) five: each write scrolls and
        repaints the log, and nobody reads 4,000 rows a second row by row."""
        if self.flooded:
            self.flooded = False
            return
        self.flush()

    def flush(self) -> None:
        """Write what arrived since the last flush. In a flood (more than `flush_cap` lines per
        tick) only the newest are written while following, with a note of how many were skipped on
        screen; they are all in the history, and pausing shows them without gaps."""
        if not self.pending:
            return
        batch, self.pending = self.pending, []
        self.flooded = len(batch) > self.flush_cap
        if self.flooded:
            skipped = len(batch) - self.flush_cap
            self.skipped_on_screen += skipped
            batch = [f"… {skipped:,} lines not drawn while following (space pauses and shows them)", *batch[skipped:]]
        self.log_widget.write_lines(batch)

    def rebuild(self) -> None:
        """Re-render from history (filter, wrap or theme changed, or resume).

        The filter runs over the whole history; the newest `rebuild_rows` rows are written back, or as
        many as the widget holds now when that is more (a full log in a flood; cheap because
        `MeasuredLog` measures rows on the spot). So a pause or resume leaves the log as tall as it was:
        `replace_lines` then asks for a repaint of the log, not a layout of the screen (costly with the
        charts and tabs: benchmarks/MEASURED.md), and neither do the writes
        that follow (a log that grows asks for a layout at each write).
        """
        self.pending = []
        log = self.log_widget
        log.replace_lines(self._visible(self.history, last=max(self.rebuild_rows, len(log.lines))))
        log.scroll_end(animate=False)
        self._update_state()

    # -- filter --------------------------------------------------------------------------------
    def _filter_box(self) -> Input | None:
        boxes = self.query("#log-filter").results(Input)
        return next(boxes, None)

    def set_filter(self, text: str) -> bool:
        box = self._filter_box()
        try:
            pattern, inverted = compile_filter(text)
        except re.error as err:
            self.post_message(self.FilterError(f"bad regex {text!r}: {err}"))
            if box is not None:
                box.add_class("-invalid")
            return False
        if box is not None:
            box.remove_class("-invalid")
        self.pattern, self.inverted, self.filter_text = pattern, inverted, text if pattern else ""
        self.rebuild()
        self.post_message(self.FilterChanged(self.filter_text))
        return True

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self.set_filter(event.value):
            self.action_close_filter()

    # -- actions (the keys above) ------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "close_filter":
            return self.has_class("filtering")  # otherwise esc belongs to whoever is next in line
        return True

    async def action_filter(self) -> None:
        box = self._filter_box()
        if box is None:
            box = Input(placeholder="regex filter (! inverts; empty clears; enter applies, esc closes)", id="log-filter")
            await self.mount(box, before=self.log_widget)
        self.add_class("filtering")
        box.value = self.filter_text
        box.focus()
        box.select_all()  # typing replaces the old filter; arrows keep it

    def action_close_filter(self) -> None:
        self.remove_class("filtering")
        self.log_widget.focus()

    def action_pause(self) -> None:
        self.paused = not self.paused

    def action_wrap(self) -> None:
        # The state row says "wrap" (as it says PAUSED): no toast, which would lay out the screen
        # when it appears and again when it goes (the slowest part of a `w` in a log flood).
        self.wrap = not self.wrap

    def action_polls(self) -> None:
        self.show_polls = not self.show_polls

    def action_log_top(self) -> None:
        self.log_widget.scroll_home(animate=False)

    def action_log_bottom(self) -> None:
        self.log_widget.scroll_end(animate=False)

    def watch_paused(self, paused: bool) -> None:
        # Paused: the frozen view is the history itself (nothing skipped in a flood); resumed: follow again.
        self.log_widget.auto_scroll = not paused
        if not paused:
            self.new_while_paused = 0
        self.rebuild()

    def watch_wrap(self) -> None:
        self.rebuild()

    def watch_show_polls(self) -> None:
        self.rebuild()

    def _update_state(self) -> None:
        bits = ["[b]PAUSED[/b] (space resumes)" if self.paused else "following"]
        if self.filter_text:
            bits.append(
                f"filter {'NOT ' if self.inverted else ''}/{escape(self.pattern.pattern if self.pattern else '')}/"
            )
        if self.wrap:
            bits.append("wrap")
        self._polls_stated = self.polls_seen
        if self.polls_seen:
            bits.append("polls shown (h hides)" if self.show_polls else f"{self.polls_seen:,} poll lines hidden (h shows)")
        self._set_state(" · ".join(bits))

    def _set_state(self, text: str) -> None:
        # One row of fixed size: a new text never needs a layout of the screen (a key press would pay it).
        self.query_one("#log-state", Label).update(text, layout=False)

    def tick(self) -> None:
        """Refresh the `+N new` and hidden-polls counters (once a second is enough)."""
        if not self.paused and self.polls_seen != self._polls_stated:
            self._update_state()
        if self.paused:
            self._set_state(
                f"[b]PAUSED[/b] (space resumes) · +{self.new_while_paused} new lines"
                + (f" · filter /{escape(self.filter_text)}/" if self.filter_text else "")
            )
