"""Replay speed against `grep`, measured in the same run (DESIGN.md budget).

Generates a seeded 1,000,000-line SGLang log (one third decode lines, the rest prefill, uvicorn
access and other lines; five server runs, one crash with a traceback) in a temp dir, then times
`LC_ALL=C grep -c 'accept len'`, `eagle3-tui replay --json` (which reads a file this big with one
worker process per idle CPU) and `eagle3-tui replay --json -j 1` (one process) on it, interleaved, and prints
the median lines/s of each (wall-clock and CPU time), the ratios and replay's peak RSS. Peak RSS is also measured on a quarter
of the log, to show memory does not grow with the file. The temp dir is removed afterwards.

Budget: replay >= 1/8 of grep's lines/s (aim 1/4); peak RSS < 150 MB and flat.
Usage: python benchmarks/parse_bench.py [--lines N] [--repeat K] [--keep DIR]
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


def make_log(path: Path, lines: int, seed: int = 0) -> int:
    """Write about `lines` lines (decode lines are 1/3 of them); returns the exact count."""
    with open(path, "w", encoding="utf-8") as f:
        truth = write_log(f, _plans(lines // 3), seed=seed)
    return truth.lines


def _replay_cmd() -> list[str]:
    script = Path(sys.executable).with_name("eagle3-tui")
    return [str(script)] if script.exists() else [sys.executable, "-m", "eagle3_tui"]


def _timed(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float, int, bytes]:
    """Wall seconds, CPU seconds (user + system), peak RSS (KiB) and stdout of one child process."""
    t = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    out = proc.stdout.read() if proc.stdout else b""
    err = proc.stderr.read() if proc.stderr else b""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{argv[0]} failed ({proc.returncode}): {err.decode(errors='replace')[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--keep", metavar="DIR", help="write the logs here and keep them")
    a = ap.parse_args()

    tmp = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="eagle3-parse-bench-"))
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        big, small = tmp / "server.log", tmp / "server-quarter.log"
        t = time.perf_counter()
        n = make_log(big, a.lines)
        n_small = make_log(small, a.lines // 4, seed=1)
        size = big.stat().st_size
        print(f"log: {n:,} lines, {size / 1e6:.1f} MB (generated in {time.perf_counter() - t:.1f} s)")

        grep_env = {**os.environ, "LC_ALL": "C"}
        replay = [*_replay_cmd(), "replay", "--json"]
        variants = {"default": [], "-j 1": ["-j", "1"]}  # default: a worker per idle CPU on this file
        wall: dict[str, list[float]] = {"grep": [], **{k: [] for k in variants}}
        cpu: dict[str, list[float]] = {"grep": [], **{k: [] for k in variants}}
        rss: list[int] = []
        docs: list[dict[str, object]] = []
        grep_count = 0
        for _ in range(a.repeat):  # interleaved, so that load on the machine hits all alike
            w, c, _, out = _timed(["grep", "-c", "accept len", str(big)], env=grep_env)
            wall["grep"].append(w)
            cpu["grep"].append(c)
            grep_count = int(out.strip() or 0)
            for name, extra in variants.items():
                w, c, r, out = _timed([*replay, *extra, str(big)])
                wall[name].append(w)
                cpu[name].append(c)
                rss.append(r)
                docs.append(json.loads(out))
        _, _, rss_small, _ = _timed([*replay, str(small)])

        assert all(d["logs"] == docs[0]["logs"] for d in docs), "replay variants disagree"
        med = {k: statistics.median(v) for k, v in wall.items()}
        cmed = {k: statistics.median(v) for k, v in cpu.items()}
        runs = docs[0]["logs"][0]["runs"]  # type: ignore[index]
        decode = sum(run["decode_lines"] for run in runs)  # type: ignore[index]
        g = med["grep"]
        print(f"grep -c 'accept len'       : {n / g / 1e6:6.2f} M lines/s  ({g:.3f} s wall, "
              f"{cmed['grep']:.3f} s CPU; median of {a.repeat}; {grep_count:,} hits)")
        for name in variants:
            r = med[name]
            print(f"eagle3-tui replay {name:9s}: {n / r / 1e6:6.2f} M lines/s  ({r:.3f} s wall, "
                  f"{cmed[name]:.3f} s CPU)  = 1/{r / g:.2f} of grep wall-clock, 1/{cmed[name] / cmed['grep']:.2f} CPU")
        print(f"  ({len(runs)} runs, {decode:,} decode lines; CPU time is steadier than wall-clock on a busy machine)")
        ratio = g / med["default"]
        print(f"replay / grep speed        : 1/{1 / ratio:.2f}  (budget >= 1/8, aim 1/4)  "
              f"{'OK' if ratio >= 1 / 8 else 'OVER BUDGET'}")
        peak = max(rss) / 1024
        print(f"replay peak RSS            : {peak:.1f} MB on {n:,} lines, {rss_small / 1024:.1f} MB on {n_small:,} "
              f"lines (budget < 150 MB, flat)  {'OK' if peak < 150 else 'OVER BUDGET'}")
        return 0 if ratio >= 1 / 8 and peak < 150 else 1
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
