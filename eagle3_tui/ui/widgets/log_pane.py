"""The live log: batched writes, failures and warnings coloured, regex filter, pause, wrap.

Lines arrive in batches from the session; they go into a bounded deque (the pane's own history,
used to re-filter and re-wrap) and into a pending list that a timer flushes with one
`Log.write_lines` call (per-line writes are ~40x slower). Nothing here grows with the log.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from typing import Any

from rich.highlighter import Highlighter
from rich.style import Style
from rich.text import Text
from textual.app import ComposeResult
from textual.color import Color
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, Label, Log

from eagle3_tui.ui.format import wrap_line

_BAD = re.compile(
    r"Traceback|Error|ERROR|exception|Exception|sigquit|SIGQUIT|Segmentation fault|illegal memory access|Killed"
    r'|^\s+File "|^\s+\^+\s*$'  # the body of a Python traceback
)
_WARN = re.compile(r"WARNING|Warning|warning|overrid")
_GOOD = re.compile(r"fired up and ready to roll")


class LogHighlighter(Highlighter):
    """Whole-line colour for failures and warnings; styles come from the theme's variables."""

    def __init__(self) -> None:
        self.bad = Style(color="red")
        self.warn = Style(color="yellow")
        self.good = Style(color="green")

    def set_colors(self, bad: str, warn: str, good: str) -> None:
        self.bad = Style(color=Color.parse(bad).rich_color)
        self.warn = Style(color=Color.parse(warn).rich_color)
        self.good = Style(color=Color.parse(good).rich_color, bold=True)

    def highlight(self, text: Text) -> None:
        plain = text.plain
        if _BAD.search(plain):
            text.stylize(self.bad)
        elif _WARN.search(plain):
            text.stylize(self.warn)
        elif _GOOD.search(plain):
            text.stylize(self.good)


def compile_filter(text: str) -> tuple[re.Pattern[str] | None, bool]:
    """`/pattern` filter text → (regex, inverted). A leading `!` inverts; raises re.error on a bad regex."""
    inverted = text.startswith("!")
    body = text[1:] if inverted else text
    if not body:
        return None, False
    return re.compile(body), inverted


