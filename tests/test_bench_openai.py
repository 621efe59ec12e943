"""Benchmarking a vLLM server through its OpenAI API: the answers vLLM 0.32 gave (tests/vllm_samples) read as
benchmark results, and a run against a fake OpenAI server.

The fake (a ThreadingHTTPServer on 127.0.0.1 answering the captured vLLM answers) stands in for vLLM here
because a real one takes a minute and 3 GB to start; it exists to show the failure paths (a 400 for
max_tokens past the context, an answer without choices or usage) that a healthy vLLM does not give on
demand. The real server's run is tests/test_vllm_real.py::test_bench_cli_on_real_vllm.
"""

from __future__ import annotations

import copy
import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eagle3_tui.commands.hostcmds import format_bench
from eagle3_tui.engines import get_engine
from eagle3_tui.errors import UserError
from eagle3_tui.session.measure.senders import OpenAISender, bench_sender, openai_result
from eagle3_tui.sglang.client import (
    ChatMode,
    Prompt,
    ServerUnavailable,
    SGLangClient,
    SGLangSender,
    run_benchmark,
)
from eagle3_tui.vllm.api import request_spec

SAMPLES = Path(__file__).parent / "vllm_samples"
CHAT = json.loads((SAMPLES / "chat_completion_detailed.json").read_text())
RAW = json.loads((SAMPLES / "completion_detailed.json").read_text())


def test_a_chat_answer_as_a_result() -> None:
    r = openai_result(CHAT, 0.5, "/v1/chat/completions")
    spec = request_spec(CHAT)
    assert spec is not None
    assert r.text == CHAT["choices"][0]["message"]["content"] and r.completion_tokens == 16
    assert (r.spec_verify_ct, r.spec_accept_length) == (8, 2.125)
    # vLLM's accept length counts each verify step's bonus token plus its accepted drafts (the prefill token aside)
    assert r.spec_tokens == 8 + 9 and r.spec_tokens / r.spec_verify_ct == spec.mean_acceptance_length
    assert r.per_position == spec.per_position == (0.5, 3 / 8, 2 / 8)


def test_a_raw_answer_and_one_without_spec_metrics() -> None:
    r = openai_result(RAW, 0.5, "/v1/completions")
    assert r.text == RAW["choices"][0]["text"] and r.completion_tokens == 32
    assert r.spec_accept_length == pytest.approx(34 / 11) and r.spec_tokens == 34
    plain = openai_result({**RAW, "metrics": None}, 0.5, "/v1/completions")  # a baseline: no speculation
    assert plain.spec_verify_ct is None and plain.spec_accept_length is None and plain.per_position == ()


@pytest.mark.parametrize(("answer", "says"), [
    ({**CHAT, "choices": []}, "has no choices"),
    ({k: v for k, v in CHAT.items() if k != "choices"}, "has no choices"),
    ({k: v for k, v in CHAT.items() if k != "usage"}, "has no usage.completion_tokens"),
    ({**CHAT, "usage": {"completion_tokens": "16"}}, "has no usage.completion_tokens"),
    ([CHAT], "is a JSON list, not an object"),
])
def test_a_broken_answer_is_one_sentence(answer: Any, says: str) -> None:
    with pytest.raises(UserError, match=says) as err:
        openai_result(answer, 0.1, "/v1/chat/completions")
    assert "\n" not in str(err.value) and "/v1/chat/completions" in str(err.value)


def test_the_serving_engine_chooses_the_requests() -> None:
    chat = ChatMode("chatml (the served tokenizer's)")
    assert isinstance(bench_sender(get_engine("sglang"), chat), SGLangSender)
    v = bench_sender(get_engine("vllm"), chat)
    assert isinstance(v, OpenAISender) and v.prompt_format == "chat" and v.path == "/v1/chat/completions"
    assert v.describe() == "chatml (the served tokenizer's); sent to /v1/chat/completions (the server applies it)"
    raw = bench_sender(get_engine("vllm"), None)
    assert isinstance(raw, OpenAISender) and raw.prompt_format == "raw" and raw.path == "/v1/completions"
    assert raw.describe() is None


