"""A simulated SGLang server: SGLang's flags, log format and HTTP API over the demo world's tiny models.

    python -m eagle3_tui.sim.server --model-path W/target --speculative-algorithm EAGLE3 \\
        --speculative-draft-model-path W/draft --speculative-num-steps 3 \\
        --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --port 30000

Decoding is real: greedy, one request after another within each decode iteration, with EAGLE-3
chain drafting (topk 1) verified by the target, so accept length and tok/s are measured. Flags
apply SGLang 0.5.6's rules (topk 1 forces draft tokens = steps + 1, auto-choice when all three are
unset). Sim-only flags: `--sim-embed-capture-patch` (the seeds' source patch that lets layer id -1
capture the embedding output), `--sim-background-load N` (N requests kept running so charts move),
`--sim-log-style {0.5.6,0.4.6,0.4.1-tp0}`. The log goes to stdout; SIGTERM stops it cleanly.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import queue
import signal
import sys
import threading
import time
import traceback
import uuid
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from eagle3_tui.sim.logfmt import (
    STYLE_ALIASES,
    STYLES,
    DecodeStats,
    LogWriter,
    decode_message,
    prefill_message,
)

SGLANG_VERSION = "0.5.6"
MAX_TOTAL_NUM_TOKENS = 65536
CONTEXT_LEN = 4096


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m eagle3_tui.sim.server", description=__doc__.splitlines()[0])
    p.add_argument("--model-path", "--model", dest="model_path", required=True)
    p.add_argument("--tokenizer-path", default=None)
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument(
        "--speculative-algorithm", choices=["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"], default=None
    )
    p.add_argument("--speculative-draft-model-path", "--speculative-draft-model", default=None)
    p.add_argument("--speculative-num-steps", type=int, default=None)
    p.add_argument("--speculative-eagle-topk", type=int, default=None)
    p.add_argument("--speculative-num-draft-tokens", type=int, default=None)
    p.add_argument("--speculative-token-map", default=None)
    p.add_argument("--decode-log-interval", type=int, default=40)
    p.add_argument("--tp-size", "--tp", dest="tp_size", type=int, default=1)
    p.add_argument("--dp-size", "--dp", dest="dp_size", type=int, default=1)
    p.add_argument("--enable-metrics", action="store_true")
    p.add_argument("--max-running-requests", type=int, default=None)
    p.add_argument("--mem-fraction-static", type=float, default=None)
    p.add_argument("--context-length", type=int, default=None)
    p.add_argument("--dtype", default="auto")
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--disable-cuda-graph", action="store_true")
    p.add_argument("--cuda-graph-max-bs", type=int, default=None)
    p.add_argument("--attention-backend", default=None)
    p.add_argument("--page-size", type=int, default=1)
    p.add_argument("--chunked-prefill-size", type=int, default=None)
    p.add_argument("--log-level", default="info")
    p.add_argument("--random-seed", type=int, default=None)
    p.add_argument(
        "--sim-embed-capture-patch", action="store_true", help="the seeds' patch: layer id -1 = embedding"
    )
    p.add_argument("--sim-background-load", type=int, default=0, metavar="N", help="keep N requests running")
    p.add_argument("--sim-log-style", default="0.5.6", choices=[*STYLES, *STYLE_ALIASES])
    p.add_argument("--sim-bg-max-new-tokens", type=int, default=96, help=argparse.SUPPRESS)
    return p


@dataclass
class ServerArgs:
    """The effective server args (after SGLang's adjustments), as /server_info reports them."""

    model_path: str
    tokenizer_path: str
    served_model_name: str
    host: str
    port: int
    speculative_algorithm: str | None
    speculative_draft_model_path: str | None
    speculative_num_steps: int | None
    speculative_eagle_topk: int | None
    speculative_num_draft_tokens: int | None
    speculative_token_map: str | None
    decode_log_interval: int
    tp_size: int
    dp_size: int
    enable_metrics: bool
    max_running_requests: int | None
    mem_fraction_static: float | None
    context_length: int | None
    dtype: str
    page_size: int
    chunked_prefill_size: int | None
    log_level: str
    random_seed: int
    device: str = "cpu"
    disable_cuda_graph: bool = True
    skip_server_warmup: bool = False
    warnings: list[str] = field(default_factory=list)


def effective_args(ns: argparse.Namespace, target_arch: str) -> ServerArgs:
    """Apply `ServerArgs._handle_speculative_decoding` (SGLang 0.5.6)."""
    warnings: list[str] = []
    algo = ns.speculative_algorithm
    if algo == "NEXTN":
        algo = "EAGLE"
    steps, topk, draft_tokens = (
        ns.speculative_num_steps,
        ns.speculative_eagle_topk,
        ns.speculative_num_draft_tokens,
    )
    max_running = ns.max_running_requests
    if algo in ("EAGLE", "EAGLE3", "STANDALONE"):
        if max_running is None:
            max_running = 48
            warnings.append(
                "Max running requests is reset to 48 for speculative decoding. You can override this by "
                "explicitly setting --max-running-requests."
            )
        warnings.append(
            "Overlap scheduler is disabled because of using eagle3 or standalone speculative decoding."
        )
        if steps is None:
            if topk is not None or draft_tokens is not None:
                raise AssertionError(
                    "speculative_eagle_topk and speculative_num_draft_tokens must be unset when "
                    "speculative_num_steps is unset (auto-choice)"
                )
            if algo == "STANDALONE":
                steps, topk, draft_tokens = 3, 1, 4
            else:
                steps, topk, draft_tokens = 5, 4, 8  # LlamaForCausalLM and every other arch at 0.5.6
        if topk is None or draft_tokens is None:
            raise AssertionError(
                "speculative_eagle_topk and speculative_num_draft_tokens must be set with speculative_num_steps"
            )
        if topk == 1 and draft_tokens != steps + 1:
            warnings.append(
                "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"
            )
            draft_tokens = steps + 1
        if ns.speculative_token_map and algo == "EAGLE3":
            warnings.append(
                "Speculative token map specified, but EAGLE3 models already have this. Ignoring the specified token map."
            )
    return ServerArgs(
        model_path=ns.model_path,
        tokenizer_path=ns.tokenizer_path or ns.model_path,
        served_model_name=ns.served_model_name or ns.model_path,
        host=ns.host,
        port=ns.port,
        speculative_algorithm=algo,
        speculative_draft_model_path=ns.speculative_draft_model_path,
        speculative_num_steps=steps,
        speculative_eagle_topk=topk,
        speculative_num_draft_tokens=draft_tokens,
        speculative_token_map=ns.speculative_token_map,
        decode_log_interval=ns.decode_log_interval,
        tp_size=ns.tp_size,
        dp_size=ns.dp_size,
        enable_metrics=ns.enable_metrics,
        max_running_requests=max_running,
        mem_fraction_static=ns.mem_fraction_static,
        context_length=ns.context_length,
        dtype=ns.dtype,
        page_size=ns.page_size,
        chunked_prefill_size=ns.chunked_prefill_size,
        log_level=ns.log_level,
        random_seed=ns.random_seed if ns.random_seed is not None else 0,
        warnings=warnings,
    )


def _args_dict(args: ServerArgs) -> dict[str, Any]:
    d = dataclasses.asdict(args)
    d.pop("warnings")
    return d


# --------------------------------------------------------------------------------------------------
# scheduler


@dataclass
class Request:
    rid: str
    prompt_ids: list[int]
    max_new_tokens: int
    stop_ids: frozenset[int]
    internal: bool = False
    done: threading.Event = field(default_factory=threading.Event)
    created: float = field(default_factory=time.monotonic)
    seq: Any = None
    error: str | None = None


class Scheduler:
    """One thread: prefill new requests, then one decode iteration over every running request."""

    def __init__(self, engine: Any, args: ServerArgs, log: LogWriter) -> None:
        self.engine = engine
        self.args = args
        self.log = log
        self.waiting: queue.Queue[Request] = queue.Queue()
        self.running: list[Request] = []
        self.stop_event = threading.Event()
        self.wakeup = threading.Event()
        self.lock = threading.Lock()
        self.forward_ct_decode = 0
        # window counters (reset at each decode log line) and lifetime counters (flush_cache resets)
        self.spec_num_accepted_tokens = 0
        self.spec_num_forward_ct = 0
        self.num_generated_tokens = 0
        self.spec_total_num_accepted_tokens = 0
        self.spec_total_num_forward_ct = 0
        self.last_decode_log = time.monotonic()
        self.last_gen_throughput = 0.0
        self.last_accept_len: float | None = None
        self.last_accept_rate: float | None = None
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.num_requests_total = 0
        self.thread = threading.Thread(target=self._run, name="scheduler", daemon=True)
        self.failed: str | None = None

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        self.thread.join(timeout=5)

    def submit(self, req: Request) -> None:
        self.waiting.put(req)
        self.wakeup.set()

    @property
    def max_running(self) -> int:
        return self.args.max_running_requests or 64

    def flush_cache(self) -> bool:
        with self.lock:
            if self.running or not self.waiting.empty():
                self.log.write(
                    "Cache not flushed because there are pending requests. "
                    f"#queue-req: {self.waiting.qsize()}, #running-req: {len(self.running)}",
                    scheduler=True,
                )
                return False
            self.spec_total_num_accepted_tokens = self.spec_total_num_forward_ct = 0
            self.spec_num_accepted_tokens = self.spec_num_forward_ct = 0
            self.log.write("Cache flushed successfully!", scheduler=True)
            return True

    def internal_state(self) -> dict[str, Any]:
        ret = _args_dict(self.args)
        ret["last_gen_throughput"] = self.last_gen_throughput
        ret["memory_usage"] = {
            "weight": 0.01,
            "kvcache": 0.01,
            "token_capacity": MAX_TOTAL_NUM_TOKENS,
            "graph": 0,
        }
        if self.args.speculative_algorithm and self.spec_total_num_forward_ct > 0:
            ret["avg_spec_accept_length"] = (
                self.spec_total_num_accepted_tokens / self.spec_total_num_forward_ct
            )
        return ret

    def _num_tokens(self) -> int:
        return sum(r.seq.kv_tokens for r in self.running if r.seq is not None)

    def _run(self) -> None:
        try:
            while not self.stop_event.is_set():
                self._admit()
                if not self.running:
                    self.wakeup.wait(0.05)
                    self.wakeup.clear()
                    continue
                self._decode_iteration()
        except Exception:
            self.failed = traceback.format_exc()
            self.log.write(f"Scheduler hit an exception: {self.failed.rstrip()}", scheduler=True)
            self.log.write("Received sigquit from a child process. It usually means the child failed.")
            os.kill(os.getpid(), signal.SIGTERM)

    def _admit(self) -> None:
        new: list[Request] = []
        while len(self.running) + len(new) < self.max_running:
            try:
                new.append(self.waiting.get_nowait())
            except queue.Empty:
                break
        if not new:
            return
        new_tokens = 0
        for req in new:
            req.seq = self.engine.new_sequence(req.prompt_ids, req.max_new_tokens, req.stop_ids)
            self.engine.prefill(req.seq)
            new_tokens += len(req.prompt_ids)
            self.prompt_tokens_total += len(req.prompt_ids)
            self.generation_tokens_total += 1
        with self.lock:
            self.running.extend(new)
        usage = self._num_tokens() / MAX_TOTAL_NUM_TOKENS
        self.log.write(
            prefill_message(
                len(new),
                new_tokens,
                0,
                usage,
                len(self.running) - len(new),
                self.waiting.qsize(),
                self.log.style,
            ),
            scheduler=True,
        )
        self._retire()

    def _retire(self) -> None:
        done = [r for r in self.running if r.seq is not None and r.seq.finished]
        if not done:
            return
        with self.lock:
            self.running = [r for r in self.running if r not in done]
        for r in done:
            self.num_requests_total += 1
            r.done.set()

    def _decode_iteration(self) -> None:
        bs = 0
        for req in list(self.running):
            if req.seq.finished:
                continue
            res = self.engine.step(req.seq)
            bs += 1
            self.num_generated_tokens += res.new_tokens
            self.generation_tokens_total += res.new_tokens
            if res.verified:
                self.spec_num_accepted_tokens += res.accepted_drafts + 1
                self.spec_num_forward_ct += 1
        self.forward_ct_decode = (self.forward_ct_decode + 1) % (1 << 30)
        if self.forward_ct_decode % self.args.decode_log_interval == 0:
            self._log_decode_stats()
        self._retire()

    def _log_decode_stats(self) -> None:
        now = time.monotonic()
        gap = max(now - self.last_decode_log, 1e-9)
        self.last_gen_throughput = self.num_generated_tokens / gap
        self.num_generated_tokens = 0
        self.last_decode_log = now
        accept_len = accept_rate = None
        if self.args.speculative_algorithm:
            fwd = self.spec_num_forward_ct
            accept_len = self.spec_num_accepted_tokens / fwd if fwd else 0.0
            draft_tokens = (
                self.args.speculative_num_draft_tokens or (self.args.speculative_num_steps or 0) + 1
            )
            total = fwd * draft_tokens
            accept_rate = self.spec_num_accepted_tokens / total if total else 0.0
            self.spec_total_num_accepted_tokens += self.spec_num_accepted_tokens
            self.spec_total_num_forward_ct += fwd
            self.spec_num_accepted_tokens = self.spec_num_forward_ct = 0
            self.last_accept_len, self.last_accept_rate = accept_len, accept_rate
        num_tokens = self._num_tokens()
        stats = DecodeStats(
            running_req=len(self.running),
            num_tokens=num_tokens,
            token_usage=num_tokens / MAX_TOTAL_NUM_TOKENS,
            accept_len=accept_len,
            accept_rate=accept_rate,
            gen_throughput=self.last_gen_throughput,
            queue_req=self.waiting.qsize(),
        )
        self.log.write(decode_message(stats, self.log.style), scheduler=True)


# --------------------------------------------------------------------------------------------------
# HTTP


class BadRequest(Exception):
    pass


class SimServer:
    def __init__(
        self, args: ServerArgs, engine: Any, log: LogWriter, background: int, bg_tokens: int
    ) -> None:
        self.args = args
        self.engine = engine
        self.log = log
        self.scheduler = Scheduler(engine, args, log)
        self.ready = False
        self.background = background
        self.bg_tokens = bg_tokens
        self.stopping = threading.Event()
        self.httpd: ThreadingHTTPServer | None = None
        self.bg_threads: list[threading.Thread] = []

    # -- generation ------------------------------------------------------------------------------
    def generate_ids(self, prompt_ids: list[int], max_new_tokens: int, *, internal: bool = False) -> Request:
        return self.generate_many([prompt_ids], max_new_tokens, internal=internal)[0]

    def generate_many(
        self, prompts: list[Any], max_new_tokens: int, *, internal: bool = False
    ) -> list[Request]:
        """Validate every prompt, submit them together (they decode in one batch), wait for all."""
        vocab = self.engine.tokenizer.vocab_size
        for prompt_ids in prompts:
            if not isinstance(prompt_ids, list):
                raise BadRequest("input_ids must be a list of integers or a list of lists.")
            if not prompt_ids:
                raise BadRequest("The input_ids is empty.")
            if len(prompt_ids) + max_new_tokens > CONTEXT_LEN:
                raise BadRequest(
                    f"Requested token count exceeds the model's maximum context length of {CONTEXT_LEN} tokens. "
                    f"You requested a total of {len(prompt_ids) + max_new_tokens} tokens."
                )
            if any(not isinstance(i, int) or isinstance(i, bool) or i < 0 or i >= vocab for i in prompt_ids):
                raise BadRequest(f"The input_ids contains an id out of range [0, {vocab}).")
        reqs = [
            Request(
                rid=uuid.uuid4().hex,
                prompt_ids=list(p),
                max_new_tokens=max_new_tokens,
                stop_ids=frozenset({self.engine.tokenizer.eos_id}),
                internal=internal,
            )
            for p in prompts
        ]
        for req in reqs:
            self.scheduler.submit(req)
        for req in reqs:
            while not req.done.wait(0.1):
                if self.stopping.is_set() or self.scheduler.failed:
                    raise BadRequest("The server is shutting down.")
        return reqs

    def meta_info(self, req: Request) -> dict[str, Any]:
        seq = req.seq
        n = len(seq.output)
        finish: dict[str, Any]
        if seq.finished == "stop":
            finish = {"type": "stop", "matched": self.engine.tokenizer.eos_id}
        else:
            finish = {"type": "length", "length": n}
        meta: dict[str, Any] = {
            "id": req.rid,
            "finish_reason": finish,
            "prompt_tokens": len(seq.prompt),
            "weight_version": "default",
            "total_retractions": 0,
            "completion_tokens": n,
            "cached_tokens": 0,
            "e2e_latency": time.monotonic() - req.created,
        }
        if self.args.speculative_algorithm:
            meta["spec_accept_rate"] = 0.0
            meta["spec_accept_length"] = 0
            meta["spec_verify_ct"] = seq.verify_ct
            guess = (self.args.speculative_num_draft_tokens or 1) - 1
            total_draft = seq.verify_ct * guess
            if total_draft > 0:
                meta["spec_accept_rate"] = seq.accepted_drafts / total_draft
                meta["spec_accept_length"] = n / seq.verify_ct
                meta["spec_accept_token_num"] = seq.accepted_drafts
                meta["spec_draft_token_num"] = total_draft
        return meta

    def _background_loop(self, index: int) -> None:
        from eagle3_tui.sim.prompts import demo_prompts

        prompts = demo_prompts()
        i = index
        while not self.stopping.is_set():
            text = prompts[i % len(prompts)]
            i += self.background
            try:
                self.generate_ids(self.engine.tokenizer.encode(text), self.bg_tokens, internal=True)
            except BadRequest:
                return

    # -- lifecycle -------------------------------------------------------------------------------
    def serve(self) -> None:
        server = self

        class Handler(_Handler):
            sim = server

        self.httpd = ThreadingHTTPServer((self.args.host, self.args.port), Handler)
        self.httpd.daemon_threads = True
        self.scheduler.start()
        self.log.write(f"INFO:     Started server process [{os.getpid()}]")
        self.log.write("INFO:     Waiting for application startup.")
        self.log.write("INFO:     Application startup complete.")
        self.log.write(
            f"INFO:     Uvicorn running on http://{self.args.host}:{self.args.port} (Press CTRL+C to quit)"
        )
        threading.Thread(target=self._warmup, daemon=True).start()
        self.httpd.serve_forever(poll_interval=0.1)

    def _warmup(self) -> None:
        try:
            req = self.generate_ids(
                self.engine.tokenizer.encode("The capital city of France is"), 8, internal=True
            )
            assert req.seq is not None
        except Exception:
            return
        self.log.access("127.0.0.1:" + str(self.args.port + 1), "POST", "/generate", 200, "OK")
        self.ready = True
        self.log.write("The server is fired up and ready to roll!")
        for i in range(self.background):
            t = threading.Thread(target=self._background_loop, args=(i,), daemon=True, name=f"bg{i}")
            t.start()
            self.bg_threads.append(t)

    def shutdown(self) -> None:
        self.stopping.set()
        if self.httpd is not None:
            threading.Thread(target=self.httpd.shutdown, daemon=True).start()


class _Handler(BaseHTTPRequestHandler):
    sim: SimServer
    protocol_version = "HTTP/1.1"
    server_version = "uvicorn"
    sys_version = ""

    def log_message(self, format: str, *args: Any) -> None:  # the access log is written by _send
        return

    def _send(self, status: int, body: Any, *, content_type: str = "application/json") -> None:
        data = (
            body
            if isinstance(body, bytes)
            else (json.dumps(body).encode() if content_type == "application/json" else str(body).encode())
        )
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        client = f"{self.client_address[0]}:{self.client_address[1]}"
        self.sim.log.access(client, self.command, self.path, status, HTTPStatus(status).phrase)

    def _body(self) -> Any:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return {}
        try:
            return json.loads(raw)
        except json.JSONDecodeError as exc:
            raise BadRequest(f"Invalid JSON body: {exc.msg} at position {exc.pos}") from None

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        path = self.path.split("?", 1)[0]
        routes = {
            "/health": ("GET", self.health),
            "/health_generate": ("GET", self.health),
            "/server_info": ("GET", self.server_info),
            "/get_server_info": ("GET", self.server_info),
            "/model_info": ("GET", self.model_info),
            "/get_model_info": ("GET", self.model_info),
            "/v1/models": ("GET", self.models),
            "/generate": ("POST", self.generate),
            "/v1/completions": ("POST", self.completions),
            "/flush_cache": ("ANY", self.flush_cache),
            "/metrics": ("GET", self.metrics),
        }
        route = routes.get(path)
        if route is None or (path == "/metrics" and not self.sim.args.enable_metrics):
            self._send(404, {"detail": "Not Found"})
            return
        if route[0] != "ANY" and route[0] != method:
            self._send(405, {"detail": "Method Not Allowed"})
            return
        try:
            route[1]()
        except BadRequest as exc:
            if path.startswith("/v1/"):
                self._send(
                    400,
                    {
                        "object": "error",
                        "message": str(exc),
                        "type": "BadRequestError",
                        "param": None,
                        "code": 400,
                    },
                )
            else:
                self._send(400, {"error": {"message": str(exc)}})
        except Exception as exc:  # a bug must answer 500, like FastAPI, not drop the connection
            self.sim.log.write(f"Exception in ASGI application\n{traceback.format_exc().rstrip()}")
            self._send(500, {"error": {"message": f"{type(exc).__name__}: {exc}"}})

    # -- endpoints -------------------------------------------------------------------------------
    def health(self) -> None:
        if not self.sim.ready or self.sim.stopping.is_set():
            self._send(503, b"", content_type="text/plain")
            return
        self.sim.generate_ids([0], 1, internal=True)
        self._send(200, b"", content_type="text/plain")

    def server_info(self) -> None:
        if self.path.startswith("/get_server_info"):
            self.sim.log.write(
                "Endpoint '/get_server_info' is deprecated and will be removed in a future version. Please use '/server_info' instead."
            )
        body = {
            **_args_dict(self.sim.args),
            "max_total_num_tokens": MAX_TOTAL_NUM_TOKENS,
            "max_req_input_len": CONTEXT_LEN - 1,
            "internal_states": [self.sim.scheduler.internal_state()],
            "version": SGLANG_VERSION,
            "sim": {
                "capture_boundaries": list(self.sim.engine.plan.boundaries) if self.sim.engine.plan else None
            },
        }
        self._send(200, body)

    def model_info(self) -> None:
        if self.path.startswith("/get_model_info"):
            self.sim.log.write(
                "Endpoint '/get_model_info' is deprecated and will be removed in a future version. Please use '/model_info' instead."
            )
        cfg = self.sim.engine.target_config
        self._send(
            200,
            {
                "model_path": self.sim.args.model_path,
                "tokenizer_path": self.sim.args.tokenizer_path,
                "is_generation": True,
                "preferred_sampling_params": None,
                "weight_version": "default",
                "has_image_understanding": False,
                "has_audio_understanding": False,
                "model_type": cfg.get("model_type", "llama"),
                "architectures": cfg.get("architectures"),
            },
        )

    def models(self) -> None:
        self._send(
            200,
            {
                "object": "list",
                "data": [
                    {
                        "id": self.sim.args.served_model_name,
                        "object": "model",
                        "created": int(time.time()),
                        "owned_by": "sglang",
                        "root": self.sim.args.served_model_name,
                        "max_model_len": CONTEXT_LEN,
                    }
                ],
            },
        )

    def _max_new(self, params: Any, key: str, default: int) -> int:
        value = params.get(key, default) if isinstance(params, dict) else default
        if value is None:
            value = default
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise BadRequest(f"{key} must be a non-negative integer, got {value!r}")
        return value

    def generate(self) -> None:
        body = self._body()
        if not isinstance(body, dict):
            raise BadRequest("The request body must be a JSON object.")
        text, ids = body.get("text"), body.get("input_ids")
        if (text is None) == (ids is None):
            raise BadRequest("Either text or input_ids should be provided.")
        max_new = self._max_new(body.get("sampling_params") or {}, "max_new_tokens", 128)
        tok = self.sim.engine.tokenizer
        batch = (
            isinstance(text, list)
            if text is not None
            else isinstance(ids, list) and bool(ids) and isinstance(ids[0], list)
        )
        prompts: list[list[int]]
        if text is not None:
            items = text if isinstance(text, list) else [text]
            if not all(isinstance(t, str) for t in items):
                raise BadRequest("text must be a string or a list of strings.")
            prompts = [tok.encode(t) for t in items]
        else:
            if not isinstance(ids, list):
                raise BadRequest("input_ids must be a list of integers or a list of lists.")
            prompts = ids if batch else [ids]
        outs = []
        for req in self.sim.generate_many(prompts, max_new):
            outs.append(
                {
                    "text": tok.decode(req.seq.output),
                    "output_ids": list(req.seq.output),
                    "meta_info": self.sim.meta_info(req),
                }
            )
        if body.get("stream"):
            chunks = (
                b"".join(b"data: " + json.dumps(o).encode() + b"\n\n" for o in outs) + b"data: [DONE]\n\n"
            )
            self._send(200, chunks, content_type="text/event-stream")
            return
        self._send(200, outs if batch else outs[0])

    def completions(self) -> None:
        body = self._body()
        if not isinstance(body, dict) or "prompt" not in body:
            raise BadRequest("'prompt' is a required property")
        prompt = body["prompt"]
        items = prompt if isinstance(prompt, list) else [prompt]
        if not all(isinstance(p, str) for p in items):
            raise BadRequest("prompt must be a string or a list of strings")
        max_new = self._max_new(body, "max_tokens", 16)
        tok = self.sim.engine.tokenizer
        choices, prompt_tokens, completion_tokens = [], 0, 0
        reqs = self.sim.generate_many([tok.encode(p) for p in items], max_new)
        for i, req in enumerate(reqs):
            seq = req.seq
            prompt_tokens += len(seq.prompt)
            completion_tokens += len(seq.output)
            choices.append(
                {
                    "index": i,
                    "text": tok.decode(seq.output),
                    "logprobs": None,
                    "finish_reason": "stop" if seq.finished == "stop" else "length",
                    "matched_stop": tok.eos_id if seq.finished == "stop" else None,
                }
            )
        self._send(
            200,
            {
                "id": uuid.uuid4().hex,
                "object": "text_completion",
                "created": int(time.time()),
                "model": body.get("model") or self.sim.args.served_model_name,
                "choices": choices,
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            },
        )

    def flush_cache(self) -> None:
        if self.sim.scheduler.flush_cache():
            self._send(
                200,
                "Cache flushed.\nPlease check backend logs for more details. (When there are running or waiting "
                "requests, the operation will not be performed.)\n",
                content_type="text/plain",
            )
        else:
            self._send(
                400, "Cache not flushed because there are pending requests.\n", content_type="text/plain"
            )

    def metrics(self) -> None:
        s = self.sim.scheduler
        labels = (
            f'model_name="{self.sim.args.served_model_name}",engine_type="unified",tp_rank="0",pp_rank="0"'
        )
        gauges = {
            "num_running_reqs": ("The number of running requests.", len(s.running)),
            "num_queue_reqs": ("The number of requests in the waiting queue.", s.waiting.qsize()),
            "num_used_tokens": ("The number of used tokens.", s._num_tokens()),
            "token_usage": ("The token usage.", s._num_tokens() / MAX_TOTAL_NUM_TOKENS),
            "gen_throughput": ("The generation throughput (token/s).", s.last_gen_throughput),
            "cache_hit_rate": ("The prefix cache hit rate.", 0.0),
            "max_total_num_tokens": (
                "Maximum total number of tokens in the KV cache pool.",
                MAX_TOTAL_NUM_TOKENS,
            ),
            "is_cuda_graph": ("Whether the batch is using CUDA graph.", 0.0),
        }
        if self.sim.args.speculative_algorithm:
            gauges["spec_accept_length"] = (
                "The average acceptance length of speculative decoding.",
                s.last_accept_len or 0.0,
            )
            gauges["spec_accept_rate"] = (
                "The average acceptance rate of speculative decoding (`accepted tokens / total draft tokens` in batch).",
                s.last_accept_rate or 0.0,
            )
        lines = []
        for name, (doc, value) in gauges.items():
            lines += [
                f"# HELP sglang:{name} {doc}",
                f"# TYPE sglang:{name} gauge",
                f"sglang:{name}{{{labels}}} {float(value)}",
            ]
        counters = {
            "prompt_tokens": ("Number of prefill tokens processed.", s.prompt_tokens_total),
            "generation_tokens": ("Number of generation tokens processed.", s.generation_tokens_total),
            "num_requests": ("The number of processed requests.", s.num_requests_total),
        }
        for name, (doc, value) in counters.items():
            lines += [
                f"# HELP sglang:{name}_total {doc}",
                f"# TYPE sglang:{name}_total counter",
                f"sglang:{name}_total{{{labels}}} {float(value)}",
            ]
        self._send(200, "\n".join(lines) + "\n", content_type="text/plain; version=0.0.4; charset=utf-8")


# --------------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    style = STYLE_ALIASES.get(ns.sim_log_style, ns.sim_log_style)
    log = LogWriter(sys.stdout, style=style)
    model_path = Path(ns.model_path)
    if not (model_path / "config.json").exists():
        log.write(f"Error: the model path {ns.model_path} has no config.json")
        return 1
    target_cfg = json.loads((model_path / "config.json").read_text())
    arch = (target_cfg.get("architectures") or ["LlamaForCausalLM"])[0]
    try:
        args = effective_args(ns, arch)
    except AssertionError as exc:
        log.write(f"AssertionError: {exc}")
        return 1
    if args.speculative_algorithm not in (None, "EAGLE3"):
        log.write(f"Error: the sim server simulates EAGLE3 only, not {args.speculative_algorithm}")
        return 2
    if args.speculative_algorithm and not args.speculative_draft_model_path:
        log.write("Error: --speculative-draft-model-path is required with --speculative-algorithm")
        return 2
    for w in args.warnings:
        log.write(w)
    log.write(f"server_args=ServerArgs({', '.join(f'{k}={v!r}' for k, v in _args_dict(args).items())})")
    if args.speculative_eagle_topk and args.speculative_eagle_topk > 1:
        log.write(
            f"sim: speculative_eagle_topk={args.speculative_eagle_topk} runs as a chain of "
            f"{args.speculative_num_steps} steps (topk 1); tree drafting is not simulated"
        )

    stop = threading.Event()
    holder: dict[str, SimServer] = {}

    def on_term(signum: int, frame: Any) -> None:
        stop.set()
        srv = holder.get("server")
        if srv is not None:
            srv.shutdown()
        else:
            raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)

    from eagle3_tui.sim.engine import Engine

    log.write("Load weight begin. avail mem=126.00 GB", scheduler=True)
    t0 = time.monotonic()
    try:
        engine = Engine(
            model_path,
            Path(args.speculative_draft_model_path) if args.speculative_algorithm else None,
            num_steps=args.speculative_num_steps or 0,
            embed_patch=ns.sim_embed_capture_patch,
        )
    except Exception as exc:
        log.write(f"Scheduler hit an exception: {traceback.format_exc().rstrip()}", scheduler=True)
        log.write("Received sigquit from a child process. It usually means the child failed.")
        del exc
        return 1
    log.write(
        f"Load weight end. type={arch}, dtype=torch.float32, avail mem=126.00 GB, mem usage=0.01 GB.",
        scheduler=True,
    )
    if engine.draft is not None:
        draft_arch = (engine.draft_config.get("architectures") or ["LlamaForCausalLMEagle3"])[0]
        log.write(
            f"Load weight end. type={draft_arch}, dtype=torch.float32, avail mem=126.00 GB, mem usage=0.00 GB.",
            scheduler=True,
        )
    log.write(
        f"KV Cache is allocated. #tokens: {MAX_TOTAL_NUM_TOKENS}, K size: 0.05 GB, V size: 0.05 GB",
        scheduler=True,
    )
    try:
        engine.warmup(engine.tokenizer.encode("The capital city of France is"))
    except Exception:
        log.write(f"Scheduler hit an exception: {traceback.format_exc().rstrip()}", scheduler=True)
        log.write("Received sigquit from a child process. It usually means the child failed.")
        return 1
    log.write(
        f"max_total_num_tokens={MAX_TOTAL_NUM_TOKENS}, chunked_prefill_size={args.chunked_prefill_size or 8192}, "
        f"max_prefill_tokens=16384, max_running_requests={args.max_running_requests or 64}, "
        f"context_len={CONTEXT_LEN}, available_gpu_mem=126.00 GB",
        scheduler=True,
    )
    if engine.plan is not None:
        log.write(
            f"sim: EAGLE3 aux hidden states captured at boundaries {list(engine.plan.boundaries)} "
            f"(layers_to_capture={list(engine.plan.layers_to_capture)}, "
            f"capture_embedding={engine.plan.capture_embedding}); load took {time.monotonic() - t0:.2f}s"
        )
    if stop.is_set():
        return 0
    server = SimServer(args, engine, log, max(0, ns.sim_background_load), ns.sim_bg_max_new_tokens)
    holder["server"] = server
    try:
        server.serve()
    except OSError as exc:
        log.write(
            f"ERROR:    [Errno {exc.errno}] error while attempting to bind on address ('{args.host}', {args.port}): {exc.strerror}"
        )
        return 1
    server.scheduler.stop()
    if server.scheduler.failed:
        return 1
    log.write("INFO:     Shutting down")
    log.write(f"INFO:     Finished server process [{os.getpid()}]")
    return 0


if __name__ == "__main__":
    sys.exit(main())
