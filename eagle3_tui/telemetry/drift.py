"""Accept length and load over hours, in ten-minute slices: what the doctor's drift rule reads.

The charts' rings hold the newest few thousand points (minutes at a busy server's log rate); a drift shows
over hours, so each slice keeps only sums: bounded memory (two days of slices), whatever the log rate. A new
run (a restart) starts the slices again, since a restart is what resets a drifting cache.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

SLICE_S = 600.0
MAX_SLICES = 288


@dataclass(frozen=True)
class AcceptSlice:
    """One slice: its start time, mean accept length and mean running requests over the lines in it."""

    t: float
    accept_len: float
    running: float | None
    lines: int


class DriftSlices:
    def __init__(self, slice_s: float = SLICE_S, max_slices: int = MAX_SLICES) -> None:
        self.slice_s = slice_s
        self._slices: deque[list[float]] = deque(maxlen=max_slices)
        """[start, accept sum, accept count, running sum, running count] per slice, oldest first."""

    def add(self, t: float, accept_len: float | None, running: float | None) -> None:
        """File one stats line; a line older than the newest slice goes into it (logs arrive in order). Values
        that are not finite numbers are dropped."""
        accept_len = accept_len if accept_len is not None and math.isfinite(accept_len) else None
        running = running if running is not None and math.isfinite(running) else None
        if (accept_len is None and running is None) or not math.isfinite(t):
            return
        start = t - t % self.slice_s
        if not self._slices or start > self._slices[-1][0]:
            self._slices.append([start, 0.0, 0, 0.0, 0])
        s = self._slices[-1]
        if accept_len is not None:
            s[1] += accept_len
            s[2] += 1
        if running is not None:
            s[3] += running
            s[4] += 1

    def slices(self) -> tuple[AcceptSlice, ...]:
        """The slices that carried an accept length, oldest first."""
        return tuple(AcceptSlice(s[0], s[1] / s[2], s[3] / s[4] if s[4] else None, int(s[2]))
                     for s in self._slices if s[2])

    def clear(self) -> None:
        self._slices.clear()
