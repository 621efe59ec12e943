"""The release's speculative path beyond capture, read from real wheels, and the rules that follow it.

Each release below was read by hand in the wheel's own files (named in the cases); the model reads the
same files, and the version table must agree with it where the source cannot be read.
"""

from __future__ import annotations

import json
import shlex
from functools import cache

import pytest

from eagle3_tui.doctor import Facts, diagnose
from eagle3_tui.doctor import path_rules as P
from eagle3_tui.doctor import release_rules as RR
from eagle3_tui.doctor import rules as R
from eagle3_tui.eagle.draft_config import DraftConfig
from eagle3_tui.sglang.installed import Release, read_release
from eagle3_tui.sglang.installed import table as release_table
from eagle3_tui.sglang.installed.multimodal import CAPTURED, LOST, NO_SETTER, read_multimodal
from eagle3_tui.sglang.installed.source import Modules
from eagle3_tui.sglang.installed.specpath import (
    CONTEXT_OVERRIDDEN,
    CONTEXT_REFUSED,
    TOPK_FALLS_BACK,
    TOPK_REFUSED,
    TOPK_UNCHECKED,
    V2_DEFAULT,
    V2_ONLY,
    V2_OPT_IN,
    WIDTH_DRAFT,
    WIDTH_TARGET,
)
from eagle3_tui.sglang.launch import parse_launch
from tests.sglang_wheels import reader

BASE = "python3 -m sglang.launch_server --model-path /models/target --speculative-algorithm EAGLE3 "
DRAFT_PATH = "--speculative-draft-model-path /models/draft "
CHAIN = "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
TREE = "--speculative-num-steps 3 --speculative-eagle-topk 4 --speculative-num-draft-tokens 8"
SIZES = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 64, "num_attention_heads": 4,
         "num_key_value_heads": 2, "intermediate_size": 128, "vocab_size": 1000, "draft_vocab_size": 100,
         "num_hidden_layers": 1, "rope_theta": 10000.0, "max_position_embeddings": 2048}


@cache
def _release(version: str) -> Release:
    return read_release(reader(version))


def facts(version: str | None, flags: str = DRAFT_PATH + CHAIN, *, env: dict[str, str] | None = None,
          **more: object) -> Facts:
    """A release known by its source alone: no target architecture, no layer count."""
    return Facts(launch=parse_launch(shlex.split(BASE + flags)), release=_release(version) if version else None,
                 server_env=env, **more)  # type: ignore[arg-type]


def found(f: Facts) -> dict[str, object]:
    return {x.rule_id: x for x in diagnose(f)}


# (release, spec v2, its topk > 1 rule, draft-extend graph width, recorder capture-safe, context check)
PATHS = [
    # 0.4.9 eagle_draft_extend_cuda_graph_runner.py:87 `model_config.hidden_size * 3`; model_config.py
    # SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN default="True"
    ("0.4.9", None, None, WIDTH_DRAFT, False, CONTEXT_OVERRIDDEN),
    # 0.4.10: the buffer from hf_config.target_hidden_size (sglang PR #8163)
    ("0.4.10", None, None, WIDTH_TARGET, False, CONTEXT_OVERRIDDEN),
    # 0.5.5 environ.py:258 / 0.5.6 environ.py:307 SGLANG_ENABLE_SPEC_V2 = EnvBool(False); server_args.py
    # (0.5.5:1548, 0.5.6:1693) only `if not envs.SGLANG_ENABLE_SPEC_V2.get(): self.disable_overlap_schedule =
    # True`: no topk check, EAGLE3 reaches EAGLEWorkerV2 (spec_info.py _create_eagle_worker)
    ("0.5.5", V2_OPT_IN, TOPK_UNCHECKED, WIDTH_TARGET, False, CONTEXT_REFUSED),
    ("0.5.6", V2_OPT_IN, TOPK_UNCHECKED, WIDTH_TARGET, False, CONTEXT_REFUSED),
    # 0.5.7 server_args.py:2012 raise ValueError("Spec v2 currently only supports topk = 1 ...")
    ("0.5.7", V2_OPT_IN, TOPK_REFUSED, WIDTH_TARGET, False, CONTEXT_REFUSED),
    # 0.5.2 model_config.py: refused unless the switch, and the draft's max_position_embeddings never stretched
    ("0.5.2", None, None, WIDTH_TARGET, False, CONTEXT_REFUSED),
    # 0.5.9 server_args.py:2381 raise ValueError("Spec v2 currently only supports topk = 1 ...")
    ("0.5.9", V2_OPT_IN, TOPK_REFUSED, WIDTH_TARGET, False, CONTEXT_REFUSED),
    # 0.5.12 environ.py:470 EnvBool(True); server_args.py:3755 spec_v1_reason = "spec v2 currently only ..."
    ("0.5.12", V2_DEFAULT, TOPK_FALLS_BACK, WIDTH_TARGET, False, CONTEXT_REFUSED),
    # 0.5.13 arg_groups/speculative_hook.py: "Non-overlap (synchronous) spec v2 is used" (one worker)
    ("0.5.13", V2_ONLY, None, WIDTH_TARGET, False, CONTEXT_REFUSED),
    # 0.5.23: no switch; eplb/expert_distribution.py _on_forward_pass_start still has no capture check
    ("0.5.23", V2_ONLY, None, WIDTH_TARGET, False, CONTEXT_REFUSED),
]


