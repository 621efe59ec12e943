"""Reading a whole log file fast (replay), with the same meaning as `LogReader`.

A Python loop over lines costs about 1 µs a line; `grep` reads 10-15 M lines/s. Replay reads a file
in blocks of whole lines and finds, per block, the few lines that matter; three readings exist
(ENGINES), all giving the same events:

- `native` (`_linescan.c`, built by setup.py where a C compiler is): memchr finds each line end
  and a few byte compares classify the line. A decode row in SGLang's shape (`[date time RANKS]
  Decode batch..., #running-req: ...`, within a length bound) has its `accept len` and tok/s texts
  cut in C and goes to the sink in bulk; an access line, a `--log-requests` dump, a Prefill line,
  a KV-cache retraction or `Cache flushed successfully!` is skipped; any other line is searched
  for the KEY_NEEDLES strings (every line parse_line turns into an event a replay uses holds one)
  in one pass. The scan stops at a line holding one, or at a decode row it cannot cut (a key
  spelled or repeated otherwise), and that line goes through LogReader, with the traceback after a
  failure; then it carries on.
- `regex`, where the C module is not built: one compiled pattern, `_ROW`, runs over the block
  (`findall`) and returns the decode bodies and the odd rows with their tracebacks; the bodies of a
  stretch are joined and cut by `split`, slices and short patterns, and a stretch they do not
  explain goes through LogReader. About 3.5x slower than `native`.
- `reference` (`fast=False`): every line through LogReader, what the other two are tested against
  (tests/test_replay.py: random logs of a busy server's line mix, eagle3_tui.sglang.logmix, and
  of decode rows in every odd shape).

They can differ only on lines built to look like SGLang's and not be: a 19-60 character bracket
opening a line that holds a stat header itself; a line over MAX_LINE bytes but not characters.
The native scanner skips other loggers' wrappers (Ray's `(Name pid=N) `, a shipper's `[...T...]
name >> `) as parse_line does; logs in Python logging's format, and wrapped lines on the regex
scanner, are odd lines that hold a needle: read right, through LogReader, more slowly. So are logs
made mostly of warnings or tracebacks: each of those lines is parsed on its own (benchmarks/
parse_bench.py --each-class shows the cost per class of line). Memory is bounded by the block size; a line longer than
MAX_LONG_LINE is dropped unread.

Measured (benchmarks/parse_bench.py, 2-core shared VM, 1M lines, with the other core busy): on a
busy server's mix (163 MB) 1/3.2 of `LC_ALL=C grep -c 'accept len'` (0.32 s against 0.10 s, of it
~0.09 s interpreter start and imports), on a log of stat lines (140 MB) 1/3.2; 44 MB peak RSS on
either, the same at 250k lines. The regex scanner read the mix at 1/8.0. Workers
(logscan_parallel) start at 1 GiB with the native scanner: below that forking costs more than it
saves.
"""

from __future__ import annotations

import gc
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import accumulate, compress
from operator import itemgetter
from typing import Protocol

from eagle3_tui.sglang import logline
from eagle3_tui.sglang.logline import KEY_NEEDLES, MAX_LINE, LogEvent, LogReader, Other, epoch_of, parse_line

try:
    from eagle3_tui.sglang import _linescan
except ImportError:  # not built (no C compiler where the package was installed): the regex scanner reads it
    _linescan = None  # type: ignore[assignment]

__all__ = ["ENGINES", "ByteSource", "ScanResult", "ScanSink", "best_engine", "scan"]

ENGINES = ("native", "regex", "reference")
"""The three readings of a block, fastest first; all give the same events (tests/test_replay.py)."""


def best_engine() -> str:
    """The fastest scanner this installation has: the compiled one where it was built."""
    return "native" if _linescan is not None else "regex"

