"""The sim server's measured accept length and tok/s: no speculation vs the default wiring vs the trained one.

Starts `python -m eagle3_tui.sim.server` on the cached demo world three times (plain decoding, the
draft as shipped = SGLang's default boundaries, the draft with ids [-1, a-1, b-1] and the
embed-capture patch), sends the same greedy requests one at a time, and prints accept length and
tok/s with ratios against the plain run measured in the same session.

    .venv/bin/python benchmarks/sim_bench.py [--requests 8] [--tokens 64] [--steps 3]
"""

from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from eagle3_tui.remote.procgroup import stop_group
from eagle3_tui.sim.prompts import demo_prompts
from eagle3_tui.sim.world import ensure_world


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(world, name: str, extra: list[str], prompts: list[str], tokens: int, workdir: Path) -> dict:
    port = _port()
    argv = [sys.executable, "-m", "eagle3_tui.sim.server", "--model-path", str(world.target_dir), *extra]
    argv += ["--host", "127.0.0.1", "--port", str(port)]
    log_path = workdir / f"{name}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    t0 = time.monotonic()
    while "ready to roll" not in log_path.read_text():
        if proc.poll() is not None:
            raise SystemExit(f"{name}: server exited:\n{log_path.read_text()[-2000:]}")
        time.sleep(0.05)
    start_s = time.monotonic() - t0
    out = {"name": name, "start_s": round(start_s, 2)}
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120) as client:
            done = verifies = 0
            t = time.monotonic()
            for p in prompts:
                meta = client.post(
                    "/generate", json={"text": p, "sampling_params": {"max_new_tokens": tokens}}
                ).json()["meta_info"]
                done += meta["completion_tokens"]
                verifies += meta.get("spec_verify_ct", 0)
            out["tok_s"] = round(done / (time.monotonic() - t), 1)
            out["accept_len"] = round(done / verifies, 3) if verifies else None
    finally:
        stop_group(proc.pid, grace=15)
        proc.wait(5)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=64)
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    world = ensure_world()
    prompts = list(demo_prompts())[: a.requests]
    spec = ["--speculative-algorithm", "EAGLE3", "--speculative-num-steps", str(a.steps)]
    spec += ["--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", str(a.steps + 1)]
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        fixed = work / "draft-fixed"
        fixed.mkdir()
        cfg = json.loads((world.draft_dir / "config.json").read_text())
        cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": world.fix_layer_ids}
        (fixed / "config.json").write_text(json.dumps(cfg))
        (fixed / "model.safetensors").symlink_to(world.draft_dir / "model.safetensors")
        runs = [
            run(world, "baseline", [], prompts, a.tokens, work),
            run(
                world,
                "default-wiring",
                [*spec, "--speculative-draft-model-path", str(world.draft_dir)],
                prompts,
                a.tokens,
                work,
            ),
            run(
                world,
                "trained-wiring",
                [*spec, "--speculative-draft-model-path", str(fixed), "--sim-embed-capture-patch"],
                prompts,
                a.tokens,
                work,
            ),
        ]
    base = runs[0]["tok_s"]
    for r in runs:
        ratio = r["tok_s"] / base if base else 0.0
        print(f"{r['name']:15} start {r['start_s']:5.2f}s  accept len {r['accept_len'] or '-':>6}  "
              f"tok/s {r['tok_s']:7.1f}  ({ratio:.2f}x baseline)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
