"""The draft model's config.json: what SGLang reads from it, and minimal edits of its layer ids.

SGLang reads the aux layer ids only from the nested ``eagle_config.eagle_aux_hidden_state_layer_ids``
(inside a bare ``except``: a missing, malformed or top-level key silently means "use the default").
vLLM and speculators write a top-level ``eagle_aux_hidden_state_layer_ids`` that SGLang ignores;
speculators also keep the transformer settings (``rope_theta``...) under ``transformer_layer_config``.

`set_layer_ids` edits the text, not a re-serialised dict: only the ids change, key order,
indentation and every other byte stay as they were, so the diff the operator confirms is the
one line that matters and a rollback is byte for byte.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from eagle3_tui.eagle import wiring
from eagle3_tui.errors import UserError

IDS_KEY = "eagle_aux_hidden_state_layer_ids"
EAGLE_CONFIG = "eagle_config"


def _int_list(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, list) and all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        return tuple(value)
    return None


def _number(value: Any) -> float | None:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class DraftConfig:
    """The fields of a draft config.json that decide what SGLang does with the draft."""

    raw: dict[str, Any]
    sglang_layer_ids: tuple[int, ...] | None
    """``eagle_config.eagle_aux_hidden_state_layer_ids`` when it is a list of ints: what SGLang reads."""
    top_level_layer_ids: tuple[int, ...] | None
    """A top-level ``eagle_aux_hidden_state_layer_ids`` (vLLM/speculators style): SGLang ignores it."""
    has_eagle_config: bool
    format: str
    """``"speculators"`` (speculators_model_type / transformer_layer_config) or ``"hf"``."""
    architectures: tuple[str, ...]
    hidden_size: int | None
    target_hidden_size: int | None
    rope_theta: float | None
    """Top-level ``rope_theta``, the one SGLang's draft reads (None: it falls back to 10000)."""
    nested_rope_theta: float | None
    """``transformer_layer_config.rope_theta`` (speculators), which SGLang does not read."""
    draft_vocab_size: int | None
    vocab_size: int | None
    problems: list[str] = field(default_factory=list)
    """Things in the file SGLang silently does not use (a malformed ids value, ...)."""

    @classmethod
    def parse(cls, text: str, *, source: str = "draft config") -> DraftConfig:
        """Parse config.json text; UserError with one sentence when it is not a JSON object."""
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as err:
            raise UserError(f"{source} is not valid JSON ({err.msg} at line {err.lineno} column {err.colno})") from None
        if not isinstance(raw, dict):
            raise UserError(f"{source} is not a JSON object (it is a {type(raw).__name__})")
        return cls.from_dict(raw)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> DraftConfig:
        problems: list[str] = []
        ec = raw.get(EAGLE_CONFIG)
        nested: tuple[int, ...] | None = None
        if ec is not None and not isinstance(ec, dict):
            problems.append(f"{EAGLE_CONFIG} is not an object, so SGLang uses its default layers")
        elif isinstance(ec, dict) and IDS_KEY in ec:
            nested = _int_list(ec[IDS_KEY])
            if nested is None:
                problems.append(
                    f"{EAGLE_CONFIG}.{IDS_KEY} = {json.dumps(ec[IDS_KEY])} is not a list of integers, "
                    "so SGLang uses its default layers"
                )
        top = _int_list(raw.get(IDS_KEY))
        tlc = raw.get("transformer_layer_config")
        tlc = tlc if isinstance(tlc, dict) else {}
        arch = raw.get("architectures")
        return cls(
            raw=raw,
            sglang_layer_ids=nested,
            top_level_layer_ids=top,
            has_eagle_config=isinstance(ec, dict),
            format="speculators" if ("speculators_model_type" in raw or tlc) else "hf",
            architectures=tuple(str(a) for a in arch) if isinstance(arch, list) else (),
            hidden_size=_int(raw.get("hidden_size")) or _int(tlc.get("hidden_size")),
            target_hidden_size=_int(raw.get("target_hidden_size")),
            rope_theta=_number(raw.get("rope_theta")),
            nested_rope_theta=_number(tlc.get("rope_theta")),
            draft_vocab_size=_int(raw.get("draft_vocab_size")),
            vocab_size=_int(raw.get("vocab_size")) or _int(tlc.get("vocab_size")),
            problems=problems,
        )

    @property
    def num_aux(self) -> int:
        """How many aux states SGLang feeds the draft's fc (3 unless the nested ids say otherwise)."""
        return len(self.sglang_layer_ids) if self.sglang_layer_ids else 3

    def served_boundaries(self, num_layers: int) -> tuple[int, ...]:
        """The boundaries SGLang's target captures for this draft (default when no ids are read)."""
        return wiring.sglang_ids_to_boundaries(self.sglang_layer_ids, num_layers)


