"""Reading a whole log file fast (replay), with the same meaning as `parse_line`.

A Python regex per line reads about 2 M lines/s; `grep` reads 15 M (research/perf_anchors.md).
So the fast path works on 256 KiB blocks with a few C-level passes:

1. one `findall` finds the lines that are *not* plain SGLang stat or access lines
   (`[date time RANKS] Decode b…`, `… Prefill b…`, `… INFO: …`);
2. those odd lines are checked at once for the byte strings (`KEY_NEEDLES`) that every line
   `parse_line` turns into a decode, readiness, start, failure or warning event holds (request
   log lines, whose text parse_line ignores, only for the stat-value strings); the rare lines
   that hold one are fed, in order, through `LogReader` (with the traceback that follows a
   failure), and the stretches between them are read in bulk;
3. in a stretch, `findall` pulls out every `gen throughput` value (one per decode line: their
   number is the decode line count) and every `accept len` value, handed to the sink as printed
   texts; the first (accept len, accept rate) pairs of a run are taken too.

`fast=False` feeds every line through `LogReader`: the reference the fast path is tested against
(tests/test_replay.py). The two agree on anything SGLang writes; they can differ only on lines
built to look like a stat line and not be one (e.g. `[a 19-char bracket] Decode batchy ...`).
Logs whose every line is wrapped by another logger (Ray, Kubernetes, Python logging) have no
plain lines: they are read correctly, but line by line (about 10x slower).
Memory is bounded by the block size; a line longer than `MAX_LONG_LINE` is dropped unread.

Measured (benchmarks/parse_bench.py, 1,008,128 lines, 140 MB, on a busy 2-core machine): 1/8.0 to
1/8.8 of `LC_ALL=C grep -c 'accept len'`'s speed (about 0.53 s CPU against grep's 0.067 s, of
which ~0.1 s is interpreter start-up and imports), 43 MB peak RSS whatever the file size. Where
the rest goes: the odd-line pass ~0.11 s, the tok/s pass ~0.10 s, the accept-len pass ~0.09 s,
counting the values ~0.05 s.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import islice
from typing import BinaryIO, Protocol

from eagle3_tui.sglang.logline import KEY_NEEDLES, LogEvent, LogReader, Other, epoch_of, parse_line

__all__ = ["ScanResult", "ScanSink", "scan"]

BLOCK_SIZE = 1 << 18
MAX_LONG_LINE = 1 << 20
PROBE_BYTES = 4 << 20  # give up on a file with no log line in its first 4 MiB

# A "plain" line: an SGLang prefix (a bracket of 20-50 characters: date, time, optional
# milliseconds and rank tags) then a stat header or a uvicorn INFO line. This check runs once per
# line, so it is written for the regex engine's speed: one `[^\]]` repeat is its cheapest loop.
_PLAIN = rb"\[[^\]]{19,50}\] (?:Decode b|Prefill b|INFO: )"
_PLAIN_AT = re.compile(_PLAIN)
_PLAIN_ANY = re.compile(rb"\n" + _PLAIN)
# An odd line, as (request-log line, other line): `--log-requests` lines carry user text that
# parse_line ignores, so only the stat-value strings are looked for in them (cheaper on long prompts).
_ODD = re.compile(
    rb"\n(?!" + _PLAIN + rb")(?:(\[[^\]]{19,50}\] (?:Receive|Finish): [^\n]*)|([^\n]*))"
)
_REQUEST_AT = re.compile(rb"\[[^\]]{19,50}\] (?:Receive|Finish): ")
# Strings whose presence in a request line would leak into the bulk value counts.
_VALUE_NEEDLES = (b"Decode batch", b"accept len", b"gen throughput")
_DECODE_TS = re.compile(
    rb"\[(\d{4}-\d\d-\d\d) (\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6}))?(?: [A-Z][A-Z_]*\d+)*\] Decode batch"
)
_ACCEPT_LEN = re.compile(rb"accept len: ([^,\n]{0,64})")
# tok/s is taken to one decimal when it is a plain number (replay bins it at 0.1 anyway, and
# fewer distinct texts make counting cheaper); any other value is taken whole.
_GEN_TPS = re.compile(rb"gen throughput \(token/s\): (\d{1,12}\.\d(?=\d*(?:,|\s|$))|[^,\n]{0,64})")
_PAIR = re.compile(rb"accept len: ([^,\n]{0,64}), accept rate: ([^,\n]{0,64})")


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


def _ts(m: re.Match[bytes] | None) -> float | None:
    if m is None:
        return None
    frac = m.group(5)
    return epoch_of(
        m.group(1).decode(), m.group(2).decode(), m.group(3).decode(), m.group(4).decode(),
        frac.decode() if frac else None,
    )


def _relevant(text: bytes) -> bool:
    return any(n in text for n in KEY_NEEDLES)


def _leaky(text: bytes) -> bool:
    return any(n in text for n in _VALUE_NEEDLES)


class _Scanner:
    def __init__(self, sink: ScanSink, fast: bool, reader: LogReader | None = None) -> None:
        self.sink = sink
        self.fast = fast
        self.reader = reader if reader is not None else LogReader()
        self.result = ScanResult()

    # -- one line at a time --------------------------------------------------------------------

    def _feed(self, raw: bytes) -> None:
        events = self.reader.feed(raw.decode("utf-8", "replace"))
        for ev in events:
            if not self.result.recognized and not isinstance(ev, Other):
                self.result.recognized = True
            self.sink.event(ev)

    @staticmethod
    def _line_end(block: bytes, s: int, end: int) -> int:
        e = block.find(b"\n", s, end)
        return end if e < 0 else e

    def slow_range(self, block: bytes, start: int, end: int) -> None:
        """Every line of block[start:end] through LogReader (the reference path)."""
        for raw in block[start:end].split(b"\n"):
            self._feed(raw)

    def _slow_while_pending(self, block: bytes, pos: int, end: int) -> int:
        while pos <= end and self.reader.pending is not None:
            e = self._line_end(block, pos, end)
            self._feed(block[pos:e])
            pos = e + 1
        return pos

    # -- blocks --------------------------------------------------------------------------------

    def fast_range(self, block: bytes, start: int, end: int) -> None:
        """The lines of block[start:end] (separated by newlines, none at the end), in bulk."""
        if not self.result.recognized and (
            _PLAIN_AT.match(block, start, end) or _PLAIN_ANY.search(block, start, end)
        ):
            self.result.recognized = True
        pos = start
        for s in self._relevant_starts(block, start, end):
            if s < pos:
                continue
            if self.reader.pending is not None:
                pos = self._slow_while_pending(block, pos, end)
                if s < pos:
                    continue
            if s > pos:
                self._bulk(block, pos, s)
            e = self._line_end(block, s, end)
            self._feed(block[s:e])
            pos = self._slow_while_pending(block, e + 1, end)
        if self.reader.pending is not None:
            pos = self._slow_while_pending(block, pos, end)
        if pos < end:
            self._bulk(block, pos, end)

    def _relevant_starts(self, block: bytes, start: int, end: int) -> list[int]:
        """Starts of the odd lines that must go through LogReader: those that may hold an event
        other than prefill/access/other, and request lines whose text holds stat-value strings."""
        odd = _ODD.findall(block, start, end)
        first_end = self._line_end(block, start, end)
        first_odd = _PLAIN_AT.match(block, start, first_end) is None
        if first_odd:
            line = block[start:first_end]
            odd.append((line, b"") if _REQUEST_AT.match(line) else (b"", line))
        if not odd:
            return []
        requests, others = zip(*odd, strict=True)
        if not self.result.recognized:
            for text in (*requests, *others):
                if text and not isinstance(parse_line(text.decode("utf-8", "replace")), Other):
                    self.result.recognized = True
                    break
        if not _relevant(b"\n".join(others)) and not _leaky(b"\n".join(requests)):
            return []
        starts = []
        if first_odd:
            req, other = odd[-1]
            if _relevant(other) or _leaky(req):
                starts.append(start)
        for m in _ODD.finditer(block, start, end):
            req = m.group(1)
            if req is not None:
                if _leaky(req):
                    starts.append(m.start(1))
            elif _relevant(m.group(2)):
                starts.append(m.start(2))
        return starts

    def _bulk(self, block: bytes, a: int, b: int) -> None:
        tps = _GEN_TPS.findall(block, a, b)
        if not tps:
            return
        wanted = self.sink.pairs_wanted
        pairs = [m.groups() for m in islice(_PAIR.finditer(block, a, b), wanted)] if wanted > 0 else []
        t_first = _ts(_DECODE_TS.search(block, a, b))
        t_last = None
        i = b
        while t_last is None:
            i = block.rfind(b"Decode batch", a, i)
            if i < 0:
                break
            t_last = _ts(_DECODE_TS.match(block, max(block.rfind(b"\n", a, i) + 1, a), b))
        lens = _ACCEPT_LEN.findall(block, a, b) if block.find(b"accept len", a, b) >= 0 else []
        self.sink.decode_bulk(len(tps), lens, tps, pairs, t_first, t_last)

    def finish(self) -> None:
        for ev in self.reader.flush():
            self.result.recognized = True  # only failures are held back
            self.sink.event(ev)


def scan(
    stream: BinaryIO,
    sink: ScanSink,
    *,
    fast: bool = True,
    block_size: int = BLOCK_SIZE,
    probe_bytes: int = PROBE_BYTES,
    reader: LogReader | None = None,
    flush: bool = True,
) -> ScanResult:
    """Read `stream` to its end (or give up on a non-log) and pass what it holds to `sink`.

    `reader` continues a LogReader's state; `flush=False` leaves a failure still reading its
    traceback pending in it (for a caller that reads on from where this stream ends).
    """
    sc = _Scanner(sink, fast, reader)
    process = sc.fast_range if fast else sc.slow_range
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
            line = rest + chunk[:first] if rest else chunk[:first]
            process(line, 0, len(line))
        last = chunk.rfind(b"\n")
        if last > first:
            process(chunk, first + 1, last)  # whole lines, processed in place
        rest = chunk[last + 1 :]
        if not res.recognized and res.bytes_read >= probe_bytes:
            res.gave_up = True
            return res
    if rest and not skipping:
        process(rest, 0, len(rest))
    if flush:
        sc.finish()
    return res