class LogPane(Vertical):
    """Log widget + filter input + a one-line state label."""

    DEFAULT_CSS = """
    LogPane { height: 1fr; }
    LogPane > #log-state { height: 1; color: $foreground-muted; }
    LogPane > #log-filter { display: none; height: 3; }
    LogPane.filtering > #log-filter { display: block; }
    LogPane > Log { height: 1fr; }
    """

    class FilterError(Message):
        def __init__(self, error: str) -> None:
            super().__init__()
            self.error = error

    def __init__(self, *, history: int = 10_000, rebuild_rows: int = 2_000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.rebuild_rows = rebuild_rows
        self.flush_cap = 400  # rows per 100 ms tick while following (4,000 rows/s on screen)
        self.skipped_on_screen = 0
        self.history: deque[str] = deque(maxlen=history)
        self.pending: list[str] = []
        self.paused = False
        self.new_while_paused = 0
        self.wrap = False
        self.pattern: re.Pattern[str] | None = None
        self.inverted = False
        self.filter_text = ""
        self.total_lines = 0
        self.highlighter = LogHighlighter()

    def compose(self) -> ComposeResult:
        yield Label("", id="log-state")
        yield Input(
            placeholder="regex filter (! inverts; empty clears; enter applies, esc closes)", id="log-filter"
        )
        log = Log(max_lines=self.history.maxlen, highlight=True, id="log")
        log.highlighter = self.highlighter
        yield log

    def on_mount(self) -> None:
        self.apply_theme()
        self.set_interval(0.1, self.flush)
        self._update_state()

    @property
    def log_widget(self) -> Log:
        return self.query_one(Log)

    def apply_theme(self) -> None:
        v = self.app.theme_variables
        self.highlighter.set_colors(
            v.get("accept-bad", "red"), v.get("accept-warn", "yellow"), v.get("accept-good", "green")
        )
        if self.is_mounted:
            self.rebuild()

    # -- feeding -------------------------------------------------------------------------------
    def add_lines(self, lines: Iterable[str]) -> None:
        """Called for each LogBatch; cheap: the widget is written by `flush` on a timer."""
        lines = list(lines)
        self.total_lines += len(lines)
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
        pattern = self.pattern
        if pattern is not None:
            if self.inverted:
                lines = [ln for ln in lines if not pattern.search(ln)]
            else:
                lines = [ln for ln in lines if pattern.search(ln)]
        lines = list(lines)
        if last is not None:
            lines = lines[-last:]
        if self.wrap:
            width = max(self.log_widget.size.width - 1, 20)
            out: list[str] = []
            for ln in lines:
                out.extend(wrap_line(ln, width))
            return out[-last:] if last is not None else out
        return lines

    def flush(self) -> None:
        """Write what arrived since the last flush. In a flood (more than `flush_cap` lines per
        tick) only the newest are written while following, with a note of how many were skipped on
        screen; they are all in the history, and pausing shows them without gaps."""
        if not self.pending:
            return
        batch, self.pending = self.pending, []
        if len(batch) > self.flush_cap:
            skipped = len(batch) - self.flush_cap
            self.skipped_on_screen += skipped
            batch = [f"… {skipped:,} lines not drawn while following (space pauses and shows them)", *batch[skipped:]]
        self.log_widget.write_lines(batch)

    def rebuild(self) -> None:
        """Re-render from history (filter, wrap or theme changed, or resume).

        The filter runs over the whole history, but only the newest `rebuild_rows` matches are
        written back at once: writing 10,000 rows costs ~100 ms, which a key press must not wait for.
        """
        self.pending = []
        log = self.log_widget
        log.clear()
        log.write_lines(self._visible(self.history, last=self.rebuild_rows))
        log.scroll_end(animate=False)
        self._update_state()

    # -- actions -------------------------------------------------------------------------------
    def set_filter(self, text: str) -> bool:
        try:
            pattern, inverted = compile_filter(text)
        except re.error as err:
            self.post_message(self.FilterError(f"bad regex {text!r}: {err}"))
            self.query_one("#log-filter", Input).add_class("-invalid")
            return False
        self.query_one("#log-filter", Input).remove_class("-invalid")
        self.pattern, self.inverted, self.filter_text = pattern, inverted, text if pattern else ""
        self.rebuild()
        return True

    def open_filter(self) -> None:
        self.add_class("filtering")
        box = self.query_one("#log-filter", Input)
        box.value = self.filter_text
        box.focus()
        box.select_all()  # typing replaces the old filter; arrows keep it

    def close_filter(self) -> None:
        self.remove_class("filtering")
        self.log_widget.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self.set_filter(event.value):
            self.close_filter()

    def toggle_pause(self) -> None:
        self.paused = not self.paused
        if self.paused:
            self.log_widget.auto_scroll = False
            self.rebuild()  # the frozen view is the history itself: nothing skipped in a flood
        else:
            self.log_widget.auto_scroll = True
            self.new_while_paused = 0
            self.rebuild()
        self._update_state()

    def toggle_wrap(self) -> None:
        self.wrap = not self.wrap
        self.rebuild()

    def top(self) -> None:
        self.log_widget.scroll_home(animate=False)

    def bottom(self) -> None:
        self.log_widget.scroll_end(animate=False)

    def _update_state(self) -> None:
        bits = ["[b]PAUSED[/b] (space resumes)" if self.paused else "following"]
        if self.filter_text:
            bits.append(
                f"filter {'NOT ' if self.inverted else ''}/{_esc(self.pattern.pattern if self.pattern else '')}/"
            )
        if self.wrap:
            bits.append("wrap")
        self.query_one("#log-state", Label).update(" · ".join(bits))

    def tick(self) -> None:
        """Refresh the `+N new` counter while paused (once a second is enough)."""
        if self.paused:
            self.query_one("#log-state", Label).update(
                f"[b]PAUSED[/b] (space resumes) · +{self.new_while_paused} new lines"
                + (f" · filter /{_esc(self.filter_text)}/" if self.filter_text else "")
            )


def _esc(text: str) -> str:
    from textual.markup import escape

    return escape(text)
