"""The check's predicted accept length against real SGLang 0.5.23's measured one, on the demo world.

For each configuration (SGLang's default wiring: no layer-id key; the trained one: ids [-1, 1, 5] = embed, h2,
h6; topk 1 chains of 3 or 2 steps) a real server serves greedy requests; measured = Σ completion_tokens /
Σ spec_verify_ct over their meta_info. Predicted = the world's own check for that wiring (world.json metrics,
computed by eagle3_tui.eagle.accuracy when the world was built): its per-step acceptance chained over the
served steps. Prints both side by side.
Needs `make sglang`; without it, says so and exits 0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from eagle3_tui.eagle.drafter import expected_accept_length
from eagle3_tui.remote.procgroup import stop_group
from eagle3_tui.session.demo.lifecycle import free_port
from eagle3_tui.session.demo.real_sglang import MISSING, find_real_sglang, server_argv
from eagle3_tui.sim.world import ensure_world

PROMPTS = ["def fibonacci(n):\n    ", "The quick brown fox", "import numpy as np\n", "class Stack:\n    def ",
           "for i in range(10):\n", "Once upon a time"]
READY = "The server is fired up and ready to roll!"


def measure(real, world, work: Path, layer_ids: list[int] | None, steps: int) -> float:
    draft = work / "draft"
    draft.mkdir(parents=True)
    cfg = json.loads((Path(world.draft_dir) / "config.json").read_text())
    cfg.pop("eagle_config", None)
    if layer_ids is not None:
        cfg["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": layer_ids, "use_aux_hidden_state": True}
    (draft / "config.json").write_text(json.dumps(cfg))
    (draft / "model.safetensors").symlink_to(Path(world.draft_dir) / "model.safetensors")
    port = free_port()
    argv = server_argv(real, target=world.target_dir, draft=draft, port=port, steps=steps, topk=1,
                       draft_tokens=steps + 1)
    log = work / "server.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, env=real.env(dict(os.environ)),
                                start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        while READY not in log.read_text(errors="replace"):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"real SGLang did not start: {log.read_text(errors='replace')[-800:]}")
            time.sleep(0.5)
        done = verify = 0
        for p in PROMPTS:
            meta = httpx.post(f"http://127.0.0.1:{port}/generate", timeout=600, json={
                "text": p, "sampling_params": {"max_new_tokens": 64, "temperature": 0}}).json()["meta_info"]
            done += meta["completion_tokens"]
            verify += meta["spec_verify_ct"]
        return done / verify
    finally:
        stop_group(proc.pid, 20.0)


def main() -> int:
    real = find_real_sglang()
    if real is None:
        print(f"real_sglang_bench: skipped: {MISSING}")
        return 0
    world = ensure_world()
    rows = [("default (h2, h6, h9)", None, "default", 3), ("train-[:-1] (embed, h2, h6)", world.fix_layer_ids, "trained", 3),
            ("train-[:-1] (embed, h2, h6)", world.fix_layer_ids, "trained", 2)]
    print(f"{'wiring':28} {'steps/topk/draft':>16} {'predicted':>9} {'measured':>9} {'diff':>7}")
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, ids, key, steps) in enumerate(rows):
            predicted = expected_accept_length(world.metrics[key]["step_accept"][:steps])
            measured = measure(real, world, Path(tmp) / str(i), ids, steps)
            flags = f"{steps}/1/{steps + 1}"
            print(f"{name:28} {flags:>16} {predicted:9.2f} {measured:9.2f} {100 * (measured - predicted) / predicted:+6.1f}%",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
