"""Launch commands: typed parsing, SGLang's effective-value rules, exact round trip, flag edits."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eagle3_tui.errors import UserError
from eagle3_tui.formats.launch_config import config_tokens
from eagle3_tui.sglang.launch import (
    KIND_LAUNCH_SERVER,
    KIND_SERVE,
    KIND_SIM,
    TOPK1_WARNING,
    effective,
    is_launch_command,
    merge_config,
    parse_launch,
    render,
    with_flags,
)

SEED_CMD = (
    "python3 -m sglang.launch_server --model-path /models/Kimi-K2.5 --tp 8 "
    "--speculative-algorithm EAGLE3 --speculative-draft-model-path /root/eagle3-draft "
    "--speculative-num-steps 1 --speculative-num-draft-tokens 16 --speculative-eagle-topk 1 "
    "--trust-remote-code --port 30000 --host 0.0.0.0 --mem-fraction-static 0.85"
)


def test_parses_the_seed_command_into_typed_fields() -> None:
    a = parse_launch(shlex.split(SEED_CMD))
    assert a.kind == KIND_LAUNCH_SERVER
    assert a.program == ("python3", "-m", "sglang.launch_server")
    assert a.model_path == "/models/Kimi-K2.5"
    assert a.draft_model_path == "/root/eagle3-draft"
    assert a.algorithm == "EAGLE3"
    assert (a.num_steps, a.eagle_topk, a.num_draft_tokens) == (1, 1, 16)
    assert (a.port, a.host, a.tp_size, a.dp_size) == (30000, "0.0.0.0", 8, None)
    assert a.extra == ("--trust-remote-code", "--mem-fraction-static", "0.85")
    assert render(a) == shlex.split(SEED_CMD)


def test_seed_flags_are_silently_overridden_to_steps_plus_one() -> None:
    spec = effective(parse_launch(shlex.split(SEED_CMD)))
    assert (spec.steps, spec.topk, spec.draft_tokens) == (1, 1, 2)
    assert spec.adjusted == [TOPK1_WARNING]
    assert not spec.auto_chosen and spec.error is None


def test_equals_form_aliases_and_abbreviations() -> None:
    argv = shlex.split(
        "python -m sglang.launch_server --model /w/Llama --speculative-algo EAGLE "
        "--speculative-draft /w/draft --tp-size=2 --data-parallel-size=4 --decode-log-interval=1 "
        "--cuda-graph-bs 1 2 4 8 --speculative-num-steps=3 --speculative-eagle-topk 4 "
        "--speculative-num-draft-tokens 8"
    )
    a = parse_launch(argv)
    assert (a.model_path, a.draft_model_path, a.algorithm) == ("/w/Llama", "/w/draft", "EAGLE")
    assert (a.tp_size, a.dp_size, a.decode_log_interval, a.num_steps) == (2, 4, 1, 3)
    assert a.extra == ("--cuda-graph-bs", "1", "2", "4", "8")
    spec = effective(a)
    assert (spec.steps, spec.topk, spec.draft_tokens, spec.adjusted) == (3, 4, 8, [])


def test_sglang_serve_and_sim_server_are_launch_commands() -> None:
    serve = parse_launch(["/opt/venv/bin/sglang", "serve", "--model-path", "m", "--port", "8000"])
    assert serve.kind == KIND_SERVE and serve.port == 8000
    sim = parse_launch(
        ["python", "-m", "eagle3_tui.sim.server", "--model-path", "t", "--sim-embed-capture-patch", "--port", "1"]
    )
    assert sim.kind == KIND_SIM
    assert sim.has_flag("--sim-embed-capture-patch") and not sim.has_flag("--sim-log-style")
    assert is_launch_command(["python", "/src/sglang/python/sglang/launch_server.py", "--port", "1"])
    assert not is_launch_command(["python", "-m", "http.server", "8000"])
    assert not is_launch_command(["sglang"])


def test_flag_value_reads_unknown_flags_in_both_forms() -> None:
    a = parse_launch(["sglang", "serve", "--page-size=16", "--attention-backend", "fa3", "--enable-metrics"])
    assert a.flag_value("--page-size") == "16"
    assert a.flag_value("--attention-backend") == "fa3"
    assert a.flag_value("--enable-metrics") is None and a.has_flag("--enable-metrics")


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["python", "-m", "vllm.entrypoints.openai.api_server"], "not an SGLang launch command"),
        (["sglang", "serve", "--port", "abc"], "--port wants a whole number"),
        (["sglang", "serve", "--speculative-num-steps"], "needs a value"),
        (["sglang", "serve", "--speculative-num-steps", "--port", "1"], "needs a value"),
    ],
)
def test_bad_commands_give_one_clear_sentence(argv: list[str], needle: str) -> None:
    with pytest.raises(UserError, match=needle):
        parse_launch(argv)


def test_with_flags_keeps_spelling_form_and_position() -> None:
    argv = shlex.split(SEED_CMD.replace("--speculative-num-steps 1", "--speculative-num-steps=1"))
    b = with_flags(parse_launch(argv), steps=15)
    assert b.num_steps == 15
    out = render(b)
    assert out[: argv.index("--speculative-num-steps=1")] == argv[: argv.index("--speculative-num-steps=1")]
    assert "--speculative-num-steps=15" in out and len(out) == len(argv)
    assert [t for t in out if t != "--speculative-num-steps=15"] == [
        t for t in argv if t != "--speculative-num-steps=1"
    ]
    assert effective(b).draft_tokens == 16 and effective(b).adjusted == []


def test_with_flags_appends_missing_and_removes_none() -> None:
    a = parse_launch(["sglang", "serve", "--model-path", "m", "--speculative-algorithm", "EAGLE3"])
    b = with_flags(a, num_steps=5, topk=1, draft_tokens=6)
    assert render(b)[-6:] == [
        "--speculative-num-steps",
        "5",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "6",
    ]
    c = with_flags(b, topk=None, draft_tokens=None, steps=None)
    assert render(c) == render(a)
    with pytest.raises(UserError):
        with_flags(a, steps="5")
    with pytest.raises(UserError):
        with_flags(a, nonsense=1)


def test_auto_choice_only_when_all_three_unset() -> None:
    base = ["python", "-m", "sglang.launch_server", "--speculative-algorithm", "EAGLE3"]
    auto = effective(parse_launch(base), target_arch="LlamaForCausalLM")
    assert (auto.steps, auto.topk, auto.draft_tokens, auto.auto_chosen) == (5, 4, 8, True)
    ds = effective(parse_launch(base), target_arch="DeepseekV3ForCausalLM")
    assert (ds.steps, ds.topk, ds.draft_tokens) == (3, 1, 4)
    other = effective(parse_launch(base), target_arch="Qwen3ForCausalLM")
    assert (other.steps, other.topk, other.draft_tokens) == (5, 4, 8)
    assert any("0.5.8 and later" in n for n in other.adjusted)  # server_args.py 0.5.8: fallback (3, 1, 4)
    installed = effective(parse_launch(base), target_arch="Qwen3ForCausalLM", auto=(3, 1, 4))
    assert (installed.steps, installed.topk, installed.draft_tokens, installed.auto_chosen) == (3, 1, 4, True)
    assert not any("0.5.8 and later" in n for n in installed.adjusted)
    standalone = effective(parse_launch([*base[:-1], "STANDALONE"]))
    assert (standalone.steps, standalone.topk, standalone.draft_tokens) == (3, 1, 4)
    partial = effective(parse_launch([*base, "--speculative-eagle-topk", "4"]))
    assert partial.error is not None and "assert" in partial.error and not partial.auto_chosen
    steps_only = effective(parse_launch([*base, "--speculative-num-steps", "3"]))
    assert (steps_only.steps, steps_only.topk, steps_only.draft_tokens) == (3, None, None)
    assert not steps_only.auto_chosen and "not set" in steps_only.adjusted[0]
    topk1 = effective(parse_launch([*base, "--speculative-num-steps", "3", "--speculative-eagle-topk", "1"]))
    assert topk1.draft_tokens == 4 and topk1.adjusted == [TOPK1_WARNING]
    nextn = effective(parse_launch([*base[:-1], "NEXTN", "--speculative-num-steps", "2", "--speculative-eagle-topk", "1"]))
    assert nextn.algorithm == "EAGLE" and nextn.draft_tokens == 3


def test_no_algorithm_means_no_speculation() -> None:
    spec = effective(parse_launch(["sglang", "serve", "--speculative-num-steps", "3"]))
    assert not spec.speculative and spec.steps is None
    assert spec.adjusted and "ignored" in spec.adjusted[0]


# --- properties -------------------------------------------------------------------------------

_opt = st.one_of(st.none(), st.integers(min_value=1, max_value=64))


@settings(max_examples=150, deadline=None)
@given(steps=_opt, topk=_opt, draft=_opt, arch=st.sampled_from([None, "LlamaForCausalLM", "DeepseekV3ForCausalLM"]))
def test_effective_values_follow_sglang_rules(steps, topk, draft, arch) -> None:
    argv = ["python", "-m", "sglang.launch_server", "--speculative-algorithm", "EAGLE3"]
    for flag, v in (
        ("--speculative-num-steps", steps),
        ("--speculative-eagle-topk", topk),
        ("--speculative-num-draft-tokens", draft),
    ):
        if v is not None:
            argv += [flag, str(v)]
    spec = effective(parse_launch(argv), target_arch=arch)
    if steps is None and (topk is not None or draft is not None):
        assert spec.error is not None
        return
    assert spec.error is None
    assert spec.auto_chosen == (steps is None)
    if spec.topk == 1:
        assert spec.draft_tokens == spec.steps + 1
        assert (TOPK1_WARNING in spec.adjusted) == (spec.auto_chosen is False and draft != steps + 1)
    else:
        assert spec.draft_tokens == (draft if steps is not None else 8)
        assert TOPK1_WARNING not in spec.adjusted
    if steps is not None:
        assert (spec.steps, spec.topk) == (steps, topk)


_word = st.text(alphabet=st.characters(min_codepoint=33, max_codepoint=126, blacklist_characters="="), min_size=1, max_size=8)
_value = st.one_of(_word.filter(lambda s: not s.startswith("-")), st.integers(-5, 99999).map(str))
_known = st.sampled_from(
    [
        "--model-path",
        "--model",
        "--speculative-draft-model-path",
        "--speculative-algorithm",
        "--host",
        "--speculative-num-steps",
        "--port",
        "--tp",
        "--dp-size",
    ]
)
_int_flags = {"--speculative-num-steps", "--port", "--tp", "--dp-size"}


@st.composite
def _commands(draw) -> list[str]:
    argv = draw(st.sampled_from([["python", "-m", "sglang.launch_server"], ["sglang", "serve"], ["python3", "-m", "eagle3_tui.sim.server"]]))
    for _ in range(draw(st.integers(0, 8))):
        choice = draw(st.integers(0, 2))
        if choice == 0:
            flag = draw(_known)
            value = str(draw(st.integers(-3, 70000))) if flag in _int_flags else draw(_value)
            argv += [f"{flag}={value}"] if draw(st.booleans()) else [flag, value]
        elif choice == 1:
            argv.append("--x-" + draw(_word).lstrip("-"))
        else:
            argv.append(draw(_value))
    return argv


@settings(max_examples=200, deadline=None)
@given(_commands())
def test_render_round_trips_any_command(argv: list[str]) -> None:
    a = parse_launch(argv)
    assert render(a) == argv
    assert parse_launch(render(a)) == a


@settings(max_examples=150, deadline=None)
@given(_commands(), _opt, _opt, _opt)
def test_with_flags_changes_only_what_it_is_asked(argv, steps, topk, draft) -> None:
    a = parse_launch(argv)
    b = with_flags(a, steps=steps, topk=topk, draft_tokens=draft)
    assert (b.num_steps, b.eagle_topk, b.num_draft_tokens) == (steps, topk, draft)
    assert (b.model_path, b.port, b.host, b.tp_size, b.extra) == (a.model_path, a.port, a.host, a.tp_size, a.extra)
    assert render(with_flags(b)) == render(b)


# --- sglang serve MODEL, --config x.yaml, the relaunch environment ------------------------------------


def test_serve_takes_the_model_positionally() -> None:
    a = parse_launch(shlex.split("sglang serve Qwen/Qwen3-8B --speculative-algorithm EAGLE3 --port 30001"))
    assert a.kind == KIND_SERVE and a.model_path == "Qwen/Qwen3-8B" and a.positional_model
    assert a.port == 30001 and a.extra == ()
    b = with_flags(a, model_path="/models/qwen3", steps=3)
    assert render(b)[:3] == ["sglang", "serve", "/models/qwen3"] and b.num_steps == 3
    flagged = parse_launch(shlex.split("sglang serve --model-path /m --port 1"))
    assert flagged.model_path == "/m" and not flagged.positional_model


CONFIG_YAML = """
model-path: /models/Kimi-K2.5
speculative-algorithm: EAGLE3
speculative-num-steps: 1
speculative-num-draft-tokens: 16
speculative-eagle-topk: 1
disable-cuda-graph: true
enable-metrics: false
tp-size: 8
"""


def test_config_yaml_is_merged_with_the_command_line_winning() -> None:
    a = parse_launch(shlex.split("sglang serve --config /etc/sgl.yaml --speculative-num-steps 3 --port 30000"))
    assert a.config_path == "/etc/sgl.yaml" and a.model_path is None
    m = merge_config(a, CONFIG_YAML)
    assert render(m) == render(a)  # argv untouched
    assert (m.model_path, m.algorithm, m.tp_size, m.port) == ("/models/Kimi-K2.5", "EAGLE3", 8, 30000)
    assert (m.num_steps, m.eagle_topk, m.num_draft_tokens) == (3, 1, 16)  # CLI > config
    assert m.has_flag("--disable-cuda-graph") and not m.has_flag("--enable-metrics")
    eff = effective(m)
    assert (eff.steps, eff.draft_tokens) == (3, 4) and TOPK1_WARNING in eff.adjusted
    b = with_flags(m, steps=5)
    assert b.num_steps == 5 and b.model_path == "/models/Kimi-K2.5" and b.config_argv == m.config_argv


def test_config_yaml_positional_model_and_bad_files() -> None:
    a = parse_launch(shlex.split("sglang serve Qwen/Qwen3-8B --config c.yaml"))
    assert merge_config(a, "model-path: /other\nport: 1234\n").model_path == "Qwen/Qwen3-8B"
    assert merge_config(a, "").model_path == "Qwen/Qwen3-8B"
    with pytest.raises(UserError, match="not valid YAML at line 2"):
        merge_config(a, "port: 1\n  bad: [\n")
    with pytest.raises(UserError, match="mapping of flag names"):
        merge_config(a, "- a\n- b\n")
    assert config_tokens({"json-model-override-args": {"a": 1}, "lora-paths": ["x", "y"], "skip": False}) == [
        "--json-model-override-args", '{"a": 1}', "--lora-paths", "x", "y"]


