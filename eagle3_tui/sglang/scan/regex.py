"""The regex reading, where the compiled scanner is not built: one pattern, `_ROW`, over a block.

`_ROW.findall` returns the decode bodies and the odd rows (with the traceback lines LogReader would
absorb into them); the bodies of a stretch are joined and cut by `split`, slices and short
patterns, and a stretch they do not explain goes through LogReader, as do the odd rows that hold a
KEY_NEEDLES string.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate, compress
from operator import itemgetter, methodcaller

from eagle3_tui.sglang import logline
from eagle3_tui.sglang.logline import KEY_NEEDLES, MAX_LINE
from eagle3_tui.sglang.scan.feeder import LineFeeder, row_time

__all__ = ["RegexRange", "plain_lens"]


def _one_line(pattern: str) -> bytes:
    """A logline pattern (written for one line of text) as bytes that never cross a newline."""
    return pattern.replace("[^", "[^\\n").encode()


# --- the row pattern ---------------------------------------------------------------------------
# Written for the regex engine: single-byte loops (`[^\]]`, `[^\n]`) are its fast ones, so they
# do the skipping, and every alternative starts with its own literal.

# SGLang's prefix, `[%(asctime)s{.msecs}{ DP0}{ TP0}] `, read loosely: a bracket of 19-60 bytes
# on one line (`.` stops at a newline; `.{19}` is the engine's cheapest way to say so).
_PREFIX = rb"\[.{19}[^\]\n]{0,41}+\] "
# A Decode line: its body (after `#running-req: `) is read in bulk later; the bound keeps every
# line taken here within MAX_LINE (longer ones are `Other` and go through LogReader instead).
_DECODE = rb"Decode batch(?: \[\d{1,12}\])?([.,]) #running-req: ([^\n]{0,%d}+)(?=\n)" % (MAX_LINE - 200)
# Messages that are never an event a replay uses, whatever follows them (see parse_line): uvicorn
# access lines, request dumps, Prefill stat lines, and two exact SGLang notices.
_ACCESS = rb"INFO:     [\d:\[]"
_BORING = (
    _ACCESS + rb"|Receive: |Finish: |Prefill batch(?: \[\d{1,12}\])?[.,]"
    rb"|KV cache pool is full\. Retract requests\. #retracted_reqs: \d+, (?:#aborted_retracted_reqs: \d+, )?"
    rb"#new_token_ratio: [\d.]+ -> [\d.]+\r*(?=\n)"
    rb"|Cache flushed successfully!\r*(?=\n)"
)
# The lines after a line that belong to it: those LogReader would absorb into a traceback (no
# record start, or longer than MAX_LINE).
_RECORD_START = (
    rb"(?=[^\n]{0,%d}\r*\n)(?:" % MAX_LINE
    + _one_line(logline._WRAPPER.pattern)
    + rb")*+"
    + _one_line(logline._RECORD_START.pattern)
)
_TAIL = rb"[^\n]*+(?:\n(?!" + _RECORD_START + rb")[^\n]*+)*(?=\n)"
# Groups: 1 prefix seen, 2 decode separator, 3 decode body, 4 odd message, 5 odd bare line.
_ROW = re.compile(
    rb"\n(?:(\[)" + _PREFIX[2:] + rb")?+(?(1)(?:" + _DECODE + rb"|(?!" + _BORING + rb")(" + _TAIL + rb"))"
    rb"|(?!" + _ACCESS + rb")(" + _TAIL + rb"))"
)
_PREFIX_AT = re.compile(rb"\n" + _PREFIX)

# Values in decode bodies joined by newlines. A value ends where `split(", ")` (after rstrip)
# ends it; one that does not is no number (b"", as parse_line's float() would fail on it).
_END = rb"(?=, |[, \t\r]*\n)"
_VALUE = rb"[^,\n]*+" + _END
_ACCEPT_LEN = re.compile(rb", accept len: (" + _VALUE + rb"|)")
# tok/s: a 2-decimal number is taken to one decimal (replay bins it at 0.1 tok/s, and fewer
# distinct texts count faster); anything else whole. One match per counted decode line.
_TPS_VALUE = rb"(\d{1,12}\.\d(?=\d(?:, |[, \t\r]*\n))|" + _VALUE + rb"|)"
_GEN_TPS = re.compile(rb", gen throughput \(token/s\): " + _TPS_VALUE)
# tok/s as SGLang prints it (2 decimals) in one short pass: the literal before the value is the
# engine's search, no step per character. Where it matches every occurrence (the caller counts the
# key) it gives what _GEN_TPS gives.
_PLAIN_TPS = re.compile(rb", gen throughput \(token/s\): (\d{1,12}\.\d)\d(?=, )")
_PAIR = re.compile(rb", accept len: (" + _VALUE + rb"), accept rate: (" + _VALUE + rb")")
_LEN_KEY = b", accept len: "
_TPS_COUNT = methodcaller("count", b"gen throughput")
_HEAD6 = itemgetter(slice(0, 6))
_HEAD4 = itemgetter(slice(0, 4))
_DIGITS_TO_0 = bytes.maketrans(b"123456789", b"000000000")


def plain_lens(bodies: bytes, n: int) -> list[bytes]:
    """The `accept len` texts when all `n` are SGLang's `d.dd, ` (then what _ACCEPT_LEN finds), else [].

    `split`, the slices and the shape check run in C: cheaper than a regex match per value.
    """
    parts = bodies.split(_LEN_KEY)[1:]
    if len(parts) != n or b"".join(map(_HEAD6, parts)).translate(_DIGITS_TO_0) != b"0.00, " * n:
        return []
    return list(map(_HEAD4, parts))


@dataclass
class _Rows:
    """One block's rows from `_ROW`, as columns (texts are b"" where a row has none)."""

    seps: tuple[bytes, ...]
    bodies: tuple[bytes, ...]
    rests: tuple[bytes, ...]
    bares: tuple[bytes, ...]

    @classmethod
    def of(cls, rows: list[tuple[bytes, ...]]) -> _Rows:
        cols = tuple(zip(*rows, strict=True)) if rows else ((),) * 5
        return cls(cols[1], cols[2], cols[3], cols[4])

    def relevant(self) -> list[int]:
        """Indices of the odd rows that hold a KEY_NEEDLES string, in order.

        The odd rows are picked out by `compress` (no Python step per row); only they are looked at.
        """
        rests, bares = self.rests, self.bares
        index = sorted((*compress(range(len(rests)), rests), *compress(range(len(bares)), bares)))
        if not index:
            return []
        odd = [rests[k] or bares[k] for k in index]
        joined = b"\n".join(odd)
        hits = [needle for needle in KEY_NEEDLES if needle in joined]
        if not hits:
            return []
        starts = list(accumulate((len(t) + 1 for t in odd), initial=0))
        found: set[int] = set()
        for needle in hits:
            i = joined.find(needle)
            while i >= 0:
                k = bisect_right(starts, i) - 1
                found.add(index[k])
                i = joined.find(needle, starts[k + 1])
        return sorted(found)