def validate_layer_ids(
    ids: Sequence[int] | None,
    num_layers: int | None,
    *,
    embed_capture: bool | None = None,
    num_aux: int | None = None,
) -> list[str]:
    """Problems that make SGLang fail or capture something else for these ids (empty: fine).

    `embed_capture` says whether the server's model file handles -1 (None: unknown, not a problem
    here); `num_aux` is how many states the draft's fc takes (its width / target hidden size).
    """
    if ids is None:
        return []
    out: list[str] = []
    if not ids:
        out.append("an empty list of layer ids captures nothing")
        return out
    if any(not isinstance(i, int) or isinstance(i, bool) for i in ids):
        return [f"layer ids must be integers, got {list(ids)}"]
    below = [i for i in ids if i < -1]
    if below:
        out.append(f"layer id {below[0]} is below -1 (the embedding): SGLang never captures it")
    if num_layers is not None:
        boundaries = [i + 1 for i in ids if i >= -1]
        beyond = wiring.sglang_uncaptured(boundaries, num_layers)
        if beyond:
            j = beyond[0] - 1
            out.append(
                f"layer id {j} means boundary {beyond[0]}, but SGLang captures only boundaries "
                f"0..{num_layers - 1} of a {num_layers}-layer target (ids -1..{num_layers - 2})"
            )
    if -1 in ids and embed_capture is False:
        out.append("layer id -1 (the embedding) needs the embed-capture patch, which the server's model file lacks")
    if len(set(ids)) != len(ids):
        out.append(f"layer ids {list(ids)} repeat an id; SGLang captures each boundary once")
    if num_aux is not None and len(set(ids)) != num_aux:
        out.append(f"{len(set(ids))} distinct layer ids, but the draft's fc takes {num_aux} hidden states")
    return out


# --- a JSON scanner that remembers where each value sits in the text ------------------------------


@dataclass
class _Node:
    start: int
    end: int  # exclusive
    kind: str  # "object" | "array" | "scalar"
    members: list[tuple[str, int, _Node]] = field(default_factory=list)  # (key, key_start, value)


class _Scanner:
    _ws = re.compile(r"[ \t\r\n]*")
    _scalar = re.compile(r'"(?:[^"\\]|\\.)*"|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null')

    def __init__(self, text: str) -> None:
        self.text = text

    def skip(self, i: int) -> int:
        return self._ws.match(self.text, i).end()  # type: ignore[union-attr]

    def value(self, i: int) -> _Node:
        i = self.skip(i)
        c = self.text[i]
        if c == "{":
            node = _Node(i, -1, "object")
            i = self.skip(i + 1)
            if self.text[i] == "}":
                node.end = i + 1
                return node
            while True:
                i = self.skip(i)
                m = self._scalar.match(self.text, i)
                assert m is not None and self.text[i] == '"'
                key = json.loads(m.group())
                i = self.skip(m.end())
                assert self.text[i] == ":"
                child = self.value(i + 1)
                node.members.append((key, m.start(), child))
                i = self.skip(child.end)
                if self.text[i] == "}":
                    node.end = i + 1
                    return node
                assert self.text[i] == ","
                i += 1
        if c == "[":
            node = _Node(i, -1, "array")
            i = self.skip(i + 1)
            if self.text[i] == "]":
                node.end = i + 1
                return node
            while True:
                child = self.value(i)
                i = self.skip(child.end)
                if self.text[i] == "]":
                    node.end = i + 1
                    return node
                assert self.text[i] == ","
                i += 1
        m = self._scalar.match(self.text, i)
        assert m is not None
        return _Node(i, m.end(), "scalar")


def _line_indent(text: str, pos: int) -> str:
    line_start = text.rfind("\n", 0, pos) + 1
    m = re.match(r"[ \t]*", text[line_start:])
    return m.group() if m else ""


