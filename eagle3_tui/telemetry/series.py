"""Bounded time series: a fixed-capacity ring per metric and a min/mean/max downsampler.

Nothing here grows with the log: a ring holds the last `capacity` points and overwrites the
oldest. Charts ask for about twice their width in buckets (research/perf_anchors.md: plotext cost
follows the number of points drawn).
"""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = ["Bucket", "Ring", "buckets", "gap_s", "split_runs"]


@dataclass(frozen=True, slots=True)
class Bucket:
    """The points of one time slice: mean time `t`, and the min / mean / max value."""

    t: float
    lo: float
    mean: float
    hi: float
    count: int = 1


class Ring:
    """The last `capacity` (time, value) points of one metric, oldest first."""

    __slots__ = ("_cap", "_descents", "_n", "_start", "_t", "_v")

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("Ring capacity must be at least 1")
        self._cap = int(capacity)
        self._t = array("d", bytes(8 * self._cap))
        self._v = array("d", bytes(8 * self._cap))
        self._start = 0  # index of the oldest point
        self._n = 0
        # points held whose time is below the one before them: at 0 the times are in order, and a
        # window is found by bisection (charts ask for one ten times a second, of up to 4096 points)
        self._descents = 0

    @property
    def capacity(self) -> int:
        return self._cap

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[tuple[float, float]]:
        return zip(self.times(), self.values(), strict=True)

    def append(self, t: float, v: float) -> None:
        """Add a point; the oldest one goes when the ring is full."""
        t = float(t)
        if self._n == self._cap:  # the oldest goes first, and the step from it to the next
            old = self._start
            self._start = (self._start + 1) % self._cap
            self._n -= 1
            if self._n and not self._t[self._start] >= self._t[old]:
                self._descents -= 1
        if self._n and not t >= self._t[(self._start + self._n - 1) % self._cap]:  # NaN counts as out of order
            self._descents += 1
        i = (self._start + self._n) % self._cap
        self._n += 1
        self._t[i] = t
        self._v[i] = float(v)

    def clear(self) -> None:
        self._start = 0
        self._n = 0
        self._descents = 0

    def last(self) -> tuple[float, float] | None:
        """The newest (time, value), or None when empty."""
        if self._n == 0:
            return None
        i = (self._start + self._n - 1) % self._cap
        return self._t[i], self._v[i]

    def _ordered(self, arr: array) -> list[float]:
        end = self._start + self._n
        if end <= self._cap:
            return arr[self._start : end].tolist()
        return arr[self._start :].tolist() + arr[: end - self._cap].tolist()

    def times(self) -> list[float]:
        """Times, oldest first."""
        return self._ordered(self._t)

    def values(self) -> list[float]:
        """Values, oldest first."""
        return self._ordered(self._v)

    def window(self, t0: float | None = None, t1: float | None = None) -> list[tuple[float, float]]:
        """The points with t0 <= t <= t1 (either bound may be open)."""
        lo = -math.inf if t0 is None else t0
        hi = math.inf if t1 is None else t1
        ts, vs = self.times(), self.values()
        if self._descents or (ts and math.isnan(ts[0])):
            return [(t, v) for t, v in zip(ts, vs, strict=True) if lo <= t <= hi]
        i, j = bisect_left(ts, lo), bisect_right(ts, hi)
        return list(zip(ts[i:j], vs[i:j], strict=True))

    def downsample(self, n: int, t0: float | None = None, t1: float | None = None) -> list[Bucket]:
        """At most `n` buckets of equal time span over [t0, t1] (default: the points' own span); see `buckets`."""
        return buckets(self.window(t0, t1), n, t0, t1)


def buckets(pts: list[tuple[float, float]], n: int, t0: float | None = None, t1: float | None = None) -> list[Bucket]:
    """At most `n` buckets of equal time span over [t0, t1] (default: the points' own span) of `pts`,
    a ring's window oldest first (any thread: it reads only `pts`).

    Empty slices give no bucket, so a gap in the data stays a gap in the chart. Points that fit one
    per bucket are returned as they are (lo == mean == hi).
    """
    if not pts or n < 1:
        return []
    start = pts[0][0] if t0 is None else t0
    stop = pts[-1][0] if t1 is None else t1
    if len(pts) <= n:
        return [Bucket(t, v, v, v, 1) for t, v in pts]
    span = stop - start
    if span <= 0:
        vals = [v for _, v in pts]
        return [Bucket(start, min(vals), sum(vals) / len(vals), max(vals), len(vals))]
    width = span / n
    out: list[Bucket] = []
    cur = -1
    ts = lo = hi = total = 0.0
    count = 0
    for t, v in pts:
        k = min(int((t - start) / width), n - 1)
        if k != cur:
            if count:
                out.append(Bucket(ts / count, lo, total / count, hi, count))
            cur, ts, lo, hi, total, count = k, 0.0, v, v, 0.0, 0
        ts += t
        total += v
        count += 1
        if v < lo:
            lo = v
        if v > hi:
            hi = v
    if count:
        out.append(Bucket(ts / count, lo, total / count, hi, count))
    return out


def gap_s(window_s: float) -> float:
    """How long a pause in reporting (an idle server, a restart) cuts a chart's line, for a chart `window_s`
    wide: 25 s, or a twelfth of the window. A line drawn across it would show values nobody measured."""
    return max(25.0, window_s / 12)


def split_runs(ts: Sequence[float], gap: float) -> list[tuple[int, int]]:
    """Index ranges [i, j) of `ts` (ascending) with no step over `gap` inside: the pieces a chart draws as lines."""
    out: list[tuple[int, int]] = []
    start = 0
    for i in range(1, len(ts) + 1):
        if i == len(ts) or ts[i] - ts[i - 1] > gap:
            out.append((start, i))
            start = i
    return [r for r in out if r[1] > r[0]]