class RegexRange:
    """Reads the lines of a range (buf[p0] and buf[p1 - 1] are newlines, whole lines between)."""

    def __init__(self, feeder: LineFeeder) -> None:
        self._feeder = feeder

    def __call__(self, buf: bytes, p0: int, p1: int) -> None:
        fd = self._feeder
        pos, _ = self._drain(buf, p0, p1)
        if pos >= p1 - 1:
            return
        if not fd.result.recognized:
            fd.probe(buf, pos, p1)
        rows = _Rows.of(_ROW.findall(buf, pos, p1))
        if not rows.seps:
            return
        if not fd.result.recognized and any(rows.seps):
            fd.result.recognized = True
        k = 0
        for r in rows.relevant():
            if r < k:
                continue  # consumed with the traceback before it
            start, end = self._locate(buf, pos, p1, rows.rests[r], rows.bares[r])
            self._bulk(buf, pos, start + 1, rows, k, r)
            fd.feed_lines(buf, start, end)
            pos, consumed = self._drain(buf, end, p1)
            k = r + 1 + consumed
        self._bulk(buf, pos, p1, rows, k, len(rows.seps))

    def _drain(self, buf: bytes, pos: int, p1: int) -> tuple[int, int]:
        """While a failure reads its traceback, feed what follows it (whole rows, so that the
        rows of the block stay in step): returns the new position and the rows consumed."""
        fd = self._feeder
        rows = 0
        while fd.reader.pending is not None and pos < p1 - 1:
            m = _ROW.match(buf, pos, p1)
            end = m.end() if m is not None else buf.index(b"\n", pos + 1)
            rows += m is not None
            fd.feed_lines(buf, pos, end)
            pos = end
        return pos, rows

    @staticmethod
    def _locate(buf: bytes, pos: int, p1: int, rest: bytes, bare: bytes) -> tuple[int, int]:
        """The newlines before and after the odd row with this text, searching from `pos`.

        An earlier line with the same text would be an odd row holding the same needle, so it
        came earlier in the block's relevant rows and `pos` is past it already.
        """
        text = rest or bare
        i = buf.find(text, pos + 1, p1)
        while i >= 0:
            if bare:
                if buf[i - 1] == 10:
                    return i - 1, i + len(text)
            else:
                ls = buf.rfind(b"\n", pos, i)
                m = _PREFIX_AT.match(buf, ls, i)
                if m is not None and m.end() == i:
                    return ls, i + len(text)
            i = buf.find(text, i + 1, p1)
        raise AssertionError("a row of this block was not found in it")

    def _bulk(self, buf: bytes, a: int, b: int, rows: _Rows, i: int, j: int) -> None:
        """Rows i..j (the decode rows among them) in bulk; they lie between the newlines at a and b - 1."""
        decode_rows = len(b"".join(rows.seps[i:j]))  # a decode row's separator is one byte, others b""
        if decode_rows <= 0:
            return
        bodies = b"\n".join(rows.bodies[i:j]) + b"\n"
        n = bodies.count(b"gen throughput")
        if not n:
            return  # no tok/s: not a line SGLang writes, and RunSplitter skips such lines too
        if max(map(_TPS_COUNT, rows.bodies[i:j])) > 1:
            n = -1  # a row repeats it (another may lack it: the totals would hide that): read exactly
        nlen = bodies.count(b"accept len")
        tps: Sequence[bytes] = _PLAIN_TPS.findall(bodies)
        if len(tps) != n:
            tps = _GEN_TPS.findall(bodies)
        lens = plain_lens(bodies, nlen) if nlen else []
        if len(lens) != nlen:
            lens = _ACCEPT_LEN.findall(bodies)
        pairs: list[tuple[bytes, bytes]] = []
        if self._feeder.sink.pairs_wanted > 0:
            pairs = [m.groups() for m in _PAIR.finditer(bodies)]  # type: ignore[misc]
        if (
            n != decode_rows  # a row without tok/s is dropped with its accept len, by RunSplitter
            or nlen > decode_rows
            or len(tps) != n
            or len(lens) != nlen
            or (self._feeder.sink.pairs_wanted > 0 and len(pairs) != bodies.count(b"accept rate"))
        ):
            self._feeder.feed_lines(buf, a, b - 1)  # a key spelled or repeated otherwise: read them exactly
            return
        self._feeder.sink.decode_bulk(n, lens, tps, pairs, self._first_time(buf, a, b), self._last_time(buf, a, b))

    @staticmethod
    def _decode_times(buf: bytes, starts: Iterator[int], b: int) -> float | None:
        """The first timestamp parse_line gives for a decode row starting at one of `starts`."""
        for s in starts:
            m = _ROW.match(buf, s, b)
            if m is None or not m.group(2):
                continue
            t = row_time(buf, s, m.end())
            if t is not None:
                return t
        return None

    def _first_time(self, buf: bytes, a: int, b: int) -> float | None:
        return self._decode_times(buf, (m.start() for m in _ROW.finditer(buf, a, b) if m.group(2)), b)

    def _last_time(self, buf: bytes, a: int, b: int) -> float | None:
        def starts() -> Iterator[int]:
            i = b
            while True:
                i = buf.rfind(b"Decode batch", a, i)
                if i < 0:
                    return
                yield buf.rfind(b"\n", a, i)

        return self._decode_times(buf, starts(), b)
