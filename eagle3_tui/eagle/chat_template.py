"""Chat templates: the served tokenizer's, rendered for a benchmark; the training data's, named; their families.

A draft trained on chat-formatted conversations predicts the tokens that follow the template's role headers.
Sent raw prompts, it sees text it never saw in training and its accept length collapses; served with a
different template's headers, the same. The benchmark therefore renders the served model's own template
(as the server's chat endpoint does: Hugging Face's Jinja environment, one user turn, the generation prompt),
and the doctor compares the template family served with the one the training data was made with.

Families are told by the special tokens each template writes (Llama 3 `<|start_header_id|>`, ChatML
`<|im_start|>`, ...), so a Jinja text and a name (speculators' `data.chat_template`, SpecForge's
`--chat-template`) compare. Pure: text in, text out; jinja2 is imported only to render.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from eagle3_tui.errors import UserError

# (family, markers any of which the template text writes, names trainers give it)
FAMILIES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("llama3", ("<|start_header_id|>",), ("llama3", "llama-3", "llama31", "llama32", "llama33")),
    ("llama4", ("<|header_start|>",), ("llama4",)),
    ("gpt-oss", ("<|channel|>",), ("gpt-oss", "gptoss", "harmony")),
    ("kimi", ("<|im_user|>", "<|im_assistant|>"), ("kimi", "kimi-k2", "kimik2")),
    ("chatml", ("<|im_start|>",), ("chatml", "qwen", "qwen2", "qwen25", "qwen3", "qwen2-vl", "qwen25-vl",
                                   "phi4", "hermes")),
    ("deepseek", ("<｜User｜>", "<｜Assistant｜>"), ("deepseek", "deepseek-v3", "deepseek-r1", "deepseekv3")),
    ("gemma", ("<start_of_turn>",), ("gemma", "gemma2", "gemma3")),
    ("phi3", ("<|user|>",), ("phi3", "phi-3", "phi35")),
    ("mistral", ("[INST]",), ("mistral", "mixtral", "llama2", "llama-2")),
)


@dataclass(frozen=True)
class ServedTemplate:
    """The chat template the server applies: its Jinja text (None when only a name is known), where it came
    from, and the tokenizer's special tokens the template may write."""

    text: str | None
    source: str
    name: str | None = None
    """A named template (SGLang's `--chat-template NAME`): the server renders its own, not this text."""
    bos_token: str | None = None
    eos_token: str | None = None
    adds_bos: bool = False
    """Whether the tokenizer puts BOS in front of any text it encodes (`add_bos_token`)."""

    @property
    def family(self) -> str | None:
        return family_of(self.text) if self.text else family_of(self.name)

    def describe(self) -> str:
        fam = self.family
        what = f"template {self.name!r}" if self.name and not self.text else "chat template"
        return f"{what} ({fam or 'unknown family'}) from {self.source}"


def family_of(template: str | None) -> str | None:
    """The template family of a Jinja text (by the tokens it writes) or of a trainer's name; None: unknown."""
    if not template:
        return None
    if "{%" in template or "{{" in template or "<|" in template or "[INST]" in template:
        for fam, markers, _ in FAMILIES:
            if any(m in template for m in markers):
                return fam
        return None
    key = re.sub(r"[^a-z0-9-]", "", template.strip().lower().replace("_", "-").replace(".", ""))
    for fam, _, names in FAMILIES:
        if key == fam or key in names or any(key.startswith(n) for n in names if len(n) >= 4):
            return fam
    return None


def _token(value: Any) -> str | None:
    """A special token as tokenizer_config.json writes it: a string, or an AddedToken dict with `content`."""
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return str(value["content"])
    return None


def template_text(value: Any) -> str | None:
    """`chat_template` as tokenizer_config.json (or chat_template.json) holds it: a string, or a list of
    {"name", "template"} where "default" is the one a chat request gets."""
    if isinstance(value, str) and value.strip():
        return value
    if isinstance(value, list):
        named = {str(v.get("name")): v.get("template") for v in value if isinstance(v, Mapping)}
        chosen = named.get("default")
        if chosen is None and named:
            chosen = next(iter(named.values()))
        return chosen if isinstance(chosen, str) and chosen.strip() else None
    return None


