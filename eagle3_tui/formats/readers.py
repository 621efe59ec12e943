"""The one validating reader for what users and hosts hand us: bytes in, a value or one sentence out.

JSON read here refuses what Python's `json` would let through or die on: invalid UTF-8, NaN and
Infinity (not JSON numbers; SGLang would fail on them or compute garbage), numbers too large for a
float, nesting past the interpreter's recursion limit, and the wrong top-level type. Text files
(prompts) must be UTF-8 without NUL bytes. Every failure is a `UserError` whose message names what
was read (`what`) and what is wrong, so it is shown as is: in the CLI, the status bar, a finding.
Standard library only (Python 3.8+): the check's zip ships it to the GPU host (eagle/shipped.py).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from eagle3_tui.errors import UserError


class _NotFinite(ValueError):
    def __init__(self, word: str) -> None:
        super().__init__(word)
        self.word = word


def _refuse_constant(word: str) -> Any:
    raise _NotFinite(word)


def _finite_float(text: str) -> float:
    v = float(text)
    if not math.isfinite(v):
        raise _NotFinite(text)
    return v


def decode_utf8(data: bytes | str, what: str) -> str:
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise UserError(f"{what} is not UTF-8 text (byte {err.start} is {data[err.start]:#04x})") from None


def parse_json(data: bytes | str, what: str) -> Any:
    """Any JSON value; see the module docstring for what is refused."""
    text = decode_utf8(data, what)
    try:
        return json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except _NotFinite as err:
        raise UserError(f"{what} holds {err.word}, which is not a JSON number") from None
    except json.JSONDecodeError as err:
        raise UserError(f"{what} is not valid JSON: {err.msg} (line {err.lineno}, column {err.colno})") from None
    except RecursionError:
        raise UserError(f"{what} is nested too deeply to read") from None


def kind_of(value: Any) -> str:
    """How JSON would call this value's type."""
    if isinstance(value, bool):
        return "boolean"
    if value is None:
        return "null"
    return {dict: "object", list: "list", str: "string", int: "number", float: "number"}.get(type(value), "value")


def json_object(data: bytes | str, what: str) -> dict[str, Any]:
    """A JSON object (a dict), else a UserError naming what it was instead."""
    value = parse_json(data, what)
    if not isinstance(value, dict):
        raise UserError(f"{what} is a JSON {kind_of(value)}, not an object")
    return value


def sub_object(parent: dict[str, Any], key: str, what: str) -> dict[str, Any]:
    """`parent[key]` when it is an object, {} when absent or null; a wrong type is refused."""
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UserError(f"{what}: {key} is a JSON {kind_of(value)}, not an object")
    return value


def text_file(path: str | Path, what: str) -> str:
    """A UTF-8 text file (no NUL bytes: a binary file is refused, not read as text)."""
    try:
        data = Path(path).read_bytes()
    except OSError as err:
        raise UserError(f"cannot read {what} {path}: {err.strerror or err}") from None
    if b"\0" in data:
        raise UserError(f"{what} {path} is a binary file, not text")
    return decode_utf8(data, f"{what} {path}")