BLOCK_SIZE = 1 << 20
MAX_LONG_LINE = 1 << 20
PROBE_BYTES = 4 << 20  # give up on a file with no log line in its first 4 MiB


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
# logline's own reading of SGLang's prefix (groups: date, hh, mm, ss, fraction, ranks).
_SGLANG_PREFIX = re.compile(logline._SGLANG_PREFIX.pattern.encode())

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
_HEAD6 = itemgetter(slice(0, 6))
_HEAD4 = itemgetter(slice(0, 4))
_DIGITS_TO_0 = bytes.maketrans(b"123456789", b"000000000")


def _plain_lens(bodies: bytes, n: int) -> list[bytes]:
    """The `accept len` texts when all `n` are SGLang's `d.dd, ` (then what _ACCEPT_LEN finds), else [].

    `split`, the slices and the shape check run in C: cheaper than a regex match per value.
    """
    parts = bodies.split(_LEN_KEY)[1:]
    if len(parts) != n or b"".join(map(_HEAD6, parts)).translate(_DIGITS_TO_0) != b"0.00, " * n:
        return []
    return list(map(_HEAD4, parts))


def _epoch(m: re.Match[bytes]) -> float | None:
    frac = m.group(5)
    return epoch_of(
        m.group(1).decode(), m.group(2).decode(), m.group(3).decode(), m.group(4).decode(),
        frac.decode() if frac else None,
    )


class ByteSource(Protocol):
    """What scan reads: a binary file, a pipe, a gzip stream, a window of a file."""

    def read(self, size: int = ..., /) -> bytes: ...


class ScanSink(Protocol):
    """Where scanned data goes (telemetry.runs.RunSplitter is one)."""

    @property
    def pairs_wanted(self) -> int: ...

    def event(self, ev: LogEvent) -> None: ...

    def decode_bulk(
        self,
        lines: int,
        accept_lens: Iterable[bytes],
        gen_tps: Iterable[bytes],
        pairs: Iterable[tuple[bytes, bytes]],
        t_first: float | None,
        t_last: float | None,
    ) -> None: ...


@dataclass
class ScanResult:
    bytes_read: int = 0
    recognized: bool = False  # saw at least one line parse_line reads as an SGLang log record
    gave_up: bool = False  # stopped after PROBE_BYTES without one
    workers: int = 1  # processes that read the file (logscan_parallel)
    engine: str = "native"  # which of ENGINES read it


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


