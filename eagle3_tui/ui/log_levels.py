"""Which log lines the log pane colours, read from the events the session parsed them into.

The pane never classifies a line itself: `LogBatch` carries the lines and the `LogReader` events for
them, in order. Every line but a failure's traceback yields one event whose `.line` is that line;
a `Failure` arrives when its record ends (possibly one batch later), and the lines from its header
up to the next event's line are its traceback. Lines not yet accounted for wait in a bounded tail.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from eagle3_tui.session import AnyLogEvent as LogEvent

Level = Literal["bad", "warn", "good"]


@cache
def _level_types() -> dict[type, Level]:
    """The event types that give their line a level (the log model is imported with the first batch,
    not on the way to the console's first frame)."""
    from eagle3_tui.engines import Failed, Ready
    from eagle3_tui.sglang.logline import Failure, ServerReady, ServerWarning

    return {Failure: "bad", ServerWarning: "warn", ServerReady: "good", Failed: "bad", Ready: "good"}


def event_level(event: LogEvent) -> Level | None:
    for kind, level in _level_types().items():
        if isinstance(event, kind):
            return level
    return None


class LineLevels:
    """Line text → level, for the lines that have one (bounded: the oldest entries go first)."""

    def __init__(self, capacity: int = 20_000, waiting: int = 2_000) -> None:
        self.capacity = capacity
        self._levels: OrderedDict[str, Level] = OrderedDict()
        self._waiting: deque[str] = deque(maxlen=waiting)  # lines no event has claimed yet

    def level(self, text: str) -> Level | None:
        return self._levels.get(text)

    def set(self, text: str, level: Level) -> None:
        levels = self._levels
        levels[text] = level
        levels.move_to_end(text)
        while len(levels) > self.capacity:
            levels.popitem(last=False)

    def add(self, lines: Sequence[str], events: Sequence[LogEvent]) -> bool:
        """Take one batch. True when a line of an earlier batch got its level only now (a failure
        whose record ended in this batch): what is already drawn must be redrawn."""
        if not self._waiting and len(events) == len(lines) and _level_types().keys().isdisjoint(map(type, events)):
            # The common batch, checked without a Python step per line: one event per line and none with
            # a level (no failure, so no traceback line without its event). Each event is its own line, in
            # order, so the walk below would mark nothing and leave nothing waiting.
            return False
        return self._walk(lines, events)

    def _walk(self, lines: Sequence[str], events: Sequence[LogEvent]) -> bool:
        """`add` event by event (any batch; `add` skips it for the common one)."""
        earlier = len(self._waiting)
        pending = [*self._waiting, *(ln.rstrip("\r\n") for ln in lines)]
        cursor = 0
        failure_open = False
        late = False
        for event in events:
            text = getattr(event, "line", None)  # an engine's stats event names no line of its own
            index = _find(pending, text, cursor) if isinstance(text, str) else None
            if index is None:
                continue
            if failure_open:  # everything between the failure's header and this line was its traceback
                late |= self._mark(pending, cursor, index, "bad", earlier)
            level = event_level(event)
            if level is not None:
                late |= self._mark(pending, index, index + 1, level, earlier)
            failure_open = level == "bad"
            cursor = index + 1
        if failure_open:
            late |= self._mark(pending, cursor, len(pending), "bad", earlier)
            cursor = len(pending)
        self._waiting.clear()
        self._waiting.extend(pending[cursor:])
        return late

    def _mark(self, pending: list[str], start: int, stop: int, level: Level, earlier: int) -> bool:
        for text in pending[start:stop]:
            self.set(text, level)
        return start < earlier and start < stop


def _find(lines: list[str], text: str, start: int) -> int | None:
    for i in range(start, len(lines)):
        if lines[i] == text:
            return i
    return None
