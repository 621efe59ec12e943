"""The fast-lane side of `--demo --engine vllm`: the flags and environment a real vLLM server gets, the
launch read back through the engine seam, and the one sentence where `.venv-vllm` is missing."""

from __future__ import annotations

import json

from eagle3_tui.cli import main
from eagle3_tui.engines import engine_for_launch
from eagle3_tui.session import real_engine_missing
from eagle3_tui.session.demo import real_vllm


def test_server_flags_and_environment(tmp_path):
    real = real_vllm.RealVllm(python=tmp_path / "python")
    world = tmp_path / "world"
    world.mkdir()
    (world / "config.json").write_text('{"num_hidden_layers": 2}')
    (world / "model.safetensors").write_bytes(b"w")
    target = real_vllm.serving_target(world, tmp_path / "target")
    # one folder: the config, the weights and the tokenizer (vLLM reads a tokenizer folder's config.json too)
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= {
        p.name for p in target.iterdir()}
    assert (target / "model.safetensors").resolve() == (world / "model.safetensors").resolve()
    argv = real_vllm.server_argv(real, target=target, draft=tmp_path / "draft", port=1234)
    launch = engine_for_launch(argv).parse_launch(argv)
    assert launch.engine == "vllm" and launch.port == 1234 and launch.model == str(tmp_path / "target")
    assert launch.draft_model == str(tmp_path / "draft") and launch.draft_tokens_per_step == 3
    assert json.loads(argv[argv.index("--speculative-config") + 1])["method"] == "eagle3"
    assert "-O0" in argv and "--tokenizer" not in argv
    env = real.env(tmp_path / "cache")
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1" and env["VLLM_CACHE_ROOT"] == str(tmp_path / "cache")
    assert env["HF_HUB_OFFLINE"] == "1" and env["VLLM_HOST_IP"] == "127.0.0.1"


def test_demo_on_vllm_without_the_venv_says_how_to_build_it(monkeypatch, capsys):
    monkeypatch.setattr(real_vllm, "VENV", ".venv-vllm-not-built-here")
    assert real_vllm.find_real_vllm() is None
    assert real_engine_missing("vllm") == real_vllm.MISSING and real_engine_missing("sim") is None
    assert main(["--demo", "--engine", "vllm"]) != 0
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "make vllm" in err
