"""Replay speed against `grep`, measured in the same run (DESIGN.md budget, issue 14).

Two seeded logs of about 1,000,000 lines each, written to a temp dir:

- `mixed`: a busy server's log (eagle3_tui.sglang.logmix; `--mix` sets the line classes' weights):
  a third uvicorn access lines with and without SGLang's prefix, `--log-requests` dumps, Decode and
  Prefill lines of several ranks, KV-cache retractions, cache flushes, tqdm bars, the odd traceback;
- `stats`: the old benchmark's log, one third decode lines (five server runs, one crash).

On each, `LC_ALL=C grep -c 'accept len'`, `eagle3-tui replay --json` (a worker process per idle
CPU on a file this big) and `eagle3-tui replay --json -j 1` run interleaved, `--repeat` times;
it prints the median wall-clock and CPU seconds, each replay's ratio to grep (wall-clock and
CPU), the peak RSS, and the load average around the runs (the machine may be shared: ratios
taken in one run are what to compare). Peak RSS is also taken on a quarter-size mixed log to show
it does not grow with the file. Replay runs with Python's bytecode cache on (in a temp dir), as
an installed package does.

`--each-class` also writes a log of each line class alone (up to 30 MB) and times the scan of it
in this process (no interpreter start) with each scanner built here, against grep on the same file:
which class of line costs what.

Budget: replay >= 1/4 of grep's wall-clock speed on the mixed log (1/5 the floor); RSS < 150 MB.
Usage: python benchmarks/parse_bench.py [--lines N] [--repeat K] [--mix access=0.3,decode=0.2,...] [--keep DIR]
       [--each-class]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from eagle3_tui.sglang.logmix import DEFAULT_MIX, LINE_CLASSES, make_line, write_mixed_log
from eagle3_tui.sglang.logsynth import RunPlan, write_log


def _plans(decode_total: int) -> list[RunPlan]:
    share = [0.1, 0.3, 0.2, 0.25, 0.15]
    plans = [
        RunPlan(spec=False, style="0.5.6", mean_tps=90.0),
        RunPlan(steps=1, draft_tokens=2, requested_draft_tokens=16, mean_accept=1.45, mean_tps=56.8, crash=True),
        RunPlan(steps=3, draft_tokens=4, mean_accept=1.6, mean_tps=46.7),
        RunPlan(steps=3, draft_tokens=4, mean_accept=2.3, mean_tps=54.8, style="2026"),
        RunPlan(steps=3, draft_tokens=4, mean_accept=2.3, mean_tps=55.0, ranks=" DP0 TP0", style="0.5.4"),
    ]
    for p, s in zip(plans, share, strict=True):
        p.decode_lines = max(1, round(decode_total * s))
    return plans


def make_stats_log(path: Path, lines: int, seed: int = 0) -> int:
    """About `lines` lines, a third of them decode lines; returns the exact count."""
    with open(path, "w", encoding="utf-8") as f:
        return write_log(f, _plans(lines // 3), seed=seed).lines


def make_mixed_log(path: Path, lines: int, mix: dict[str, float], seed: int = 0) -> int:
    with open(path, "w", encoding="utf-8") as f:
        return write_mixed_log(f, lines, mix=mix, seed=seed).lines


def parse_mix(text: str | None) -> dict[str, float]:
    if not text:
        return dict(DEFAULT_MIX)
    mix: dict[str, float] = {}
    for item in text.split(","):
        name, _, weight = item.partition("=")
        mix[name.strip()] = float(weight)
    return mix


def _replay_cmd() -> list[str]:
    script = Path(sys.executable).with_name("eagle3-tui")
    return [str(script)] if script.exists() else [sys.executable, "-m", "eagle3_tui"]


def _timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int, bytes]:
    """Wall seconds, CPU seconds (user + system), peak RSS (KiB) and stdout of one child process
    (stdout is a pipe: grep would stop early writing to /dev/null)."""
    t = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out = proc.stdout.read() if proc.stdout else b""
    err = proc.stderr.read() if proc.stderr else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"{argv[0]} failed ({code}): {err.decode(errors='replace')[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, out


def _load() -> str:
    try:
        return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg()) + f" on {os.cpu_count()} CPUs"
    except OSError:
        return "load average unknown"


def bench_log(name: str, path: Path, lines: int, repeat: int, env: dict[str, str]) -> dict[str, float]:
    """Interleaved runs on one log; prints its block and returns the ratios and the peak RSS."""
    grep_env = {**os.environ, "LC_ALL": "C"}
    replay = [*_replay_cmd(), "replay", "--json"]
    variants = {"default": [], "-j 1": ["-j", "1"]}
    wall: dict[str, list[float]] = {"grep": [], **{k: [] for k in variants}}
    cpu: dict[str, list[float]] = {"grep": [], **{k: [] for k in variants}}
    rss: list[int] = []
    docs = []
    hits = 0
    load_before = _load()
    _timed([*replay, "-j", "1", str(path)], env=env)  # warm: page cache, bytecode cache
    for _ in range(repeat):  # interleaved, so that load on the machine hits all alike
        w, c, _, out = _timed(["grep", "-c", "accept len", str(path)], env=grep_env)
        wall["grep"].append(w)
        cpu["grep"].append(c)
        hits = int(out.strip() or 0)
        for v, extra in variants.items():
            w, c, r, out = _timed([*replay, *extra, str(path)], env=env)
            wall[v].append(w)
            cpu[v].append(c)
            rss.append(r)
            docs.append(json.loads(out))
    assert all(d["logs"] == docs[0]["logs"] for d in docs), "replay variants disagree"
    runs = docs[0]["logs"][0]["runs"]
    scanner = docs[0]["logs"][0]["scanner"]
    med = {k: statistics.median(v) for k, v in wall.items()}
    cmed = {k: statistics.median(v) for k, v in cpu.items()}
    size = path.stat().st_size
    print(f"\n{name} log: {lines:,} lines, {size / 1e6:.1f} MB, {len(runs)} runs, "
          f"{sum(r['decode_lines'] for r in runs):,} decode lines; {scanner} scanner; {load_before} before, {_load()} after")
    g = med["grep"]
    print(f"  grep -c 'accept len'       : {lines / g / 1e6:6.2f} M lines/s  ({g:.3f} s wall, {cmed['grep']:.3f} s CPU; "
          f"median of {repeat}; {hits:,} hits)")
    out: dict[str, float] = {}
    for v in variants:
        r = med[v]
        out[v] = g / r
        print(f"  eagle3-tui replay {v:9s}: {lines / r / 1e6:6.2f} M lines/s  ({r:.3f} s wall, {cmed[v]:.3f} s CPU)"
              f"  = 1/{r / g:.2f} of grep wall-clock, 1/{cmed[v] / cmed['grep']:.2f} CPU")
        out[v + " cpu"] = cmed["grep"] / cmed[v]
    out["rss_mb"] = max(rss) / 1024
    print(f"  replay peak RSS            : {out['rss_mb']:.1f} MB")
    return out


def bench_each_class(tmp: Path, lines: int, repeat: int) -> None:
    """Each line class alone: the in-process scan (every scanner built here) against grep."""
    import io
    import random

    from eagle3_tui.sglang.scan import ENGINES, best_engine, scan
    from eagle3_tui.telemetry.runs import RunSplitter

    engines = [e for e in ENGINES if e != "native" or best_engine() == "native"]
    print(f"\neach line class alone (scan in this process, no interpreter start; median of {repeat}):")
    grep_env = {**os.environ, "LC_ALL": "C"}
    for name in sorted(LINE_CLASSES):
        rng = random.Random(5)
        avg = sum(len(make_line(name, rng, 1775419200.0)) + 1 for _ in range(50)) / 50
        n = max(1000, min(lines // 10, int(30e6 / avg)))
        path = tmp / f"class-{name}.log"
        make_mixed_log(path, n, {name: 1.0})
        data = path.read_bytes()
        g = statistics.median(_timed(["grep", "-c", "accept len", str(path)], env=grep_env)[0] for _ in range(repeat))
        cells = []
        for engine in engines:
            times = []
            for _ in range(repeat):
                t = time.perf_counter()
                scan(io.BytesIO(data), RunSplitter(), engine=engine)
                times.append(time.perf_counter() - t)
            cells.append(f"{engine} 1/{statistics.median(times) / g:5.2f}")
        print(f"  {name:15s} {len(data) / 1e6:6.1f} MB  grep {g:.3f} s  " + "  ".join(cells))
        path.unlink()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--mix", help="line-class weights, e.g. access=0.33,decode=0.22 (default: logmix.DEFAULT_MIX)")
    ap.add_argument("--keep", metavar="DIR", help="write the logs here and keep them")
    ap.add_argument("--each-class", action="store_true", help="also time each line class alone")
    a = ap.parse_args()
    mix = parse_mix(a.mix)

    tmp = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="eagle3-parse-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    try:
        t = time.perf_counter()
        mixed, quarter, stats = tmp / "mixed.log", tmp / "mixed-quarter.log", tmp / "stats.log"
        n_mixed = make_mixed_log(mixed, a.lines, mix)
        n_quarter = make_mixed_log(quarter, a.lines // 4, mix, seed=1)
        n_stats = make_stats_log(stats, a.lines)
        print(f"logs generated in {time.perf_counter() - t:.1f} s; mix: "
              + ", ".join(f"{k} {v:g}" for k, v in mix.items()))
        res_mixed = bench_log("mixed", mixed, n_mixed, a.repeat, env)
        res_stats = bench_log("stats", stats, n_stats, a.repeat, env)
        _, _, rss_quarter, _ = _timed([*_replay_cmd(), "replay", "--json", "-j", "1", str(quarter)], env=env)
        best = max(res_mixed["default"], res_mixed["-j 1"])
        print(f"\nmixed log, replay / grep speed : 1/{1 / best:.2f} wall-clock at best (default 1/{1 / res_mixed['default']:.2f}, "
              f"-j 1 1/{1 / res_mixed['-j 1']:.2f}; CPU -j 1 1/{1 / res_mixed['-j 1 cpu']:.2f})  budget >= 1/4, floor 1/5: "
              f"{'OK' if best >= 1 / 4 else 'FLOOR MET' if best >= 1 / 5 else 'UNDER THE FLOOR'}")
        print(f"stats log, replay / grep speed : 1/{1 / max(res_stats['default'], res_stats['-j 1']):.2f} wall-clock at best")
        if a.each_class:
            bench_each_class(tmp, a.lines, a.repeat)
        peak = max(res_mixed["rss_mb"], res_stats["rss_mb"])
        print(f"replay peak RSS                : {peak:.1f} MB on {a.lines:,}-line logs, {rss_quarter / 1024:.1f} MB on "
              f"{n_quarter:,} lines (budget < 150 MB, flat)  {'OK' if peak < 150 else 'OVER BUDGET'}")
        return 0 if best >= 1 / 5 and peak < 150 else 1
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
