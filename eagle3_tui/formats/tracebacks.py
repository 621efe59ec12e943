"""The lines of a traceback a log reader keeps after a failure line, bounded for any engine's log.

A crash can print thousands of lines (a recursion, a dump of tensors); the reader keeps the first and
the last ones, where the call site and the exception are, and counts what it left out.
"""

from __future__ import annotations

from collections import deque

MAX_HEAD = 8
MAX_TAIL = 56
CUT_AT = 200  # a continuation line longer than the reader's limit keeps this many characters


class TracebackBuffer:
    def __init__(self, max_line: int) -> None:
        self._max_line = max_line
        self._head: list[str] = []
        self._tail: deque[str] = deque(maxlen=MAX_TAIL)
        self._dropped = 0

    def add(self, text: str) -> None:
        if len(text) > self._max_line:
            text = text[:CUT_AT] + " ..."
        if len(self._head) < MAX_HEAD:
            self._head.append(text)
            return
        if len(self._tail) == MAX_TAIL:
            self._dropped += 1
        self._tail.append(text)

    def take(self) -> tuple[str, ...]:
        """The lines kept (a `... N traceback lines left out ...` line where some were), and an empty buffer."""
        lines = list(self._head)
        if self._dropped:
            lines.append(f"... {self._dropped} traceback lines left out ...")
        lines.extend(self._tail)
        self._head, self._tail, self._dropped = [], deque(maxlen=MAX_TAIL), 0
        return tuple(lines)
