"""vLLM launch commands: both program forms, --speculative-config, --config YAML, presets that touch one token."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eagle3_tui.errors import UserError
from eagle3_tui.vllm import launch as vl

SAMPLES = Path(__file__).parent / "vllm_samples"
SPEC = '{"method":"eagle3","model":"/m/draft","num_speculative_tokens":3}'
API = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m/target", "--port", "8000",
       "-O0", "--speculative-config", SPEC, "--dtype", "float32"]


def test_api_server_form() -> None:
    a = vl.parse_launch(API)
    assert a.kind == vl.KIND_API_SERVER and a.program == tuple(API[:3])
    assert (a.model, a.port, a.method, a.draft_model, a.num_speculative_tokens) == ("/m/target", 8000, "eagle3", "/m/draft", 3)
    assert a.extra == ("-O0", "--dtype", "float32")
    assert vl.render(a) == API


def test_serve_form_positional_model_and_short_flags() -> None:
    argv = ["/venv/bin/vllm", "serve", "/m/target", "-sc=" + SPEC, "-tp", "2", "--host", "127.0.0.1"]
    a = vl.parse_launch(argv)
    assert a.kind == vl.KIND_SERVE and a.positional_model and a.model == "/m/target"
    assert a.tp_size == 2 and a.num_speculative_tokens == 3 and a.host == "127.0.0.1"
    assert vl.render(a) == argv
    assert vl.is_launch_command(argv) and not vl.is_launch_command(["python", "-m", "sglang.launch_server"])


def test_underscore_spelling() -> None:
    a = vl.parse_launch(["vllm", "serve", "m", "--speculative_config", SPEC])
    assert a.num_speculative_tokens == 3


def test_the_launch_the_real_server_printed() -> None:
    """The non-default args of the captured server agree with what its command line says."""
    from eagle3_tui.vllm import logline

    line = next(ln for ln in (SAMPLES / "serve_trained.log").read_text().splitlines() if "non-default args" in ln)
    ev = logline.parse_line(line)
    assert isinstance(ev, logline.StartArgs) and ev.args is not None
    argv = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", ev.args["model"], "--port",
            str(ev.args["port"]), "--speculative-config", json.dumps(ev.args["speculative_config"])]
    a = vl.parse_launch(argv)
    assert a.speculative_config == ev.speculative_config and a.port == ev.args["port"]


def test_bad_json_is_one_sentence() -> None:
    bad = '{"method":"eagle3",num_speculative_tokens:3}'
    with pytest.raises(UserError) as err:
        vl.parse_launch([*API[:3], "--speculative-config", bad])
    msg = str(err.value)
    assert "not valid JSON" in msg and "column 20" in msg and "\n" not in msg
    # vLLM's own words for it are in the sentence (tests/vllm_samples/refused_json.log)
    assert "cannot be converted to <function loads>" in msg
    with pytest.raises(UserError, match="JSON object"):
        vl.parse_launch([*API[:3], "--speculative-config", "[1, 2]"])
    with pytest.raises(UserError, match="needs a value"):
        vl.parse_launch([*API[:3], "--port"])
    with pytest.raises(UserError, match="whole number"):
        vl.parse_launch([*API[:3], "--port", "eighty"])
    with pytest.raises(UserError, match="not a vLLM launch command"):
        vl.parse_launch(["python", "-m", "sglang.launch_server"])


def test_preset_rewrites_only_the_spec_token() -> None:
    a = vl.with_flags(vl.parse_launch(API), num_speculative_tokens=5)
    assert a.num_speculative_tokens == 5 and a.draft_model == "/m/draft"
    changed = [i for i, (x, y) in enumerate(zip(API, a.argv, strict=True)) if x != y]
    assert changed == [API.index(SPEC)] and len(a.argv) == len(API)
    assert json.loads(a.argv[API.index(SPEC)]) == {"method": "eagle3", "model": "/m/draft", "num_speculative_tokens": 5}
    b = vl.with_flags(a, draft_model="/m/other", port=9000)
    assert (b.draft_model, b.port, b.num_speculative_tokens) == ("/m/other", 9000, 5)
    with pytest.raises(UserError, match="at least 1"):
        vl.with_flags(a, num_speculative_tokens=0)
    plain = vl.parse_launch(["vllm", "serve", "m"])
    with pytest.raises(UserError, match="no --speculative-config"):
        vl.with_flags(plain, num_speculative_tokens=2)
    assert vl.with_flags(plain, speculative_config={"method": "eagle3", "model": "d", "num_speculative_tokens": 2}).num_speculative_tokens == 2
    assert vl.with_flags(a, speculative_config=None).speculative_config is None


def test_config_yaml_merges_under_the_command_line() -> None:
    argv = ["vllm", "serve", "m", "--config", "c.yaml", "--port", "9000"]
    a = vl.parse_launch(argv)
    assert a.config_path == "c.yaml"
    text = "port: 8000\nspeculative-config:\n  method: eagle3\n  model: /d\n  num_speculative_tokens: 4\nenforce-eager: true\n"
    m = vl.merge_config(a, text)
    assert m.port == 9000 and m.num_speculative_tokens == 4 and m.draft_model == "/d"
    assert m.argv == tuple(argv) and m.has_flag("--enforce-eager")
    assert vl.with_flags(m, num_speculative_tokens=2).num_speculative_tokens == 2
    with pytest.raises(UserError, match="not valid YAML at line"):
        vl.merge_config(a, "port: [1,\n")
    with pytest.raises(UserError, match="mapping"):
        vl.merge_config(a, "- 1\n")
    assert vl.merge_config(a, "").port == 9000


