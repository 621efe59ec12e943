"""The sim's `/v1/chat/completions` prompt: the messages rendered by the chat template of the tokenizer folder
the server was given, as real SGLang renders them (`serving_chat.py` through the tokenizer's
`apply_chat_template`: a sandboxed Jinja template with `trim_blocks`/`lstrip_blocks`, tokenized without BOS).

The demo world's folder (`hf_tokenizer.FOLDER`, written for real SGLang) carries a plain template; a tokenizer
path without one has no chat route, and the request is answered 400 with the reason, as SGLang answers it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eagle3_tui.sim.hf_tokenizer import FOLDER
from eagle3_tui.sim.service import BadRequest


def chat_template(tokenizer_path: str | Path) -> str | None:
    """The `chat_template` of `tokenizer_config.json` in the tokenizer path (or its Hugging Face folder)."""
    base = Path(tokenizer_path)
    for folder in (base, base / FOLDER):
        try:
            cfg = json.loads((folder / "tokenizer_config.json").read_text())
        except (OSError, ValueError):
            continue
        template = cfg.get("chat_template") if isinstance(cfg, dict) else None
        if isinstance(template, str):
            return template
    return None


def chat_messages(body: Any) -> list[dict[str, str]]:
    """The request's messages (role and string content each); BadRequest naming what is wrong."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' is a required property and must be a non-empty list")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise BadRequest(f"messages[{i}] must be an object with a string 'role' and a string 'content'")
        out.append({"role": m["role"], "content": m["content"]})
    return out


def render_chat(template: str | None, messages: list[dict[str, str]], *, bos: str, eos: str) -> str:
    """The prompt text for `messages` with the generation prompt added."""
    if template is None:
        raise BadRequest("As of transformers v4.44, default chat template is no longer allowed, so you must "
                         "provide a chat template if the tokenizer does not define one.")
    from jinja2.exceptions import TemplateError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    try:
        return env.from_string(template).render(messages=messages, add_generation_prompt=True,
                                                bos_token=bos, eos_token=eos)
    except TemplateError as err:
        raise BadRequest(f"the chat template failed: {err}") from None