def _member(node: _Node, key: str) -> tuple[int, tuple[str, int, _Node]] | None:
    """The last member named `key` (the one json.loads keeps)."""
    found = None
    for idx, mem in enumerate(node.members):
        if mem[0] == key:
            found = (idx, mem)
    return found


def _indent_unit(text: str, root: _Node) -> str | None:
    """The file's indentation step (None for a one-line file)."""
    if "\n" not in text[root.start : root.end] or not root.members:
        return None
    first = _line_indent(text, root.members[0][1])
    return first if first and text[root.members[0][1] - len(first) - 1] == "\n" else None


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _render(value: Any, unit: str | None, base: str, nl: str = "\n") -> str:
    if unit is None:
        return json.dumps(value)
    return json.dumps(value, indent=unit).replace("\n", nl + base)


def _insert_member(text: str, obj: _Node, key: str, value: Any, unit: str | None) -> str:
    """Append `"key": value` as the last member of `obj`, in the file's style."""
    nl = _newline(text)
    if obj.members:
        last_key_start = obj.members[-1][1]
        last_end = obj.members[-1][2].end
        multiline = "\n" in text[obj.start : obj.end]
        indent = _line_indent(text, last_key_start) if multiline else ""
        sep = f",{nl}{indent}" if multiline else ", "
        new = f'{sep}{json.dumps(key)}: {_render(value, unit if multiline else None, indent, nl)}'
        return text[:last_end] + new + text[last_end:]
    # empty object: open it up in the file's style
    outer = _line_indent(text, obj.start)
    if unit is None:
        body = f"{json.dumps(key)}: {json.dumps(value)}"
        return text[: obj.start] + "{" + body + "}" + text[obj.end :]
    inner = outer + unit
    body = f"{nl}{inner}{json.dumps(key)}: {_render(value, unit, inner, nl)}{nl}{outer}"
    return text[: obj.start] + "{" + body + "}" + text[obj.end :]


def _remove_member(text: str, obj: _Node, idx: int) -> str:
    members = obj.members
    if len(members) == 1:
        return text[: obj.start] + "{}" + text[obj.end :]
    if idx > 0:
        return text[: members[idx - 1][2].end] + text[members[idx][2].end :]
    return text[: members[0][1]] + text[members[1][1] :]


def _fallback(text: str, data: dict[str, Any]) -> str:
    """Re-serialise in the file's detected style (only if the minimal edit could not be proven right)."""
    m = re.search(r"\n([ \t]+)\"", text)
    indent = m.group(1) if m else None
    out = json.dumps(data, indent=indent, ensure_ascii=False)
    return out + ("\n" if text.endswith("\n") else "")


def set_layer_ids(text: str, ids: Sequence[int] | None) -> str:
    """The config text with ``eagle_config.eagle_aux_hidden_state_layer_ids`` set to `ids`.

    None removes the key (SGLang then uses its default; an ``eagle_config`` left empty is removed
    too). Only the ids' text changes; other keys, their order and the indentation stay. A top-level
    (vLLM-style) key is left alone: SGLang does not read it.
    """
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(f"draft config is not valid JSON ({err.msg} at line {err.lineno} column {err.colno})") from None
    if not isinstance(data, dict):
        raise UserError("draft config is not a JSON object")
    new_ids = None if ids is None else [int(i) for i in ids]
    ec = data.get(EAGLE_CONFIG)
    if ec is not None and not isinstance(ec, dict):
        raise UserError(f"draft config's {EAGLE_CONFIG} is not an object; fix it by hand first")

    # what the result must mean
    expected = json.loads(text)
    if new_ids is None:
        if isinstance(ec, dict) and IDS_KEY in ec:
            del expected[EAGLE_CONFIG][IDS_KEY]
            if not expected[EAGLE_CONFIG]:
                del expected[EAGLE_CONFIG]
        else:
            return text
    else:
        expected.setdefault(EAGLE_CONFIG, {})[IDS_KEY] = new_ids

    root = _Scanner(text).value(0)
    unit = _indent_unit(text, root)
    found_ec = _member(root, EAGLE_CONFIG)
    if new_ids is None:
        assert found_ec is not None
        ec_idx, (_, _, ec_node) = found_ec
        inner = _member(ec_node, IDS_KEY)
        assert inner is not None
        only = all(k == IDS_KEY for k, _, _ in ec_node.members)
        out = _remove_member(text, root, ec_idx) if only else _remove_member(text, ec_node, inner[0])
    elif found_ec is None:
        out = _insert_member(text, root, EAGLE_CONFIG, {IDS_KEY: new_ids}, unit)
    else:
        _, (_, _, ec_node) = found_ec
        inner = _member(ec_node, IDS_KEY)
        if inner is None:
            out = _insert_member(text, ec_node, IDS_KEY, new_ids, unit)
        else:
            out = _replace_ids(text, inner, new_ids, unit)
    return _checked(text, out, expected)



