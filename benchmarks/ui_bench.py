"""UI budgets, measured as ratios against references taken in the same run (DESIGN.md, issues 7 and 14).

1. First frame: the console as `eagle3-tui --local` builds it vs a bare Textual app (Header, Static,
   Footer), each in a fresh interpreter from spawn to the first painted frame; and torch must not be
   imported. Both with their bytecode cached, as installed (see `first_frame`; until issue 14 the
   console's modules were compiled from source at each start on machines that set
   PYTHONDONTWRITEBYTECODE, while Textual's bytecode came with its wheel; that ratio is printed too
   where the variable is set, not as the budget). The console's child does what `cli.main` and
   `launch.run_console` do (the collector off through the imports, then `freeze_startup_heap`); the
   bare app is plain. Budget: ratio <= 1.5.
2. Key latency while 20,000 log lines/s stream in: a real Session attached through LocalHost follows
   a log file that a writer process appends to at 20k lines/s (a busy server's line mix; a process,
   as a real server is: until issue 14 the writer was a thread of the measured process and competed
   with the console for its GIL, which no server's log does); `space`
   (pause) and `w` (wrap) presses go in through the driver and are timed until their action has
   run (the pane's state flipped; the repaint follows). Quiet: nothing else runs; loaded: a busy-loop process runs on the last CPU meanwhile
   (on a shared machine other load comes on top: the load average is printed). Reference: the same
   presses with no stream. Budget: p95 < 100 ms, loaded too.
3. Memory flat while a million lines pass through the same pipeline: RSS after the first 100k lines
   vs after 1M lines, each read after glibc's `malloc_trim` (see `rss_mib`; untrimmed, the reading
   swung +-30-45 MiB between identical runs). Budget: growth < 10 MiB.

Run: .venv/bin/python benchmarks/ui_bench.py [--quick] [--json]   (UI_BENCH_VERBOSE=1 prints every key)
`--json` prints one object: first_frame_ratio, key_p95_ms_quiet, key_p95_ms_loaded, rss_growth_mib.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

def _batch(n: int = 1000) -> str:
    """`n` lines of a busy server's log (access lines, request dumps, stats of several ranks)."""
    import random

    from eagle3_tui.sglang.logmix import make_line

    rng = random.Random(7)
    kinds = ["access"] * 3 + ["access_bare"] * 2 + ["receive", "finish", "prefill", "retract"] + ["decode"] * 3
    return "".join(make_line(rng.choice(kinds), rng, 1775419200.0 + i) + "\n" for i in range(n))


FIRST_FRAME_CHILD = r"""
import gc, sys, time
t0 = float(sys.argv[1])
kind = sys.argv[2]
if kind != "bare":
    gc.disable()  # as cli.main does for the console's imports
import textual.screen as ts

_orig = ts.Screen._compositor_refresh
_done = []

def _first_frame(self):
    # The first composited frame of the running app with its widgets laid out.
    _orig(self)
    if not _done and self.app._running and len(self._compositor.visible_widgets) > 2:
        _done.append(time.time() - t0)
        print(f"{_done[0]:.4f} {'torch' in sys.modules}", flush=True)
        self.app.call_later(self.app.exit)

ts.Screen._compositor_refresh = _first_frame
if kind == "bare":
    from textual.app import App
    from textual.widgets import Footer, Header, Static

    class Bare(App):
        def compose(self):
            yield Header()
            yield Static("hello")
            yield Footer()
    app = Bare()
else:  # exactly what `eagle3-tui --local` runs (cli.main, launch.run_console)
    import argparse
    from eagle3_tui.ui.launch import build_app, freeze_startup_heap
    args = argparse.Namespace(host=None, local=True, profile=None, readonly=False, demo=False, accept_new_host_key=False)
    app, _cleanup = build_app(args)
    freeze_startup_heap()
app.run(headless=True, size=(120, 40))
"""


def first_frame(runs: int, cached: bool = True) -> tuple[float, float, bool]:
    """Median spawn-to-first-frame seconds for (bare, console), and whether torch got imported.

    `cached`: both start with their bytecode cached, as an installed package does (pip compiles it; an
    editable install writes it on the first run): the children get a fresh PYTHONPYCACHEPREFIX and one
    untimed warm-up run each. Not cached, and with PYTHONDONTWRITEBYTECODE set (as on some CI machines),
    the console compiles its own modules from source at every start while Textual's came compiled.
    """
    times: dict[str, list[float]] = {"bare": [], "console": []}
    torch_seen = False
    env = dict(os.environ)
    env["EAGLE3_TUI_DATA_DIR"] = tempfile.mkdtemp()
    env["EAGLE3_TUI_CONFIG_DIR"] = tempfile.mkdtemp()
    if cached:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = tempfile.mkdtemp()
    for i in range(runs + cached):
        for kind in ("bare", "console"):  # interleaved so machine noise hits both alike
            out = subprocess.run(
                [sys.executable, "-c", FIRST_FRAME_CHILD, repr(time.time()), kind],
                capture_output=True,
                text=True,
                cwd=ROOT,
                env=env,
                check=True,
            ).stdout.split()
            torch_seen |= out[1] == "True"
            if cached and i == 0:
                continue  # the warm-up run wrote the bytecode
            times[kind].append(float(out[0]))
    return statistics.median(times["bare"]), statistics.median(times["console"]), torch_seen


