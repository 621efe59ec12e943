"""Replaying a big log file on several cores, with the same result as one `scan`.

The file is cut at line starts into one byte range per worker. Each range is scanned in a forked
worker by `scan` into a recorder that keeps, in order, the events and the bulk decode
values it was given; the parent replays the records into the real sink in file order.

What crosses a cut: a failure still reading its traceback when a range ends. A worker therefore
keeps aside the lines at the start of its range that do not begin a log record (they may be the
end of the previous range's traceback), scans the rest with a fresh `LogReader` left unflushed,
and hands its reader back; the parent feeds the kept lines to the previous range's reader, flushes
it where the next record begins (as one reader would), and carries on with the worker's reader.

Used only for plain regular files of at least `min_parallel_bytes()`, where forking is available,
this process runs a single thread (the CLI) and the file's head reads as a log; anything else goes
through `scan` in this process.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from eagle3_tui.sglang.logline import (
    MAX_LINE,
    LogEvent,
    LogReader,
    Other,
    ServerArgs,
    ServerReady,
    is_record_start,
    parse_line,
)
from eagle3_tui.sglang.scan.blocks import MAX_LONG_LINE, best_engine, scan
from eagle3_tui.sglang.scan.feeder import ScanResult, ScanSink

if TYPE_CHECKING:
    from collections.abc import Iterable

__all__ = ["MIN_PARALLEL_BYTES", "default_jobs", "min_parallel_bytes", "scan_path"]

# Below these sizes one process is faster than forking workers and merging their records
# (benchmarks/parse_bench.py; the numbers in benchmarks/MEASURED.md).
MIN_PARALLEL_BYTES = {"native": 1 << 30, "regex": 32 << 20}
PAIRS_PER_GROUP = 256  # the most a run can take (telemetry.runs.MAX_PAIRS)
MAX_LEADING_LINES = 20_000  # more continuation lines than this at a cut: give up on workers
MAX_JOBS = 8


def min_parallel_bytes() -> int:
    """The smallest file worth workers, for the scanner this installation has."""
    return MIN_PARALLEL_BYTES[best_engine()]


def default_jobs() -> int:
    """The idle CPUs this process may use (at most MAX_JOBS): workers on busy CPUs only add cost."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):
        load = 0.0
    return max(1, min(int(n - load + 0.5), MAX_JOBS))


@dataclass
class _Bulk:
    lines: int = 0
    lens: Counter[bytes] = field(default_factory=Counter)
    tps: Counter[bytes] = field(default_factory=Counter)
    pairs: list[tuple[bytes, bytes]] = field(default_factory=list)
    t_first: float | None = None  # first timestamp seen
    t_last: float | None = None  # last timestamp seen


def _is_pair(p: tuple[bytes, bytes]) -> bool:
    try:
        float(p[0]), float(p[1])
    except ValueError:
        return False
    return True


class _Recorder:
    """A ScanSink that keeps what it is given; consecutive bulk calls merge into one record."""

    def __init__(self) -> None:
        self.ops: list[LogEvent | _Bulk] = []
        self._pairs_in_run = 0  # pairs kept since the last event that may start a run

    @property
    def pairs_wanted(self) -> int:
        # The sink takes at most PAIRS_PER_GROUP per run, and a run starts only at a start or a
        # readiness line: keeping that many since the last of those is always enough.
        return PAIRS_PER_GROUP - self._pairs_in_run

    def event(self, ev: LogEvent) -> None:
        if isinstance(ev, ServerArgs | ServerReady):
            self._pairs_in_run = 0
        self.ops.append(ev)

    def decode_bulk(
        self,
        lines: int,
        accept_lens: Iterable[bytes],
        gen_tps: Iterable[bytes],
        pairs: Iterable[tuple[bytes, bytes]],
        t_first: float | None,
        t_last: float | None,
    ) -> None:
        last = self.ops[-1] if self.ops else None
        if not isinstance(last, _Bulk):
            last = _Bulk()
            self.ops.append(last)
        last.lines += lines
        last.lens.update(accept_lens)
        last.tps.update(gen_tps)
        for p in pairs:
            if self._pairs_in_run >= PAIRS_PER_GROUP:
                break
            if _is_pair(p):  # as the sink takes them: both texts numbers, the rest skipped
                last.pairs.append(p)
                self._pairs_in_run += 1
        for t in (t_first, t_last):  # the sink only uses the first and the last time it is shown
            if t is not None:
                if last.t_first is None:
                    last.t_first = t
                last.t_last = t


@dataclass
class _RangeResult:
    leading: list[bytes]  # lines before the first record start (maybe the previous traceback's end)
    found_record: bool  # a record start was found in the range (else it is all `leading`)
    ops: list[LogEvent | _Bulk]
    reader: LogReader
    recognized: bool
    bytes_read: int


