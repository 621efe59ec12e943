"""The native reading: the compiled scanner (`sglang/_linescan.c`) over a block, LogReader for what it hands over."""

from __future__ import annotations

from eagle3_tui.sglang.logline import KEY_NEEDLES
from eagle3_tui.sglang.scan.feeder import LineFeeder, row_time

try:
    from eagle3_tui.sglang import _linescan  # beside this package: a child of it would import the package
except ImportError:  # not built (no C compiler where the package was installed): the regex reading stands in
    _linescan = None  # type: ignore[assignment]

__all__ = ["AVAILABLE", "NativeRange"]

AVAILABLE = _linescan is not None


class NativeRange:
    """Reads the lines of a range (buf[p0] and buf[p1 - 1] are newlines, whole lines between): the
    compiled scanner counts the decode rows and skips the lines that cannot be an event; each line
    it stops at (one holding a KEY_NEEDLES string, or a decode row it cannot cut) goes through
    LogReader, with the traceback that follows a failure."""

    def __init__(self, feeder: LineFeeder) -> None:
        assert _linescan is not None, "the compiled scanner is not built"
        self._feeder = feeder

    def __call__(self, buf: bytes, p0: int, p1: int) -> None:
        fd = self._feeder
        pos = fd.drain_lines(buf, p0, p1)
        if pos >= p1 - 1:
            return
        if not fd.result.recognized:
            fd.probe(buf, pos, p1)
        while pos < p1 - 1:
            a, b, n, lens, tps, pairs, first, last, seen = _linescan.scan(
                buf, pos, p1, KEY_NEEDLES, fd.sink.pairs_wanted > 0
            )
            if seen:
                fd.result.recognized = True
            if n:
                t_first = row_time(buf, first, buf.index(b"\n", first + 1))
                t_last = row_time(buf, last, buf.index(b"\n", last + 1))
                if t_first is None or t_last is None:
                    fd.feed_lines(buf, pos, a)  # a clock parse_line reads otherwise: exactly
                else:
                    fd.sink.decode_bulk(n, lens, tps, pairs, t_first, t_last)
            if a >= p1 - 1:
                return
            fd.feed_lines(buf, a, b)
            pos = fd.drain_lines(buf, b, p1)