class _Scanner:
    def __init__(self, sink: ScanSink, reader: LogReader | None = None) -> None:
        self.sink = sink
        self.reader = reader if reader is not None else LogReader()
        self.result = ScanResult()

    # -- one line at a time --------------------------------------------------------------------

    def _feed(self, raw: bytes) -> None:
        for ev in self.reader.feed(raw.decode("utf-8", "replace")):
            if not self.result.recognized and not isinstance(ev, Other):
                self.result.recognized = True
            self.sink.event(ev)

    def _feed_lines(self, buf: bytes, a: int, b: int) -> None:
        """The lines between the newlines at `a` and `b`, through LogReader."""
        for raw in buf[a + 1 : b].split(b"\n"):
            self._feed(raw)

    def slow_range(self, buf: bytes, p0: int, p1: int) -> None:
        """Every line of the range through LogReader (the reference path)."""
        self._feed_lines(buf, p0, p1 - 1)

    def _drain(self, buf: bytes, pos: int, p1: int) -> tuple[int, int]:
        """While a failure reads its traceback, feed what follows it (whole rows, so that the
        rows of the block stay in step): returns the new position and the rows consumed."""
        rows = 0
        while self.reader.pending is not None and pos < p1 - 1:
            m = _ROW.match(buf, pos, p1)
            end = m.end() if m is not None else buf.index(b"\n", pos + 1)
            rows += m is not None
            self._feed_lines(buf, pos, end)
            pos = end
        return pos, rows

    # -- blocks --------------------------------------------------------------------------------

    def fast_range(self, buf: bytes, p0: int, p1: int) -> None:
        """The lines of a range: buf[p0] and buf[p1 - 1] are newlines, whole lines between."""
        pos, _ = self._drain(buf, p0, p1)
        if pos >= p1 - 1:
            return
        if not self.result.recognized:
            self._probe(buf, pos, p1)
        rows = _Rows.of(_ROW.findall(buf, pos, p1))
        if not rows.seps:
            return
        if not self.result.recognized and any(rows.seps):
            self.result.recognized = True
        k = 0
        for r in rows.relevant():
            if r < k:
                continue  # consumed with the traceback before it
            start, end = self._locate(buf, pos, p1, rows.rests[r], rows.bares[r])
            self._bulk(buf, pos, start + 1, rows, k, r)
            self._feed_lines(buf, start, end)
            pos, consumed = self._drain(buf, end, p1)
            k = r + 1 + consumed
        self._bulk(buf, pos, p1, rows, k, len(rows.seps))

    def native_range(self, buf: bytes, p0: int, p1: int) -> None:
        """The lines of a range through the compiled scanner (`_linescan.c`): it counts the decode
        rows and skips the lines that cannot be an event; each line it stops at (one holding a
        KEY_NEEDLES string, or a decode row it cannot cut) goes through LogReader, with the
        traceback that follows a failure."""
        assert _linescan is not None
        pos = self._drain_lines(buf, p0, p1)
        if pos >= p1 - 1:
            return
        if not self.result.recognized:
            self._probe(buf, pos, p1)
        while pos < p1 - 1:
            a, b, n, lens, tps, pairs, first, last, seen = _linescan.scan(
                buf, pos, p1, KEY_NEEDLES, self.sink.pairs_wanted > 0
            )
            if seen:
                self.result.recognized = True
            if n:
                t_first, t_last = self._row_time(buf, first), self._row_time(buf, last)
                if t_first is None or t_last is None:
                    self._feed_lines(buf, pos, a)  # a clock parse_line reads otherwise: exactly
                else:
                    self.sink.decode_bulk(n, lens, tps, pairs, t_first, t_last)
            if a >= p1 - 1:
                return
            self._feed_lines(buf, a, b)
            pos = self._drain_lines(buf, b, p1)

    def _drain_lines(self, buf: bytes, pos: int, p1: int) -> int:
        """While a failure reads its traceback, feed it the lines that follow; the new position."""
        while self.reader.pending is not None and pos < p1 - 1:
            end = buf.index(b"\n", pos + 1)
            self._feed(buf[pos + 1 : end])
            pos = end
        return pos

    @staticmethod
    def _row_time(buf: bytes, nl: int) -> float | None:
        """The timestamp parse_line gives the decode row after the newline at `nl`."""
        end = buf.index(b"\n", nl + 1)
        p = _SGLANG_PREFIX.match(buf, nl + 1, end)
        t = _epoch(p) if p is not None and buf.startswith(b"Decode batch", p.end()) else None
        if t is None:
            t = getattr(parse_line(buf[nl + 1 : end].decode("utf-8", "replace")), "timestamp", None)
        return None if t is None else float(t)

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
        nlen = bodies.count(b"accept len")
        tps: Sequence[bytes] = _PLAIN_TPS.findall(bodies)
        if len(tps) != n:
            tps = _GEN_TPS.findall(bodies)
        lens = _plain_lens(bodies, nlen) if nlen else []
        if len(lens) != nlen:
            lens = _ACCEPT_LEN.findall(bodies)
        pairs: list[tuple[bytes, bytes]] = []
        if self.sink.pairs_wanted > 0:
            pairs = [m.groups() for m in _PAIR.finditer(bodies)]  # type: ignore[misc]
        if (
            n != decode_rows  # a row without tok/s is dropped with its accept len, by RunSplitter
            or nlen > decode_rows
            or len(tps) != n
            or len(lens) != nlen
            or (self.sink.pairs_wanted > 0 and len(pairs) != bodies.count(b"accept rate"))
        ):
            self._feed_lines(buf, a, b - 1)  # a key spelled or repeated otherwise: read them exactly
            return
        self.sink.decode_bulk(n, lens, tps, pairs, self._first_time(buf, a, b), self._last_time(buf, a, b))

    @staticmethod
    def _decode_times(buf: bytes, starts: Iterator[int], b: int) -> float | None:
        """The first timestamp parse_line gives for a decode row starting at one of `starts`."""
        for s in starts:
            m = _ROW.match(buf, s, b)
            if m is None or not m.group(2):
                continue
            p = _SGLANG_PREFIX.match(buf, s + 1, m.start(2))
            t = _epoch(p) if p is not None and buf.startswith(b"Decode batch", p.end()) else None
            if t is None:  # not SGLang's own clock: as parse_line reads it (or from `timestamp:`)
                t = getattr(parse_line(buf[s + 1 : m.end()].decode("utf-8", "replace")), "timestamp", None)
            if t is not None:
                return float(t)
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

    def _probe(self, buf: bytes, pos: int, p1: int) -> None:
        """Before the first recognised line: is there one here? (Per line, so only until then.)"""
        for raw in buf[pos + 1 : p1 - 1].split(b"\n"):
            if not isinstance(parse_line(raw.decode("utf-8", "replace")), Other):
                self.result.recognized = True
                return

    def finish(self) -> None:
        for ev in self.reader.flush():
            self.result.recognized = True  # only failures are held back
            self.sink.event(ev)


