"""An OpenAI-compatible completion answer, read one way for every engine: its first choice, that
choice's text (a chat message's content, or a raw completion's text) and usage's completion tokens.
Each engine reads the per-request speculative fields it adds (SGLang's `sglext` and `meta_info`, vLLM's
`metrics`) in its own code; a malformed answer is one sentence naming the path that answered."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eagle3_tui.errors import UserError
from eagle3_tui.formats.readers import kind_of

CHAT_PATH = "/v1/chat/completions"
RAW_PATH = "/v1/completions"


@dataclass(frozen=True)
class OpenAIAnswer:
    text: str
    completion_tokens: int | None
    """usage.completion_tokens; None where the answer has no usage."""
    choice: Mapping[str, Any]


def read_openai_answer(data: Any, path: str) -> OpenAIAnswer:
    """UserError for an answer that is not an object or has no choices."""
    what = f"the server's {path} answer"
    if not isinstance(data, Mapping):
        raise UserError(f"{what} is a JSON {kind_of(data)}, not an object")
    choices = data.get("choices")
    if not (isinstance(choices, list) and choices and isinstance(choices[0], Mapping)):
        raise UserError(f"{what} has no choices")
    usage = data.get("usage")
    ct = usage.get("completion_tokens") if isinstance(usage, Mapping) else None
    first = choices[0]
    message = first.get("message")
    text = message.get("content") if isinstance(message, Mapping) else first.get("text")
    return OpenAIAnswer(str(text or ""), ct if isinstance(ct, int) and not isinstance(ct, bool) else None, first)