@pytest.mark.parametrize(("version", "v2", "topk", "width", "safe", "context"), PATHS)
def test_the_path_read_from_the_wheel_and_the_table_agree(version, v2, topk, width, safe, context):
    read = _release(version).path
    got = (read.spec_v2, read.spec_v2_topk, read.extend_graph_width, read.expert_recorder_capture_safe,
           read.context_check)
    assert got == (v2, topk, width, safe, context)
    table = release_table.spec_path(version)
    assert (table.spec_v2, table.spec_v2_topk, table.extend_graph_width, table.expert_recorder_capture_safe,
            table.context_check, table.draft_classes, table.simulate_env, table.draft_window_stretched) == (
        *got, read.draft_classes, read.simulate_env, read.draft_window_stretched)
    assert all(not n.assumed for n in read.notes) and all(n.assumed for n in table.notes)


def test_spec_v2_with_a_tree():
    on = {"SGLANG_ENABLE_SPEC_V2": "1"}
    # 0.5.5-0.5.6: nothing checks topk, the chain-only v2 worker crashes on a tensor size: the doctor's error
    for version in ("0.5.5", "0.5.6"):
        crash = found(facts(version, DRAFT_PATH + TREE, env=on))[P.SPEC_V2_TOPK]
        assert crash.severity == "error" and "tensor size error" in crash.title and version in crash.title
        assert "--disable-overlap-schedule" in crash.fix and "SGLANG_ENABLE_SPEC_V2" in crash.fix
        assert any("#13352" in e.source for e in crash.evidence)
        assert any("server_args.py" in e.source for e in crash.evidence)
        assert P.SPEC_V2_TOPK not in found(facts(version, DRAFT_PATH + TREE, env={}))  # spec v2 off by default
        assert P.SPEC_V2_TOPK not in found(facts(version, DRAFT_PATH + CHAIN, env=on))
        # with the overlap scheduler off the v1 worker drafts the tree
        assert P.SPEC_V2_TOPK not in found(facts(version, DRAFT_PATH + TREE + " --disable-overlap-schedule", env=on))
    # 0.5.7-0.5.10: SGLang says it itself at start-up; the doctor only adds the way out
    for version in ("0.5.7", "0.5.9"):
        refused = found(facts(version, DRAFT_PATH + TREE, env=on))[P.SPEC_V2_TOPK]
        assert refused.severity == "info" and "saying so itself" in refused.title
        assert any("server_args.py" in e.source for e in refused.evidence)
    assert P.SPEC_V2_TOPK not in found(facts("0.5.9", DRAFT_PATH + TREE, env={}))  # off by default there
    fallback = found(facts("0.5.12", DRAFT_PATH + TREE, env={}))[P.SPEC_V2_TOPK]
    assert fallback.severity == "info" and "spec v1" in fallback.title and "0.5.13" in fallback.fix
    assert P.SPEC_V2_TOPK not in found(facts("0.5.12", DRAFT_PATH + TREE, env={"SGLANG_ENABLE_SPEC_V2": "0"}))
    assert P.SPEC_V2_TOPK not in found(facts("0.5.12", DRAFT_PATH + CHAIN, env={}))
    assert P.SPEC_V2_TOPK not in found(facts("0.5.23", DRAFT_PATH + TREE, env={}))
    # 0.5.4: the switch is the launch flag --enable-beta-spec (server_args.py:1302 `if not self.enable_beta_spec:
    # self.disable_overlap_schedule = True`); the environment variable does nothing there
    r054 = _release("0.5.4").path
    assert (r054.spec_v2, r054.spec_v2_topk, r054.spec_v2_flag) == (None, TOPK_UNCHECKED, "--enable-beta-spec")
    assert P.SPEC_V2_TOPK not in found(facts("0.5.4", DRAFT_PATH + TREE, env=on))
    beta = found(facts("0.5.4", DRAFT_PATH + TREE + " --enable-beta-spec", env={}))[P.SPEC_V2_TOPK]
    assert beta.severity == "error" and "--enable-beta-spec" in beta.title and beta.fix.startswith("Drop --enable-beta-spec")
    assert any("#11690" in e.source for e in beta.evidence)
    table054 = release_table.spec_path("0.5.4")
    assert (table054.spec_v2_topk, table054.spec_v2_flag) == (TOPK_UNCHECKED, "--enable-beta-spec")
    assert release_table.spec_path("0.5.3").spec_v2_flag is None and release_table.spec_path("0.5.5").spec_v2_flag is None
    # the table, where no source is read, says the same per version
    assert release_table.spec_path("0.5.5").spec_v2_topk == TOPK_UNCHECKED
    assert release_table.spec_path("0.5.10").spec_v2_topk == TOPK_REFUSED


