"""Writing settings back into hosts.toml: a few keys of one host's table, the rest of the file kept.

The console learns some settings where the operator is (the training data's glob and slots); they
belong in the host's profile so the next attach knows them. The file is edited as text, line by line,
so every other table, key and comment stays as written: the key's line is replaced where the table has
it, else added at the end of the table's own keys; a missing table is appended. The result is parsed
again and must read back as the old file with just these values changed, else nothing is written.
The write is atomic and durable (temp file, fsync, rename).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from eagle3_tui.errors import UserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on 3.10
    import tomli as tomllib

Value = str | Sequence[int]

_HEADER = re.compile(r"^\s*\[(?!\[)([^\]]*(?:\"[^\"]*\"[^\]]*)*)\]\s*(?:#.*)?$")
_ANY_HEADER = re.compile(r"^\s*\[")
_STRING = re.compile(r"\"(?:\\.|[^\"\\])*\"|'[^']*'")
_BARE = re.compile(r"^[A-Za-z0-9_-]+$")


def toml_value(value: Value) -> str:
    """A string as a TOML basic string (JSON's escapes are TOML's), integers as an inline array."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return "[" + ", ".join(str(int(v)) for v in value) + "]"


def _key(name: str) -> str:
    return name if _BARE.match(name) else json.dumps(name, ensure_ascii=False)


def _header_table(line: str) -> tuple[str, ...] | None:
    """The dotted key of a `[table]` header line (None: not a plain table header)."""
    m = _HEADER.match(line)
    if m is None:
        return None
    try:
        data: Any = tomllib.loads(f"[{m.group(1)}]\n")
    except tomllib.TOMLDecodeError:
        return None
    path: list[str] = []
    while isinstance(data, dict) and len(data) == 1:
        (k, data), = data.items()
        path.append(k)
    return tuple(path)


def _value_end(lines: list[str], start: int) -> int:
    """The index after the last line of the `key = value` starting at `start` (a multi-line array)."""
    depth, i = 0, start
    while i < len(lines):
        code = _STRING.sub('""', lines[i]).split("#", 1)[0]
        depth += code.count("[") - code.count("]")
        i += 1
        if depth <= 0:
            return i
    return i


def edit_table(text: str, table: str, values: Mapping[str, Value]) -> str:
    """`text` with `values` set in `[table]` (see the module docstring); pure."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if _header_table(line) == (table,)), None)
    if start is None:
        block = [f"[{_key(table)}]", *(f"{_key(k)} = {toml_value(v)}" for k, v in values.items())]
        sep = [""] if lines and lines[-1].strip() else []
        return "\n".join([*lines, *sep, *block]) + "\n"
    end = next((i for i in range(start + 1, len(lines)) if _ANY_HEADER.match(lines[i])), len(lines))
    for name, value in values.items():
        pattern = re.compile(rf"^\s*(?:{re.escape(name)}|\"{re.escape(name)}\")\s*=")
        at = next((i for i in range(start + 1, end) if pattern.match(lines[i])), None)
        new = f"{_key(name)} = {toml_value(value)}"
        if at is None:
            last = max((i for i in range(start, end) if lines[i].strip() and not lines[i].lstrip().startswith("#")),
                       default=start)
            lines.insert(last + 1, new)
            end += 1
        else:
            stop = _value_end(lines, at)
            lines[at:stop] = [new]
            end -= stop - at - 1
    return "\n".join(lines) + "\n"


def _normal(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


def save_profile_values(path: Path | str, table: str, values: Mapping[str, Value]) -> None:
    """Set `values` in host `table` of the hosts.toml at `path` (made when absent); one sentence on failure."""
    from eagle3_tui.remote.atomic import replace_local

    p = Path(path).expanduser()
    try:
        old_text = p.read_text(encoding="utf-8") if p.exists() else ""
        old = tomllib.loads(old_text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as err:
        raise UserError(f"cannot save to {p}: it cannot be read as TOML ({err})") from None
    new_text = edit_table(old_text, table, values)
    want = {k: dict(v) if isinstance(v, dict) else v for k, v in old.items()}
    want[table] = {**(old.get(table) or {}), **{k: _normal(v) for k, v in values.items()}}
    try:
        got = tomllib.loads(new_text)
    except tomllib.TOMLDecodeError:
        got = None
    if got != want:
        raise UserError(f"cannot save to {p}: the host table {table!r} is written in a form this editor does not "
                        f"change safely; add {', '.join(values)} by hand")
    try:
        replace_local(p, new_text.encode("utf-8"))
    except OSError as err:
        raise UserError(f"cannot save to {p}: {err.strerror or err}") from None