def rss_mib() -> float:
    """This process's RSS after `malloc_trim(0)` where glibc is there: freed heap that glibc keeps
    (in whichever thread's arena it sits) swung the 1M-line reading by +-30-45 MiB between identical
    runs, with Python's allocated blocks and objects flat; trimmed, two runs agree within 0.1 MiB."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


WRITER_CHILD = r"""
import os, sys, time
sys.path.insert(0, sys.argv[5])
from ui_bench import _batch
path, total, rate, batch = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
parent = os.getppid()
text = _batch(batch)
written = 0
start = time.perf_counter()
with open(path, "a", encoding="utf-8") as f:
    while written < total and os.getppid() == parent:  # the bench gone (killed): stop too
        f.write(text)
        f.flush()
        written += batch
        if rate:
            delay = start + written / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
"""


class Writer:
    """Appends SGLang-style lines to the log at `rate` lines/s (None: as fast as possible), from its own
    process, as a real server does: a writer thread in the console's process would compete with it for
    the GIL, which no server's log does."""

    def __init__(self, path: Path, total: int, rate: float | None, batch: int = 1000) -> None:
        self.path, self.total, self.rate, self.batch = path, total, rate, batch
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        argv = [sys.executable, "-c", WRITER_CHILD, str(self.path), str(self.total), str(self.rate or 0),
                str(self.batch), str(Path(__file__).resolve().parent)]
        self.proc = subprocess.Popen(argv, cwd=ROOT)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()


class BusyLoop:
    """A process spinning on the last CPU while it is held (the 'other core busy' of issue 14)."""

    def __enter__(self) -> BusyLoop:
        self.proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
        cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
        if len(cpus) > 1:
            os.sched_setaffinity(self.proc.pid, {cpus[-1]})
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.kill()
        self.proc.wait()


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs"
    except OSError:
        return "unknown"


async def stream_run(lines_per_s: float | None, total: int, presses: int, mem: bool) -> dict[str, float]:
    tmp = Path(tempfile.mkdtemp())
    try:
        return await _stream_in(tmp, lines_per_s, total, presses, mem)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # the log: up to 130 MB a run


