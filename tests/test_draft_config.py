"""Draft config.json: what SGLang reads, minimal layer-id edits, diffs, validation."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eagle3_tui.eagle.draft_config import (
    DraftConfig,
    json_changes,
    json_diff,
    set_layer_ids,
    validate_layer_ids,
)
from eagle3_tui.errors import UserError

# SpecForge llama3-8B style, as json.dumps(indent=2) writes it (no eagle_config: SGLang's default).
PLAIN = json.dumps(
    {
        "architectures": ["LlamaForCausalLMEagle3"],
        "hidden_size": 4096,
        "num_hidden_layers": 1,
        "rope_theta": 500000.0,
        "vocab_size": 128256,
        "draft_vocab_size": 32000,
    },
    indent=2,
) + "\n"

NESTED = """{
    "architectures": ["LlamaForCausalLMEagle3"],
    "eagle_config": {
        "eagle_aux_hidden_state_layer_ids": [2, 30, 58],
        "use_aux_hidden_state": true
    },
    "hidden_size": 7168,
    "target_hidden_size": 7168
}
"""

# speculators style: top-level ids, transformer settings nested (SGLang ignores both).
SPECULATORS = json.dumps(
    {
        "architectures": ["Eagle3Speculator"],
        "eagle_aux_hidden_state_layer_ids": [-1, 2, 30],
        "speculators_model_type": "eagle3",
        "transformer_layer_config": {"hidden_size": 4096, "rope_theta": 10000.0, "vocab_size": 128256},
    },
    indent=2,
)


def test_parse_reads_what_sglang_reads() -> None:
    plain = DraftConfig.parse(PLAIN)
    assert plain.sglang_layer_ids is None and plain.top_level_layer_ids is None
    assert (plain.rope_theta, plain.hidden_size, plain.format, plain.num_aux) == (500000.0, 4096, "hf", 3)
    assert plain.served_boundaries(32) == (2, 16, 29)

    nested = DraftConfig.parse(NESTED)
    assert nested.sglang_layer_ids == (2, 30, 58) and nested.has_eagle_config
    assert nested.served_boundaries(61) == (3, 31, 59)
    assert nested.rope_theta is None and nested.target_hidden_size == 7168

    spec = DraftConfig.parse(SPECULATORS)
    assert spec.sglang_layer_ids is None and spec.top_level_layer_ids == (-1, 2, 30)
    assert spec.format == "speculators" and spec.rope_theta is None and spec.nested_rope_theta == 10000.0
    assert spec.served_boundaries(32) == (2, 16, 29)


def test_malformed_ids_are_a_problem_not_a_crash() -> None:
    cfg = DraftConfig.parse('{"eagle_config": {"eagle_aux_hidden_state_layer_ids": "2,30,58"}}')
    assert cfg.sglang_layer_ids is None
    assert cfg.problems and "not a list of integers" in cfg.problems[0]
    bad = DraftConfig.parse('{"eagle_config": [1, 2]}')
    assert bad.problems and not bad.has_eagle_config


@pytest.mark.parametrize("text, needle", [("{", "not valid JSON"), ("[1, 2]", "not a JSON object"), ("", "not valid JSON")])
def test_broken_json_is_a_user_error(text: str, needle: str) -> None:
    with pytest.raises(UserError, match=needle):
        DraftConfig.parse(text)
    with pytest.raises(UserError):
        set_layer_ids(text, [1, 2, 3])


def test_replacing_existing_ids_changes_one_line() -> None:
    out = set_layer_ids(NESTED, [-1, 2, 30])
    assert out == NESTED.replace("[2, 30, 58]", "[-1, 2, 30]")
    diff = json_diff(NESTED, out)
    changed = [ln for ln in diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    assert changed == [
        '-        "eagle_aux_hidden_state_layer_ids": [2, 30, 58],',
        '+        "eagle_aux_hidden_state_layer_ids": [-1, 2, 30],',
    ]


def test_adding_eagle_config_keeps_order_and_indent_and_removing_restores_bytes() -> None:
    out = set_layer_ids(PLAIN, [-1, 1, 5])
    data = json.loads(out)
    assert list(data) == [*json.loads(PLAIN), "eagle_config"]
    assert data["eagle_config"] == {"eagle_aux_hidden_state_layer_ids": [-1, 1, 5]}
    assert out.startswith(PLAIN.rstrip("\n}").rstrip())  # everything before is untouched
    assert '\n  "eagle_config": {\n    "eagle_aux_hidden_state_layer_ids": [\n      -1,' in out
    assert set_layer_ids(out, None) == PLAIN


def test_removing_keeps_other_eagle_config_keys() -> None:
    out = set_layer_ids(NESTED, None)
    assert json.loads(out)["eagle_config"] == {"use_aux_hidden_state": True}
    assert set_layer_ids(out, [2, 30, 58]).count("eagle_aux_hidden_state_layer_ids") == 1
    assert set_layer_ids(PLAIN, None) == PLAIN  # nothing to remove: unchanged


def test_insert_into_existing_empty_and_one_line_objects() -> None:
    empty = '{\n  "a": 1,\n  "eagle_config": {}\n}'
    out = set_layer_ids(empty, [0, 1, 2])
    assert out == '{\n  "a": 1,\n  "eagle_config": {\n    "eagle_aux_hidden_state_layer_ids": [\n      0,\n      1,\n      2\n    ]\n  }\n}'
    one_line = '{"a": 1, "eagle_config": {"use_aux_hidden_state": true}}'
    assert set_layer_ids(one_line, [1, 2, 3]) == (
        '{"a": 1, "eagle_config": {"use_aux_hidden_state": true, "eagle_aux_hidden_state_layer_ids": [1, 2, 3]}}'
    )


def test_top_level_key_is_left_alone() -> None:
    out = set_layer_ids(SPECULATORS, [-1, 2, 30])
    data = json.loads(out)
    assert data["eagle_aux_hidden_state_layer_ids"] == [-1, 2, 30]
    assert DraftConfig.parse(out).sglang_layer_ids == (-1, 2, 30)


def test_duplicate_keys_edit_the_one_json_keeps() -> None:
    text = '{"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1], "eagle_aux_hidden_state_layer_ids": [2, 3, 4]}}'
    out = set_layer_ids(text, [5, 6, 7])
    assert json.loads(out)["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [5, 6, 7]
    assert '[1], "eagle' in out


def test_json_changes_name_the_paths() -> None:
    after = set_layer_ids(PLAIN, [-1, 1, 5])
    assert json_changes(PLAIN, after) == ["eagle_config: absent -> {\"eagle_aux_hidden_state_layer_ids\": [-1, 1, 5]}"]
    assert json_changes(NESTED, set_layer_ids(NESTED, None)) == [
        "eagle_config.eagle_aux_hidden_state_layer_ids: [2, 30, 58] -> absent"
    ]
    assert json_changes(NESTED, NESTED) == []
    assert json_changes({"a": 1}, {"a": 1.0}) == ["a: 1 -> 1.0"]


def test_json_diff_empty_when_equal_and_accepts_dicts() -> None:
    assert json_diff(NESTED, NESTED) == ""
    d = json_diff({"a": 1}, {"a": 2})
    assert '-  "a": 1' in d and '+  "a": 2' in d


def test_validate_layer_ids() -> None:
    assert validate_layer_ids([1, 15, 28], 32) == []
    assert validate_layer_ids(None, 32) == []
    assert any("boundary 32" in p for p in validate_layer_ids([1, 15, 31], 32))
    assert validate_layer_ids([1, 15, 30], 32) == []  # boundary 31 is the input of the last layer
    assert any("below -1" in p for p in validate_layer_ids([-2, 1, 2], 32))
    assert any("embed-capture patch" in p for p in validate_layer_ids([-1, 2, 30], 61, embed_capture=False))
    assert validate_layer_ids([-1, 2, 30], 61, embed_capture=True) == []
    assert validate_layer_ids([-1, 2, 30], 61) == []  # unknown: not refused here
    assert any("repeat" in p for p in validate_layer_ids([2, 2, 5], 32))
    assert any("fc takes 3" in p for p in validate_layer_ids([2, 5], 32, num_aux=3))
    assert validate_layer_ids([], 32)


_json_scalar = st.one_of(st.integers(-100, 100), st.booleans(), st.none(), st.text(max_size=5), st.floats(allow_nan=False, allow_infinity=False))
_obj = st.dictionaries(st.text(min_size=1, max_size=6), st.one_of(_json_scalar, st.lists(_json_scalar, max_size=3)), max_size=5)
_ids = st.one_of(st.none(), st.lists(st.integers(-1, 80), min_size=1, max_size=4))


@settings(max_examples=200, deadline=None)
@given(
    _obj,
    st.one_of(st.none(), st.just({}), st.dictionaries(st.sampled_from(["use_aux_hidden_state", "x"]), st.booleans(), max_size=2)),
    st.one_of(st.none(), st.lists(st.integers(-1, 80), max_size=3)),
    _ids,
    st.sampled_from([None, 2, 4, "\t"]),
    st.booleans(),
)
def test_set_layer_ids_means_exactly_the_change(base, ec, old_ids, ids, indent, crlf) -> None:
    data = {k: v for k, v in base.items() if k != "eagle_config"}
    if ec is not None:
        ec = dict(ec)
        if old_ids is not None:
            ec["eagle_aux_hidden_state_layer_ids"] = old_ids
        data["eagle_config"] = ec
    text = json.dumps(data, indent=indent)
    if crlf:
        text = text.replace("\n", "\r\n")
    out = set_layer_ids(text, ids)
    if crlf:
        assert "\n" not in out.replace("\r\n", "")  # no bare LF slipped into a CRLF file
    got = json.loads(out)
    want = json.loads(text)
    if ids is None:
        if isinstance(want.get("eagle_config"), dict):
            want["eagle_config"].pop("eagle_aux_hidden_state_layer_ids", None)
            if not want["eagle_config"] and old_ids is not None:
                del want["eagle_config"]
    else:
        want.setdefault("eagle_config", {})["eagle_aux_hidden_state_layer_ids"] = ids
    assert got == want
    assert list(got)[: len(data)] == [k for k in data if k in got]
    # the lines outside the edited object are untouched
    if "eagle_config" not in data and ids is not None and data:
        assert out.startswith(text[: text.rfind("}")].rstrip())
    # and going back is exact when we added the key
    if ids is not None and (ec is None or old_ids is None):
        back = set_layer_ids(out, None)
        if ec is None:
            assert back == text
