"""`scan`: a log read to its end in blocks of whole lines, by one of the readings (ENGINES)."""

from __future__ import annotations

import gc
from collections.abc import Callable

from eagle3_tui.sglang.logline import LogReader
from eagle3_tui.sglang.scan import native
from eagle3_tui.sglang.scan.feeder import ByteSource, LineFeeder, ScanResult, ScanSink

__all__ = ["BLOCK_SIZE", "ENGINES", "MAX_LONG_LINE", "PROBE_BYTES", "best_engine", "scan"]

ENGINES = ("native", "regex", "reference")
"""The three readings of a block, fastest first; all give the same events (tests/test_replay.py)."""

BLOCK_SIZE = 1 << 20
MAX_LONG_LINE = 1 << 20
PROBE_BYTES = 4 << 20  # give up on a file with no log line in its first 4 MiB


def best_engine() -> str:
    """The fastest reading this installation has: the compiled one where it was built."""
    return "native" if native.AVAILABLE else "regex"


def _reading(engine: str, feeder: LineFeeder) -> Callable[[bytes, int, int], None]:
    if engine == "native" and native.AVAILABLE:
        return native.NativeRange(feeder)
    if engine == "regex":
        from eagle3_tui.sglang.scan.regex import RegexRange  # its patterns compile on first use

        return RegexRange(feeder)
    if engine == "reference":
        return feeder.reference_range
    have = ", ".join(e for e in ENGINES if e != "native" or native.AVAILABLE)
    raise ValueError(f"no {engine} scanner here (have: {have})")


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
    feeder = LineFeeder(sink, reader)
    process = _reading(engine, feeder)
    feeder.result.engine = engine
    collecting = gc.isenabled()
    gc.disable()  # a block makes a tuple or a text per row: the collector would walk them all, for nothing
    try:
        return _scan(stream, feeder, process, block_size, probe_bytes, flush)
    finally:
        if collecting:
            gc.enable()


def _scan(
    stream: ByteSource,
    sc: LineFeeder,
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
        if not res.recognized and res.bytes_read >= probe_bytes:  # not an SGLang log: stop here
            return res
    if rest and not skipping:
        line = b"\n" + rest + b"\n"
        process(line, 0, len(line))
    if flush:
        sc.finish()
    return res