MODEL = "/tmp/w24v/target"
CONTEXT_400 = {"error": {"message": "This model's maximum context length is 1024 tokens. However, you requested "
                                    "2000 output tokens and your prompt contains 9 input tokens.",
                         "type": "BadRequestError", "param": "max_tokens", "code": 400}}


class FakeOpenAI(http.server.BaseHTTPRequestHandler):
    """Answers like vLLM 0.32: /v1/models; completions echo a captured answer chosen by the prompt."""

    bodies: list[tuple[str, dict[str, Any]]]

    def log_message(self, *a: Any) -> None:
        pass

    def _send(self, code: int, data: Any) -> None:
        body = json.dumps(data).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
        else:
            self._send(404, {"detail": "Not Found"})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
        type(self).bodies.append((self.path, body))
        if self.path not in ("/v1/chat/completions", "/v1/completions"):
            self._send(404, {"detail": "Not Found"})
            return
        text = body["messages"][0]["content"] if "messages" in body else body["prompt"]
        answer = copy.deepcopy(CHAT if "messages" in body else RAW)
        if text.startswith("long"):
            self._send(400, CONTEXT_400)
        elif text.startswith("empty"):
            self._send(200, {k: v for k, v in answer.items() if k not in ("choices", "usage")})
        else:
            self._send(200, answer)


@pytest.fixture
def fake_openai() -> Iterator[tuple[str, list[tuple[str, dict[str, Any]]]]]:
    handler = type("Handler", (FakeOpenAI,), {"bodies": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler.bodies
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


async def test_a_chat_run_with_failures_counted(fake_openai) -> None:
    url, bodies = fake_openai
    prompts = [Prompt("one", "writing"), Prompt("long prompt", "writing"), Prompt("two", "coding"),
               Prompt("empty answer", "coding")]
    sender = OpenAISender(chat=True, template="chatml")
    async with SGLangClient(url) as c:
        r = await run_benchmark(c, prompts, num_prompts=8, concurrency=2, max_tokens=16, sender=sender)
    assert (r.ok, r.errors, r.prompt_format) == (4, 4, "chat")
    assert r.chat_template == "chatml; sent to /v1/chat/completions (the server applies it)"
    assert any("HTTP 400: This model's maximum context length is 1024 tokens" in m for m in r.error_messages)
    assert any(m == "the server's /v1/chat/completions answer has no choices" for m in r.error_messages)
    assert r.accept_len_client == pytest.approx(2.125) and r.spec_verify_ct == 32 and r.output_tokens == 64
    assert r.per_position == pytest.approx([0.5, 0.375, 0.25])
    assert {s.name: (s.requests, s.mean) for s in r.sets} == {"all": (4, 2.125), "writing": (2, 2.125),
                                                              "coding": (2, 2.125)}
    sent = [b for p, b in bodies if p == "/v1/chat/completions"]
    assert len(sent) == 8 and all(b["model"] == MODEL and b["temperature"] == 0.0 and b["max_tokens"] == 16
                                  and b["messages"][0]["role"] == "user" for b in sent)
    shown = format_bench(r, None)
    assert "per position      0.50 0.38 0.25" in shown and "errors            4:" in shown


async def test_a_raw_run_and_a_run_where_all_fail(fake_openai) -> None:
    url, bodies = fake_openai
    async with SGLangClient(url) as c:
        r = await run_benchmark(c, ["x", "y"], num_prompts=3, concurrency=1, max_tokens=8,
                                sender=OpenAISender(chat=False))
        assert (r.ok, r.errors, r.prompt_format, r.chat_template) == (3, 0, "raw", None)
        assert r.accept_len_client == pytest.approx(34 / 11)
        assert all(p == "/v1/completions" and b["prompt"] in ("x", "y") for p, b in bodies)
        with pytest.raises(ServerUnavailable) as err:
            await run_benchmark(c, ["long one"], num_prompts=2, concurrency=1, max_tokens=2000,
                                sender=OpenAISender(chat=False))
    msg = str(err.value)
    assert msg.startswith("every benchmark request failed: /v1/completions answered HTTP 400: This model's maximum")
    assert "\n" not in msg