def test_expert_distribution_metrics_with_several_steps():
    flag = " --enable-expert-distribution-metrics"
    hit = found(facts("0.5.23", DRAFT_PATH + CHAIN + flag))[P.EXPERT_METRICS_STEPS]
    assert hit.severity == "error" and "#32105" in " ".join(e.source for e in hit.evidence)
    one = DRAFT_PATH + "--speculative-num-steps 1 --speculative-eagle-topk 1 --speculative-num-draft-tokens 2"
    assert P.EXPERT_METRICS_STEPS not in found(facts("0.5.23", one + flag))
    assert P.EXPERT_METRICS_STEPS not in found(facts("0.5.23", DRAFT_PATH + CHAIN + flag + " --disable-cuda-graph"))
    assert P.EXPERT_METRICS_STEPS not in found(facts("0.5.23", DRAFT_PATH + CHAIN))
    unknown = found(facts(None, DRAFT_PATH + CHAIN + flag))[P.EXPERT_METRICS_STEPS]
    assert unknown.severity == "warning"  # the issue alone, without the release's source


def test_draft_extend_graph_width_before_0_4_10():
    wide = DraftConfig.parse(json.dumps({**SIZES, "hidden_size": 4096, "target_hidden_size": 8192}))
    hit = found(facts("0.4.9", draft_config=wide))[P.DRAFT_EXTEND_WIDTH]
    assert hit.severity == "error" and "0.4.10" in hit.fix and "#7011" in " ".join(e.source for e in hit.evidence)
    assert P.DRAFT_EXTEND_WIDTH not in found(facts("0.4.10", draft_config=wide))
    assert P.DRAFT_EXTEND_WIDTH not in found(facts("0.4.9", DRAFT_PATH + CHAIN + " --disable-cuda-graph",
                                                   draft_config=wide))
    same = DraftConfig.parse(json.dumps({**SIZES, "target_hidden_size": 64}))
    assert P.DRAFT_EXTEND_WIDTH not in found(facts("0.4.9", draft_config=same))


def test_eagle3_without_a_draft_path():
    mtp = found(facts("0.5.6", CHAIN, target_arch="DeepseekV3ForCausalLM"))[P.NO_DRAFT_PATH]
    assert "MTP" in mtp.title and "--speculative-draft-model-path" in mtp.fix
    # configs/model_config.py from_server_args: model_path=model_path or server_args.model_path
    plain = found(facts("0.5.6", CHAIN, target_arch="LlamaForCausalLM"))[P.NO_DRAFT_PATH]
    assert "loads the target (/models/target) as the draft" in plain.title
    assert any("model_config.py" in e.source and "target is loaded as the draft" in e.detail for e in plain.evidence)
    assert _release("0.5.4").path.draft_defaults_to_target and _release("0.5.7").path.draft_defaults_to_target
    unknown = found(facts(None, CHAIN))[P.NO_DRAFT_PATH]
    assert "as the draft" in unknown.title and "no draft to load" not in unknown.title
    assert "DeepseekV3ForCausalLM" in _release("0.5.23").path.draft_path_from_target
    assert P.NO_DRAFT_PATH not in found(facts("0.5.6", DRAFT_PATH + CHAIN))


