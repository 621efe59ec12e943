"""The offline tree prediction against the sim's measured accept length, on demo worlds of several seeds.

For each world: the accuracy check's prediction (held-out data, the trained wiring served through the
draft config with the embed-capture patch) for every configuration of tests/test_predict_demo.py, and
the sim engine's accept length for the same configuration on the greedy demo requests. Prints one row
per (seed, config): predicted, measured, predicted / measured, and whether the two order the
configurations alike. The target (issues 20, 29): every ratio within 10%, the same order, on seeds 0, 1, 2,
built from nothing (benchmarks/MEASURED.md has the table of fresh rebuilds).

    .venv/bin/python benchmarks/predict_worlds_bench.py [--seeds 0 1 2] [--world DIR ...]
                                                        [--requests 32] [--tokens 64] [--json FILE]

Worlds of `--seeds` come from the cache (`python -m eagle3_tui.sim.world ensure --seed N` builds one,
2.5-4 CPU-minutes); `--world DIR` takes built world directories (`... world build DIR --seed N`).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from itertools import combinations
from pathlib import Path
from typing import Any

from eagle3_tui.sim.measure import PREDICT_CONFIGS, measure_accept_len


def _draft_dir(world: Any, dest: Path) -> Path:
    """The draft with the trained wiring in its config (weights linked), as the tests serve it."""
    cfg = json.loads((Path(world.draft_dir) / "config.json").read_text())
    cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": world.fix_layer_ids, "use_aux_hidden_state": True}
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    (dest / "model.safetensors").symlink_to(Path(world.draft_dir) / "model.safetensors")
    return dest


def one_world(world: Any, requests: int, tokens: int) -> list[dict]:
    from eagle3_tui.eagle.accuracy import CheckOptions, run_check

    with tempfile.TemporaryDirectory() as tmp:
        draft = _draft_dir(world, Path(tmp) / "draft")
        t = time.monotonic()
        report = run_check(CheckOptions(str(draft), world.heldout_glob, str(world.target_dir), steps=3,
                                        data_slots=list(world.slot_boundaries), predict=list(PREDICT_CONFIGS)))
        check_s = time.monotonic() - t
        pred = {(r["steps"], r["topk"], r["draft_tokens"]): r["accept_len"] for r in report.predictions
                if r["wiring"] == "training"}
        rows = []
        for c in PREDICT_CONFIGS:
            t = time.monotonic()
            m = measure_accept_len(world.target_dir, draft, c, requests=requests, tokens=tokens)
            rows.append({"seed": world_seed(world), "config": "/".join(map(str, c)), "predicted": pred[c],
                         "measured": round(m, 4), "ratio": round(pred[c] / m, 4),
                         "measure_s": round(time.monotonic() - t, 1)})
        rows[0]["check_s"] = round(check_s, 1)
    return rows


def world_seed(world: Any) -> int | None:
    meta = json.loads((Path(world.root) / "world.json").read_text())
    return meta.get("recipe", {}).get("seed")


def ordering(rows: list[dict], tie: float = 0.10) -> tuple[list[str], list[str]]:
    """(pairs ordered unlike the sim, pairs swapped within `tie`): a pair the sim puts more than `tie`
    apart (the agreement asked of the prediction) must be ordered alike; closer pairs are ties."""
    wrong, ties = [], []
    for a, b in combinations(rows, 2):
        if (a["measured"] > b["measured"]) == (a["predicted"] > b["predicted"]):
            continue
        close = abs(a["measured"] - b["measured"]) <= tie * min(a["measured"], b["measured"])
        (ties if close else wrong).append(f"{a['config']} vs {b['config']}")
    return wrong, ties


def main() -> int:
    import torch

    from eagle3_tui.sim.world import World, ensure_world

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="*", default=None)
    ap.add_argument("--world", action="append", default=[], help="a built world directory (repeatable)")
    ap.add_argument("--requests", type=int, default=32)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--json", help="also write the rows to this file")
    a = ap.parse_args()
    torch.set_num_threads(1)
    worlds = [World.load(d) for d in a.world]
    seeds = a.seeds if a.seeds is not None else ([] if worlds else [0, 1, 2])
    worlds += [ensure_world(seed=s, progress=lambda m: print(m, file=sys.stderr)) for s in seeds]
    all_rows: list[dict] = []
    print(f"{'seed':>4}  {'config':>8}  {'predicted':>9}  {'measured':>8}  {'ratio':>6}")
    worst = 0.0
    for w in worlds:
        rows = one_world(w, a.requests, a.tokens)
        for r in rows:
            worst = max(worst, abs(r["ratio"] - 1))
            print(f"{r['seed']!s:>4}  {r['config']:>8}  {r['predicted']:>9.3f}  {r['measured']:>8.3f}  {r['ratio']:>6.3f}")
        wrong, ties = ordering(rows)
        print(f"{'':>4}  ordering {'agrees' if not wrong else 'differs: ' + ', '.join(wrong)}"
              + (f" (swapped within 10%: {', '.join(ties)})" if ties else ""), flush=True)
        all_rows += rows
    print(f"worst |predicted / measured - 1| = {worst:.3f}")
    if a.json:
        Path(a.json).write_text(json.dumps(all_rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