async def _stream_in(tmp: Path, lines_per_s: float | None, total: int, presses: int, mem: bool) -> dict[str, float]:
    from textual import events

    from eagle3_tui.profile import Profile
    from eagle3_tui.session import Session
    from eagle3_tui.ui.factory import make_app
    from eagle3_tui.ui.options import Lifecycle
    from eagle3_tui.ui.widgets.log_pane import LogPane

    log = tmp / "server.log"
    log.write_text("")
    session = Session(Profile(name="bench", local=True, log_path=str(log), state_dir=str(tmp / "state")))

    async def start(s):
        await s.attach()

    app = make_app(session, lifecycle=Lifecycle(start=start, on_exit=lambda s: s.close()))
    result: dict[str, float] = {}
    async with app.run_test(size=(120, 40)) as pilot:
        while not (app.main.panes_ready and app.main.session_wired):
            await asyncio.sleep(0.05)
        await pilot.pause(0.5)
        pane = app.query_one(LogPane)
        writer = Writer(log, total, lines_per_s)
        latencies: list[float] = []
        rss_marks: list[tuple[int, float]] = []
        try:
            if total:
                writer.start()
                while pane.total_lines < min(total, 20_000):  # wait until lines flow
                    await asyncio.sleep(0.05)
            t_start = time.perf_counter()
            seen_start = pane.total_lines
            i = 0
            while True:
                if mem:
                    if not rss_marks or pane.total_lines - rss_marks[-1][0] >= 100_000:
                        rss_marks.append((pane.total_lines, rss_mib()))
                    if pane.total_lines >= total:
                        break
                    await asyncio.sleep(0.05)
                    continue
                if i >= presses:
                    break
                key, check = (("space", lambda: pane.paused), ("w", lambda: pane.wrap))[i % 2]
                want = not check()
                # The key goes in through the driver, as a terminal's would; timed until its effect shows.
                event = events.Key(key, " " if key == "space" else key)
                t0 = time.perf_counter()
                app._driver.send_message(event)
                while check() != want:
                    await asyncio.sleep(0.0005)
                latencies.append(time.perf_counter() - t0)
                if os.environ.get("UI_BENCH_VERBOSE"):
                    print(f"{key} {1000 * latencies[-1]:.1f} ms", file=sys.stderr)
                i += 1
                await asyncio.sleep(0.05)
            elapsed = time.perf_counter() - t_start
        finally:
            writer.stop()
        result["rate"] = (pane.total_lines - seen_start) / elapsed if elapsed > 0 else 0.0
        if latencies:
            latencies.sort()
            result["p50_ms"] = 1000 * latencies[len(latencies) // 2]
            result["p95_ms"] = 1000 * latencies[min(len(latencies) - 1, int(len(latencies) * 0.95))]
            result["max_ms"] = 1000 * latencies[-1]
        if rss_marks:
            result["rss_first"] = rss_marks[1][1] if len(rss_marks) > 1 else rss_marks[0][1]
            result["rss_last"] = rss_mib()
            result["lines"] = pane.total_lines
            result["log_rows"] = len(pane.log_widget.lines)
        await session.close()
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer runs and 200k instead of 1M lines")
    ap.add_argument("--json", action="store_true", help="the text to stderr, one JSON object to stdout")
    args = ap.parse_args()
    os.environ.setdefault("EAGLE3_TUI_DATA_DIR", tempfile.mkdtemp())
    out = sys.stderr if args.json else sys.stdout

    def say(text: str) -> None:
        print(text, file=out, flush=True)

    runs = 3 if args.quick else 7
    bare, console, torch_seen = first_frame(runs)
    ratio = console / bare
    say(
        f"first frame (bytecode cached, as installed): bare Textual {bare * 1000:.0f} ms, eagle3-tui "
        f"{console * 1000:.0f} ms, ratio {ratio:.2f} (budget 1.5); torch imported: {torch_seen}"
    )
    if os.environ.get("PYTHONDONTWRITEBYTECODE"):
        u_bare, u_console, _ = first_frame(runs, cached=False)
        say(
            f"first frame compiled from source (PYTHONDONTWRITEBYTECODE is set here; Textual's bytecode came "
            f"compiled): bare {u_bare * 1000:.0f} ms, eagle3-tui {u_console * 1000:.0f} ms, "
            f"ratio {u_console / u_bare:.2f} (not the budget)"
        )

    presses = 20 if args.quick else 40
    idle = asyncio.run(stream_run(None, 0, presses, mem=False))
    say(f"key latency, no stream: p50 {idle['p50_ms']:.1f} ms, p95 {idle['p95_ms']:.1f} ms, max {idle['max_ms']:.1f} ms")
    streams = {}
    for name in ("quiet", "loaded"):
        load = _load()
        if name == "loaded":
            with BusyLoop():
                r = asyncio.run(stream_run(20_000, 10**9, presses, mem=False))
        else:
            r = asyncio.run(stream_run(20_000, 10**9, presses, mem=False))
        streams[name] = r
        say(
            f"key latency while streaming {r['rate']:,.0f} lines/s (target 20,000), {name}"
            f"{' (a busy loop on the last CPU)' if name == 'loaded' else ''}: p50 {r['p50_ms']:.1f} ms, "
            f"p95 {r['p95_ms']:.1f} ms, max {r['max_ms']:.1f} ms (budget p95 < 100); load average before: {load}"
        )

    total = 200_000 if args.quick else 1_000_000
    mem = asyncio.run(stream_run(None, total, 0, mem=True))
    growth = mem["rss_last"] - mem["rss_first"]
    say(
        f"memory: {mem['lines']:,.0f} lines through session and log pane at {mem['rate']:,.0f} lines/s; "
        f"RSS after the first 100k {mem['rss_first']:.0f} MiB, after all {mem['rss_last']:.0f} MiB, "
        f"growth {growth:.1f} MiB (budget < 10); log widget holds {mem['log_rows']:,.0f} rows"
    )
    ok = ratio <= 1.5 and not torch_seen and streams["loaded"]["p95_ms"] < 100 and growth < 10
    say("budgets met" if ok else "BUDGET MISSED")
    if args.json:
        doc = {
            "first_frame_ratio": round(ratio, 3),
            "key_p95_ms_quiet": round(streams["quiet"]["p95_ms"], 1),
            "key_p95_ms_loaded": round(streams["loaded"]["p95_ms"], 1),
            "rss_growth_mib": round(growth, 1),
        }
        print(json.dumps(doc))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
