"""Reading a whole log file fast (replay), with the same meaning as `LogReader`.

A Python loop over lines is far slower than `grep` (benchmarks/MEASURED.md). Replay reads a file
in blocks of whole lines and finds, per block, the few lines that matter; three readings exist
(ENGINES), all giving the same events. The package:

- `blocks`: `scan`, the loop over blocks and the choice of engine;
- `feeder`: what a scan reads and writes (ByteSource, ScanSink, ScanResult) and `LineFeeder`, the
  lines that go through LogReader (the reference reading, and every line the others hand over);
- `native` (over `sglang/_linescan.c`) and `regex`: the two fast readings;
- `parallel`: the same over worker processes, for very big files.

The readings:

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
parse_bench.py --each-class shows the cost per class of line). Memory is bounded by the block
size; a line longer than MAX_LONG_LINE is dropped unread.

benchmarks/parse_bench.py prints the speed against `LC_ALL=C grep -c 'accept len'` and the memory;
benchmarks/MEASURED.md keeps what it measured. Workers (`parallel`) start at 1 GiB with the native
reading: below that forking costs more than it saves.
"""

from __future__ import annotations

from eagle3_tui.sglang.scan.blocks import BLOCK_SIZE, ENGINES, MAX_LONG_LINE, PROBE_BYTES, best_engine, scan
from eagle3_tui.sglang.scan.feeder import ByteSource, ScanResult, ScanSink

__all__ = [
    "BLOCK_SIZE",
    "ENGINES",
    "MAX_LONG_LINE",
    "PROBE_BYTES",
    "ByteSource",
    "ScanResult",
    "ScanSink",
    "best_engine",
    "scan",
]