def _replace_ids(text: str, member: tuple[int, tuple[str, int, _Node]], new_ids: list[int], unit: str | None) -> str:
    """`text` with the member's value replaced by `new_ids`, laid out as the old value was (one line or
    one id a line)."""
    old = member[1][2]
    if "\n" in text[old.start : old.end] and unit is not None:
        rendered = _render(new_ids, unit, _line_indent(text, member[1][1]), _newline(text))
    else:
        rendered = json.dumps(new_ids)
    return text[: old.start] + rendered + text[old.end :]


def _checked(text: str, out: str, expected: dict[str, Any]) -> str:
    """The in-place edit when it parses to `expected`; otherwise the whole file re-rendered."""
    try:
        ok = json.loads(out) == expected
    except json.JSONDecodeError:
        ok = False
    return out if ok else _fallback(text, expected)

def json_diff(before: str | dict[str, Any], after: str | dict[str, Any], *, path: str = "config.json") -> str:
    """A unified diff of two config texts (dicts are shown as indented JSON); "" when equal."""

    def as_text(v: str | dict[str, Any]) -> str:
        return v if isinstance(v, str) else json.dumps(v, indent=2) + "\n"

    a, b = as_text(before), as_text(after)
    if a == b:
        return ""
    lines = difflib.unified_diff(
        a.splitlines(keepends=True), b.splitlines(keepends=True), f"{path} (before)", f"{path} (after)", n=2
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


_ABSENT = object()


def json_changes(before: str | dict[str, Any], after: str | dict[str, Any]) -> list[str]:
    """The changes as dotted paths, e.g. ``eagle_config.eagle_aux_hidden_state_layer_ids: absent -> [-1, 2, 30]``."""

    def load(v: str | dict[str, Any]) -> Any:
        return json.loads(v) if isinstance(v, str) else v

    out: list[str] = []

    def show(v: Any) -> str:
        return "absent" if v is _ABSENT else json.dumps(v)

    def walk(a: Any, b: Any, path: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for k in [*a, *(k for k in b if k not in a)]:
                walk(a.get(k, _ABSENT), b.get(k, _ABSENT), f"{path}.{k}" if path else k)
        elif a != b or type(a) is not type(b):
            out.append(f"{path or '(whole file)'}: {show(a)} -> {show(b)}")

    walk(load(before), load(after), "")
    return out


def set_top_level_layer_ids(text: str, ids: Sequence[int] | None) -> str:
    """The config text with the top-level ``eagle_aux_hidden_state_layer_ids`` (speculators' key, the one vLLM
    reads first) set to `ids`; None removes it. Only that member's text changes, as in `set_layer_ids`."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise UserError(f"draft config is not valid JSON ({err.msg} at line {err.lineno} column {err.colno})") from None
    if not isinstance(data, dict):
        raise UserError("draft config is not a JSON object")
    new_ids = None if ids is None else [int(i) for i in ids]
    expected = dict(data)
    if new_ids is None:
        if IDS_KEY not in expected:
            return text
        del expected[IDS_KEY]
    else:
        expected[IDS_KEY] = new_ids
    root = _Scanner(text).value(0)
    unit = _indent_unit(text, root)
    found = _member(root, IDS_KEY)
    if new_ids is None:
        assert found is not None
        out = _remove_member(text, root, found[0])
    elif found is None:
        out = _insert_member(text, root, IDS_KEY, new_ids, unit)
    else:
        out = _replace_ids(text, found, new_ids, unit)
    return _checked(text, out, expected)
