"""The sim server's HTTP routes: SGLang's endpoints and error shapes over a `SimServer`.

`/health` (a 1-token generate), `/server_info` and `/get_server_info`, `/model_info`, `/v1/models`,
`/generate` (text or ids, single or batch, `stream`), `/v1/completions`, `/v1/chat/completions` (the
tokenizer folder's chat template, `sim/chat.py`), `/flush_cache`, `/metrics`
(with `--enable-metrics`). Every response writes a uvicorn-style access line to the log.
"""

from __future__ import annotations

import json
import time
import traceback
import uuid
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler
from typing import Any

from eagle3_tui.sglang.installed.source import version_key
from eagle3_tui.sim.flags import args_dict
from eagle3_tui.sim.scheduler import CONTEXT_LEN, MAX_TOTAL_NUM_TOKENS
from eagle3_tui.sim.service import BadRequest, SimServer


def _decode_boundaries(engine: Any) -> list[int] | None:
    """What decode feeds the draft (the release's graphs may replay other boundaries than prefill's)."""
    if engine.plan is None:
        return None
    return list(engine.decode_boundaries if engine.decode_boundaries is not None else engine.plan.boundaries)


def handler_for(server: SimServer) -> type[BaseHTTPRequestHandler]:
    """The request handler class bound to `server` (http.server builds one handler per request)."""

    class Handler(_Handler):
        sim = server

    return Handler


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

    def _authorized(self, path: str) -> bool:
        """SGLang's --api-key: every endpoint but /health and /metrics wants `Authorization: Bearer KEY`."""
        key = self.sim.args.api_key
        return not key or path in ("/health", "/metrics") or self.headers.get("authorization") == f"Bearer {key}"

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
            "/v1/chat/completions": ("POST", self.chat_completions),
            "/flush_cache": ("ANY", self.flush_cache),
            "/metrics": ("GET", self.metrics),
        }
        route = routes.get(path)
        if route is None or (path == "/metrics" and not self.sim.args.enable_metrics):
            self._send(404, {"detail": "Not Found"})
            return
        if not self._authorized(path):
            self._send(401, {"error": "Unauthorized"})
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
            **args_dict(self.sim.args),
            "max_total_num_tokens": MAX_TOTAL_NUM_TOKENS,
            "max_req_input_len": (self.sim.args.context_length or CONTEXT_LEN) - 1,
            "internal_states": [self.sim.scheduler.internal_state()],
            "version": self.sim.args.sglang_version,
            "sim": {
                "capture_boundaries": list(self.sim.engine.plan.boundaries) if self.sim.engine.plan else None,
                "decode_boundaries": _decode_boundaries(self.sim.engine),
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

    def chat_completions(self) -> None:
        """SGLang's ChatCompletionResponse (0.5.23 `entrypoints/openai/protocol.py`) for one conversation."""
        from eagle3_tui.sim.chat import chat_messages, chat_template, render_chat
        from eagle3_tui.sim.hf_tokenizer import BOS, EOS

        body = self._body()
        messages = chat_messages(body)
        key = "max_completion_tokens" if body.get("max_completion_tokens") is not None else "max_tokens"
        max_new = self._max_new(body, key, 128)
        prompt = render_chat(chat_template(self.sim.args.tokenizer_path), messages, bos=BOS, eos=EOS)
        tok = self.sim.engine.tokenizer
        req = self.sim.generate_many([tok.encode(prompt, add_bos=False)], max_new)[0]
        seq, stopped = req.seq, req.seq.finished == "stop"
        self._send(
            200,
            {
                "id": uuid.uuid4().hex,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model") or self.sim.args.served_model_name,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": tok.decode(seq.output), "reasoning_content": None},
                        "logprobs": None,
                        "finish_reason": "stop" if stopped else "length",
                        "matched_stop": tok.eos_id if stopped else None,
                    }
                ],
                "usage": {
                    "prompt_tokens": len(seq.prompt),
                    "total_tokens": len(seq.prompt) + len(seq.output),
                    "completion_tokens": len(seq.output),
                    "prompt_tokens_details": None,
                    "reasoning_tokens": 0,
                    "completion_tokens_details": None,
                },
                "metadata": {"weight_version": "default"},
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
        """SGLang's scheduler gauges and counters by their real names and labels: `SchedulerMetricsCollector`
        in 0.4.9/0.5.6 `sglang/srt/metrics/collector.py`, labels from 0.5.6 `managers/scheduler_metrics_mixin.py`;
        0.5.12+ (`sglang/srt/observability/`) adds the `moe_ep_rank` label."""
        s = self.sim.scheduler
        labels = (
            f'model_name="{self.sim.args.served_model_name}",engine_type="unified",tp_rank="0",pp_rank="0"'
        )
        if version_key(self.sim.args.sglang_version) >= version_key("0.5.12"):
            labels += ',moe_ep_rank="0"'
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