class _Window:
    """The first `n` bytes of a file from where it stands."""

    def __init__(self, f: Any, n: int) -> None:
        self._f = f
        self._left = n

    def read(self, size: int = -1) -> bytes:
        if self._left <= 0:
            return b""
        data = self._f.read(self._left if size < 0 else min(size, self._left))
        self._left -= len(data)
        return data


def _next_line_start(f: Any, pos: int, size: int) -> int:
    """The offset of the first line that starts at or after `pos`."""
    if pos <= 0:
        return 0
    f.seek(pos - 1)
    at = pos - 1
    while at < size:
        chunk = f.read(1 << 16)
        if not chunk:
            break
        i = chunk.find(b"\n")
        if i >= 0:
            return at + i + 1
        at += len(chunk)
    return size


def _scan_range(path: str, start: int, end: int, first: bool) -> _RangeResult | None:
    with open(path, "rb") as f:
        f.seek(start)
        pos = start
        leading: list[bytes] = []
        found = first
        while not found and pos < end:
            line = f.readline(min(MAX_LONG_LINE + 2, end - pos))
            if not line:
                break
            n = len(line)
            if not line.endswith(b"\n") and pos + n < end:  # a line too long to keep: skip it whole
                while not line.endswith(b"\n") and pos + n < end:
                    line = f.readline(min(1 << 20, end - pos - n))
                    if not line:
                        break
                    n += len(line)
                pos += n
                continue
            text = line.rstrip(b"\r\n")
            # as LogReader decides: a record start ends a pending failure, an overlong line never does
            if len(text) <= MAX_LINE and is_record_start(text.decode("utf-8", "replace")):
                f.seek(pos)
                found = True
                break
            leading.append(text)
            pos += n
            if len(leading) > MAX_LEADING_LINES:
                return None
        rec = _Recorder()
        reader = LogReader()
        res = ScanResult()
        if found:
            res = scan(_Window(f, end - pos), rec, reader=reader, flush=False, probe_bytes=1 << 62)
        return _RangeResult(leading, found, rec.ops, reader, res.recognized, res.bytes_read + pos - start)


def _quiet_worker() -> None:
    """A forked worker keeps its parent's signal handlers (the CLI turns SIGTERM into an interrupt);
    the pool stops its workers with SIGTERM when done, which must end them without a traceback."""
    import signal

    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _head_is_log(path: str) -> bool:
    with open(path, "rb") as f:
        head = f.read(1 << 16)
    return any(not isinstance(parse_line(t.decode("utf-8", "replace")), Other) for t in head.split(b"\n")[:-1])


def scan_path(path: str, sink: ScanSink, *, jobs: int | None = None, min_bytes: int | None = None) -> ScanResult:
    """Like `scan(open(path, "rb"), sink)`, on up to `jobs` worker processes when it pays."""
    size = os.path.getsize(path)
    min_bytes = min_parallel_bytes() if min_bytes is None else min_bytes
    n = default_jobs() if jobs is None else max(1, jobs)
    ctx = None
    if n > 1 and size >= min_bytes and _head_is_log(path):
        import multiprocessing
        import threading

        # fork copies only this thread: with others running (a UI, a test runner) a lock one of
        # them holds could stay held in the child, so workers are forked from lone threads only
        if "fork" in multiprocessing.get_all_start_methods() and threading.active_count() == 1:
            ctx = multiprocessing.get_context("fork")
    results: list[_RangeResult | None] = []
    if ctx is not None:
        with open(path, "rb") as f:
            starts = sorted({_next_line_start(f, size * i // n, size) for i in range(n)} - {size})
        ranges = list(zip(starts, [*starts[1:], size], strict=True))
        with ctx.Pool(len(ranges), initializer=_quiet_worker) as pool:
            results = pool.starmap(_scan_range, [(path, s, e, i == 0) for i, (s, e) in enumerate(ranges)])
    if not results or any(r is None for r in results):
        with open(path, "rb") as f:
            return scan(f, sink)

    out = ScanResult(workers=len(results), engine=best_engine())

    def emit(events: list[LogEvent]) -> None:
        for ev in events:
            if not isinstance(ev, Other):
                out.recognized = True
            sink.event(ev)

    reader = LogReader()
    for r in results:
        assert r is not None
        out.bytes_read += r.bytes_read
        out.recognized = out.recognized or r.recognized
        for raw in r.leading:
            emit(reader.feed(raw.decode("utf-8", "replace")))
        if not r.found_record:
            continue  # the whole range continued what came before it
        emit(reader.flush())  # the record that starts the rest of the range ends a pending failure
        for op in r.ops:
            if isinstance(op, _Bulk):
                sink.decode_bulk(op.lines, op.lens, op.tps, op.pairs, op.t_first, op.t_last)
            else:
                sink.event(op)
        reader = r.reader
    emit(reader.flush())
    return out