def scan(
    stream: ByteSource,
    sink: ScanSink,
    *,
    fast: bool = True,
    engine: str | None = None,
    block_size: int = BLOCK_SIZE,
    probe_bytes: int = PROBE_BYTES,
    reader: LogReader | None = None,
    flush: bool = True,
) -> ScanResult:
    """Read `stream` to its end (or give up on a non-log) and pass what it holds to `sink`.

    `engine` is one of ENGINES (default: the fastest built, `best_engine()`; `fast=False`: the
    reference, every line through LogReader). `reader` continues a LogReader's state;
    `flush=False` leaves a failure still reading its traceback pending in it (for a caller that
    reads on from where this stream ends).
    """
    engine = engine or (best_engine() if fast else "reference")
    if engine not in ENGINES or (engine == "native" and _linescan is None):
        raise ValueError(f"no {engine} scanner here (have: {', '.join(e for e in ENGINES if e != 'native' or _linescan)})")
    collecting = gc.isenabled()
    gc.disable()  # findall makes a tuple per row: the collector would walk them all, for nothing
    try:
        sc = _Scanner(sink, reader)
        sc.result.engine = engine
        process = {"native": sc.native_range, "regex": sc.fast_range, "reference": sc.slow_range}[engine]
        return _scan(stream, sc, process, block_size, probe_bytes, flush)
    finally:
        if collecting:
            gc.enable()


def _scan(
    stream: ByteSource,
    sc: _Scanner,
    process: Callable[[bytes, int, int], None],
    block_size: int,
    probe_bytes: int,
    flush: bool,
) -> ScanResult:
    res = sc.result
    rest = b""  # the start of a line that ends in a later chunk
    skipping = False  # inside a line longer than MAX_LONG_LINE
    while True:
        chunk = stream.read(block_size)
        if not chunk:
            break
        res.bytes_read += len(chunk)
        first = chunk.find(b"\n")
        if first < 0:
            if not skipping:
                rest += chunk
                if len(rest) > MAX_LONG_LINE:
                    rest, skipping = b"", True
            continue
        if skipping:
            skipping = False
        elif len(rest) + first <= MAX_LONG_LINE:
            line = b"\n" + rest + chunk[: first + 1]
            process(line, 0, len(line))
        last = chunk.rfind(b"\n")
        if last > first:
            process(chunk, first, last + 1)  # whole lines, processed in place
        rest = chunk[last + 1 :]
        if not res.recognized and res.bytes_read >= probe_bytes:
            res.gave_up = True
            return res
    if rest and not skipping:
        line = b"\n" + rest + b"\n"
        process(line, 0, len(line))
    if flush:
        sc.finish()
    return res