def served_template(
    tokenizer_config: Mapping[str, Any] | None,
    tokenizer_dir: str,
    *,
    jinja_file: str | None = None,
    json_file: str | None = None,
    flag: str | None = None,
    flag_text: str | None = None,
) -> ServedTemplate | None:
    """What the server applies to a chat request, in SGLang's order: `--chat-template` (a file's text, or
    a built-in name), else the tokenizer folder's `chat_template.jinja`, `chat_template.json`, or the
    `chat_template` of its tokenizer_config.json. None when the tokenizer has none."""
    cfg = tokenizer_config or {}
    bos, eos = _token(cfg.get("bos_token")), _token(cfg.get("eos_token"))
    adds = bool(cfg.get("add_bos_token", False))

    def made(text: str | None, source: str, name: str | None = None) -> ServedTemplate:
        return ServedTemplate(text, source, name, bos, eos, adds)

    if flag:
        if flag_text is not None:
            text = _json_template(flag_text) if flag.endswith(".json") else flag_text
            if text and text.strip():
                return made(text, f"--chat-template {flag}")
        return made(None, f"--chat-template {flag}", name=flag)
    if jinja_file is not None and jinja_file.strip():
        return made(jinja_file, f"{tokenizer_dir}/chat_template.jinja")
    text = _json_template(json_file) if json_file is not None else None
    if text:
        return made(text, f"{tokenizer_dir}/chat_template.json")
    text = template_text(cfg.get("chat_template"))
    if text:
        return made(text, f"{tokenizer_dir}/tokenizer_config.json")
    return None


def _json_template(text: str) -> str | None:
    """chat_template.json's `chat_template`; None when the file is not that."""
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return template_text(data.get("chat_template")) if isinstance(data, dict) else None


def render(t: ServedTemplate, prompt: str) -> str:
    """One user turn and the generation prompt, rendered as Hugging Face's `apply_chat_template` renders it
    (sandboxed Jinja, trim_blocks, lstrip_blocks). A leading BOS the template writes is dropped when the
    tokenizer adds its own, since /generate encodes the text with the tokenizer's special tokens."""
    if t.text is None:
        raise UserError(f"the served {t.describe()} has no text to render")
    import jinja2
    import jinja2.sandbox
    from jinja2.ext import loopcontrols

    def raise_exception(message: str) -> None:
        raise jinja2.TemplateError(message)

    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                                       extensions=[loopcontrols])
    env.filters["tojson"] = lambda x, indent=None, **_: json.dumps(x, ensure_ascii=False, indent=indent)
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: __import__("time").strftime(fmt)
    try:
        out = env.from_string(t.text).render(
            messages=[{"role": "user", "content": prompt}], add_generation_prompt=True,
            bos_token=t.bos_token or "", eos_token=t.eos_token or "", tools=None, documents=None,
        )
    except jinja2.TemplateError as err:
        raise UserError(f"the served chat template ({t.source}) cannot be rendered: {err}") from None
    if t.adds_bos and t.bos_token and out.startswith(t.bos_token):
        out = out[len(t.bos_token):]
    return out


@dataclass(frozen=True)
class TrainedTemplate:
    """The chat template the training data was made with, as its generator recorded it."""

    template: str
    source: str

    @property
    def family(self) -> str | None:
        return family_of(self.template)


def trained_template(data_config: Mapping[str, Any], source: str) -> TrainedTemplate | None:
    """speculators' data_config.json (`data.chat_template`, a name or a Jinja text), or a config with a
    top-level `chat_template` (SpecForge's `--chat-template` kept beside the data); None when it says none."""
    data = data_config.get("data")
    for value in ((data or {}).get("chat_template") if isinstance(data, Mapping) else None,
                  data_config.get("chat_template")):
        text = template_text(value)
        if text:
            return TrainedTemplate(text, source)
    return None