def test_server_switches_are_judged_against_the_release():
    sim = found(facts("0.5.23", env={"SGLANG_SIMULATE_ACC_LEN": "3.5"}))[P.SERVER_ENV]
    assert sim.severity == "warning" and "simulated" in sim.evidence[0].detail
    ignored = found(facts("0.4.9", env={"SGLANG_SIMULATE_ACC_LEN": "3.5"}))[P.SERVER_ENV]
    assert ignored.severity == "info" and "SIMULATE_ACC_LEN" in ignored.evidence[0].detail
    bad = found(facts("0.5.9", env={"SGLANG_ENABLE_SPEC_V2": "maybe"}))[P.SERVER_ENV]
    assert bad.severity == "error" and "ValueError" in bad.evidence[0].detail
    gone = found(facts("0.5.23", env={"SGLANG_ENABLE_SPEC_V2": "1"}))[P.SERVER_ENV]
    assert gone.severity == "info" and "no effect" in gone.evidence[0].detail
    off = found(facts("0.5.12", env={"SGLANG_ENABLE_SPEC_V2": "false"}))[P.SERVER_ENV]
    assert "spec v1" in off.evidence[0].detail
    assert P.SERVER_ENV not in found(facts("0.5.23", env={"SGLANG_LOG_LEVEL": "info", "NCCL_DEBUG": "WARN"}))
    assert P.SERVER_ENV not in found(facts("0.5.23", env=None))


def test_steps_without_topk_needs_no_architecture():
    steps_alone = DRAFT_PATH + "--speculative-num-steps 3"
    hit = found(facts("0.5.6", steps_alone))[RR.WILL_NOT_START]
    assert "TypeError" in hit.evidence[0].detail and "0.5.6" in hit.title
    assert RR.WILL_NOT_START not in found(facts("0.5.6"))


def test_steps_without_topk_when_the_release_is_unknown():
    hit = found(facts(None, DRAFT_PATH + "--speculative-num-steps 3"))[R.SPEC_FLAGS_INCOMPLETE]
    assert hit.severity == "warning" and "0.5.2" in hit.title
    assert R.SPEC_FLAGS_INCOMPLETE not in found(facts(None))
    assert R.SPEC_FLAGS_INCOMPLETE not in found(facts("0.5.6", DRAFT_PATH + "--speculative-num-steps 3"))


# (release, multimodal target, what its wrapper does with the ids), read in each wheel's model file
MULTIMODAL = [
    ("0.5.1", "Qwen2_5_VLForConditionalGeneration", NO_SETTER),  # qwen2_5_vl.py: no setter (PR #8801 later)
    ("0.5.2", "Qwen2_5_VLForConditionalGeneration", CAPTURED),  # sets Qwen2Model.layers_to_capture
    ("0.5.6", "Qwen3VLForConditionalGeneration", NO_SETTER),
    ("0.5.12", "Qwen3VLForConditionalGeneration", CAPTURED),  # Qwen3LLMModel.forward reads layers_to_capture
    ("0.5.12", "Qwen3_5ForConditionalGeneration", LOST),  # Qwen3_5ForCausalLM collects _is_layer_to_capture
    ("0.5.22", "Qwen3_5MoeForConditionalGeneration", CAPTURED),  # the wrapper calls the language model's setter
]


@pytest.mark.parametrize(("version", "arch", "status"), MULTIMODAL)
def test_multimodal_wrappers_read_from_the_wheel_and_the_table_agree(version, arch, status):
    read = read_multimodal(Modules(reader(version)), arch)
    assert read is not None and read.status == status and not read.note.assumed
    table = release_table.multimodal(version, arch)
    assert table is not None and table.status == status and table.note.assumed


def test_a_multimodal_target_that_loses_the_aux_states():
    lost = found(facts("0.5.12", target_arch="Qwen3_5ForConditionalGeneration"))[P.MULTIMODAL_CAPTURE]
    assert lost.severity == "error" and "loses the aux states" in lost.title and "0.5.22" in lost.fix
    assert "_is_layer_to_capture" in lost.evidence[1].detail
    missing = found(facts("0.5.6", target_arch="Qwen3VLForConditionalGeneration"))[P.MULTIMODAL_CAPTURE]
    assert "no set_eagle3_layers_to_capture" in missing.title and "0.5.11" in missing.fix
    assert P.MULTIMODAL_CAPTURE not in found(facts("0.5.22", target_arch="Qwen3_5ForConditionalGeneration"))
    assert P.MULTIMODAL_CAPTURE not in found(facts("0.5.12", target_arch="Qwen3VLForConditionalGeneration"))
    assert P.MULTIMODAL_CAPTURE not in found(facts("0.5.12", target_arch="LlamaForCausalLM"))
    by_version = Facts(launch=parse_launch(shlex.split(BASE + DRAFT_PATH + CHAIN)),
                       release=read_release(None, version="0.5.15"), target_arch="Qwen3_5ForConditionalGeneration")
    assert "assumed from version 0.5.15" in found(by_version)[P.MULTIMODAL_CAPTURE].evidence[1].detail
