"""The sim as a real SGLang release (`--sglang-version`): start line, shift rule, embedding capture,
decode under CUDA graphs, auto-choice, from `sglang.installed`'s table; its log on stderr and the
access lines on stdout; `--api-key` answered as SGLang does (401 without the Bearer token)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from eagle3_tui.sglang.logline import ServerArgs, parse_line
from eagle3_tui.sim.flags import build_parser, effective_args
from eagle3_tui.sim.logfmt import start_line
from eagle3_tui.sim.release import auto_spec, sim_release


def test_start_line_by_release() -> None:
    args = {"model_path": "/m", "port": 30000, "speculative_num_steps": 3}
    old = start_line(args, "0.5.6")
    assert old.startswith("server_args=ServerArgs(model_path='/m'") and old == start_line(args, None)
    assert isinstance(parse_line("[2026-01-01 10:00:00] " + old), ServerArgs)
    assert start_line(args, "0.5.23") == "server_args={'model_path': '/m', 'port': 30000, 'speculative_num_steps': 3}"
    assert start_line(args, "0.5.20").startswith("server_args={") and start_line(args, "0.4.9").endswith(")")


@pytest.mark.parametrize(("version", "arch", "ids", "graphs", "prefill", "decode"), [
    ("0.5.6", "Qwen3ForCausalLM", (-1, 1, 5), True, (0, 2, 6), (2, 6, 9)),   # graphs captured before the ids
    ("0.5.6", "Qwen3ForCausalLM", (-1, 1, 5), False, (0, 2, 6), (0, 2, 6)),  # --disable-cuda-graph
    ("0.4.9", "LlamaForCausalLM", (1, 5, 8), True, (2, 6, 9), (2, 6, 9)),
    ("0.4.9", "LlamaForCausalLM", (0, 4, 7), True, (1, 5, 8), (2, 6, 9)),
    ("0.5.23", "Qwen3ForCausalLM", (-1, 1, 5), True, (0, 2, 6), (0, 2, 6)),
    ("0.5.23", "LlamaForCausalLM", (-1, 1, 5), True, (0, 2, 6), (0, 2, 6)),  # layer_boundary: -1 stock
    ("0.5.23", "DeepseekV3ForCausalLM", (0, 2, 6), True, (0, 2, 6), (0, 2, 6)),  # verbatim
    ("0.5.23", "DeepseekV3ForCausalLM", (1, 5, 8), True, (2, 6, 9), (2, 6, 9)),  # first id 1: +1
])
def test_release_rules_on_the_demo_target(version: str, arch: str, ids: tuple[int, ...], graphs: bool,
                                          prefill: tuple[int, ...], decode: tuple[int, ...]) -> None:
    rel = sim_release(version, arch, 12, ids, cuda_graph=graphs)
    assert rel is not None and rel.fails is None
    assert (rel.prefill, rel.decode) == (prefill, decode)


def test_start_up_failures_and_no_release() -> None:
    llama = sim_release("0.5.6", "LlamaForCausalLM", 12, (-1, 1, 5), cuda_graph=True)
    assert llama is not None and llama.fails is not None and "embed-capture patch" in llama.fails
    ds = sim_release("0.4.9", "DeepseekV3ForCausalLM", 12, (1, 5, 8), cuda_graph=True)
    assert ds is not None and ds.fails is not None and "set_eagle3_layers_to_capture" in ds.fails
    assert sim_release(None, "LlamaForCausalLM", 12, (1, 5, 8), cuda_graph=True) is None


def test_auto_choice_by_release() -> None:
    ns = build_parser().parse_args(["--model-path", "/m", "--speculative-algorithm", "EAGLE3"])
    assert auto_spec(None, "Qwen3ForCausalLM") is None
    plain = effective_args(ns, "Qwen3ForCausalLM", auto=auto_spec(None, "Qwen3ForCausalLM"))
    assert (plain.speculative_num_steps, plain.speculative_eagle_topk, plain.speculative_num_draft_tokens) == (5, 4, 8)
    new = effective_args(ns, "Qwen3ForCausalLM", auto=auto_spec("0.5.23", "Qwen3ForCausalLM"))
    assert (new.speculative_num_steps, new.speculative_eagle_topk, new.speculative_num_draft_tokens) == (3, 1, 4)
    assert effective_args(ns, "LlamaForCausalLM").disable_cuda_graph is True  # the sim with no release: CPU
    versioned = build_parser().parse_args(["--model-path", "/m", "--sglang-version", "0.5.6"])
    assert effective_args(versioned, "LlamaForCausalLM").disable_cuda_graph is False


def _generate(base: str, key: str | None = None) -> dict[str, Any]:
    body = json.dumps({"text": "The capital city of France is",
                       "sampling_params": {"max_new_tokens": 48, "temperature": 0}}).encode()
    req = urllib.request.Request(base + "/generate", data=body, headers={"content-type": "application/json"})
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    with urllib.request.urlopen(req, timeout=60) as resp:
        return dict(json.loads(resp.read()))


def _accept(meta: dict[str, Any]) -> float:
    return float(meta["completion_tokens"]) / max(1, int(meta["spec_verify_ct"]))


@pytest.mark.slow
def test_graphs_keep_the_default_until_disabled(sim_server: Any, demo_world: Any, tmp_path: Path) -> None:
    """0.5.6 on the Qwen3-declared target with the trained ids: prefill gets them, graphed decode does not;
    --disable-cuda-graph lets the accept length rise (the split log is tested in test_installed_integration)."""
    from tests.plugins.world import SPEC_ARGS, make_draft_dir

    draft = make_draft_dir(demo_world, tmp_path / "draft", layer_ids=[-1, 1, 5])
    seen = {}
    for name, flags in (("graphs", ()), ("eager", ("--disable-cuda-graph",))):
        srv = sim_server(*SPEC_ARGS, "--sglang-version", "0.5.6", "--sim-target-arch", "qwen3", *flags,
                         draft_dir=draft)
        info = json.loads(urllib.request.urlopen(srv.base_url + "/server_info", timeout=30).read())
        assert info["version"] == "0.5.6" and info["sim"]["capture_boundaries"] == [0, 2, 6]
        assert info["sim"]["decode_boundaries"] == ([0, 2, 6] if flags else [2, 6, 9])
        seen[name] = _accept(_generate(srv.base_url)["meta_info"])
        srv.stop()
    # how far it rises is the world's (0.28 on one CPU's seed-0 world, over 0.5 on another): that it rises is not
    assert seen["eager"] > seen["graphs"]


@pytest.mark.slow
def test_api_key(sim_server: Any) -> None:
    from tests.plugins.world import SPEC_ARGS

    srv = sim_server(*SPEC_ARGS, "--api-key", "s3cret")
    with pytest.raises(urllib.error.HTTPError) as err:
        _generate(srv.base_url)
    assert err.value.code == 401
    assert urllib.request.urlopen(srv.base_url + "/health", timeout=30).status == 200
    assert _generate(srv.base_url, "s3cret")["meta_info"]["completion_tokens"] > 0
    info = urllib.request.Request(srv.base_url + "/server_info", headers={"Authorization": "Bearer s3cret"})
    assert "api_key" not in json.loads(urllib.request.urlopen(info, timeout=30).read())


def test_accept_rate_and_decode_line_form_by_release() -> None:
    """`accept rate` as each release prints it (0.5.6 scheduler_metrics_mixin.py: bonus included; 0.5.12+
    observability/scheduler_metrics_mixin.py: correct drafts over draft tokens - 1), read back by the
    console's definition guess; 0.4.x prints no rate (the 0.4.6 line form)."""
    from types import SimpleNamespace

    from eagle3_tui.sim.flags import log_style
    from eagle3_tui.sim.scheduler import printed_accept_rate
    from eagle3_tui.telemetry.metrics import guess_rate_definition

    def args(version: str) -> Any:
        return SimpleNamespace(speculative_num_steps=3, speculative_num_draft_tokens=4, sglang_version=version)

    forwards = 100
    for version, definition in (("0.5.6", "bonus-included"), ("0.5.12", "bonus-excluded"), ("0.5.23", "bonus-excluded")):
        pairs = [(accepted / forwards, printed_accept_rate(args(version), accepted, forwards))
                 for accepted in (150, 210, 270, 330)]
        guess = guess_rate_definition(pairs, num_draft_tokens=4)
        assert guess is not None and guess.definition == definition, (version, pairs, guess)
        assert printed_accept_rate(args(version), 0, 0) == 0.0
    parse = build_parser().parse_args
    assert log_style(parse(["--model-path", "/m", "--sglang-version", "0.4.9"])) == "0.4.6"
    assert log_style(parse(["--model-path", "/m", "--sglang-version", "0.5.23"])) == "0.5.6"
    assert log_style(parse(["--model-path", "/m"])) == "0.5.6"
    assert log_style(parse(["--model-path", "/m", "--sglang-version", "0.4.9", "--sim-log-style", "0.5.6"])) == "0.5.6"
