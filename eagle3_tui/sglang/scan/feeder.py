"""What a scan reads and writes, and the lines it reads through LogReader.

`LineFeeder` holds the LogReader and the sink of one scan. The reference reading puts every line
through it; the fast readings hand it the lines they cannot read themselves (a failure, a warning,
a start line, a stat line in an odd shape) and the traceback lines after a failure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from eagle3_tui.sglang import logline
from eagle3_tui.sglang.logline import LogEvent, LogReader, Other, epoch_of, parse_line

__all__ = ["SGLANG_PREFIX", "ByteSource", "LineFeeder", "ScanResult", "ScanSink", "row_time"]

# logline's own reading of SGLang's prefix (groups: date, hh, mm, ss, fraction, ranks), for bytes.
SGLANG_PREFIX = re.compile(logline._SGLANG_PREFIX.pattern.encode())


def row_time(buf: bytes, nl: int, end: int) -> float | None:
    """The timestamp parse_line gives the decode row between the newlines at `nl` and `end`."""
    p = SGLANG_PREFIX.match(buf, nl + 1, end)
    t = None
    if p is not None and buf.startswith(b"Decode batch", p.end()):
        frac = p.group(5)
        t = epoch_of(
            p.group(1).decode(), p.group(2).decode(), p.group(3).decode(), p.group(4).decode(),
            frac.decode() if frac else None,
        )
    if t is None:  # not SGLang's own clock: as parse_line reads it (or from `timestamp:`)
        t = getattr(parse_line(buf[nl + 1 : end].decode("utf-8", "replace")), "timestamp", None)
    return None if t is None else float(t)


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
    workers: int = 1  # processes that read the file (scan.parallel)
    engine: str = "native"  # which of ENGINES read it


class LineFeeder:
    """The LogReader and the sink of one scan: lines in, events out."""

    def __init__(self, sink: ScanSink, reader: LogReader | None = None) -> None:
        self.sink = sink
        self.reader = reader if reader is not None else LogReader()
        self.result = ScanResult()

    def feed(self, raw: bytes) -> None:
        for ev in self.reader.feed(raw.decode("utf-8", "replace")):
            if not self.result.recognized and not isinstance(ev, Other):
                self.result.recognized = True
            self.sink.event(ev)

    def feed_lines(self, buf: bytes, a: int, b: int) -> None:
        """The lines between the newlines at `a` and `b`, through LogReader."""
        for raw in buf[a + 1 : b].split(b"\n"):
            self.feed(raw)

    def reference_range(self, buf: bytes, p0: int, p1: int) -> None:
        """Every line of the range through LogReader (the reference reading)."""
        self.feed_lines(buf, p0, p1 - 1)

    def drain_lines(self, buf: bytes, pos: int, p1: int) -> int:
        """While a failure reads its traceback, feed it the lines that follow; the new position."""
        while self.reader.pending is not None and pos < p1 - 1:
            end = buf.index(b"\n", pos + 1)
            self.feed(buf[pos + 1 : end])
            pos = end
        return pos

    def probe(self, buf: bytes, pos: int, p1: int) -> None:
        """Before the first recognised line: is there one here? (Per line, so only until then.)"""
        for raw in buf[pos + 1 : p1 - 1].split(b"\n"):
            if not isinstance(parse_line(raw.decode("utf-8", "replace")), Other):
                self.result.recognized = True
                return

    def finish(self) -> None:
        for ev in self.reader.flush():
            self.result.recognized = True  # only failures are held back
            self.sink.event(ev)
