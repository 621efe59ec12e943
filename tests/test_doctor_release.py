"""Doctor rules that follow the installed SGLang (Facts.installed), with the answers read from real wheels."""

from __future__ import annotations

import json
import shlex
from functools import cache

from eagle3_tui.doctor import Facts, diagnose
from eagle3_tui.doctor import release_rules as RR
from eagle3_tui.doctor import rules as R
from eagle3_tui.eagle.checkpoint import TensorInfo, check_tensors, expected_tensors
from eagle3_tui.eagle.draft_config import DraftConfig
from eagle3_tui.sglang.installed import Release, answer, lookup, read_release
from eagle3_tui.sglang.launch import parse_launch
from tests.sglang_wheels import reader

LAUNCH = ("python3 -m sglang.launch_server --model-path /m --speculative-algorithm EAGLE3 "
          "--speculative-draft-model-path /d --speculative-num-steps 3 --speculative-eagle-topk 1 "
          "--speculative-num-draft-tokens 4")
SIZES = {"hidden_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "intermediate_size": 128,
         "vocab_size": 1000, "draft_vocab_size": 100, "num_hidden_layers": 1, "rope_theta": 10000.0}


@cache
def _release(version: str) -> Release:
    return read_release(reader(version))


def draft(ids: list[int] | None, **keys: object) -> DraftConfig:
    raw: dict[str, object] = {"architectures": ["LlamaForCausalLMEagle3"], **SIZES, **keys}
    if ids is not None:
        raw["eagle_config"] = {"eagle_aux_hidden_state_layer_ids": ids}
    return DraftConfig.parse(json.dumps(raw))


def facts(version: str, arch: str, n: int, ids: list[int] | None, *, launch: str = LAUNCH, **more: object) -> Facts:
    config = more.pop("draft_config", None) or draft(ids)
    got = answer(_release(version), lookup(arch), n, ids)
    return Facts(launch=parse_launch(shlex.split(launch)), draft_config=config, target_num_layers=n,
                 target_arch=lookup(arch).architecture, installed=got, **more)  # type: ignore[arg-type]


def ids_of(f: Facts) -> set[str]:
    return {x.rule_id for x in diagnose(f)}


def test_qwen3_captures_the_embedding_stock_but_decode_replays_the_default_on_0_5_6():
    f = facts("0.5.6", "qwen3", 36, [-1, 2, 17])
    found = {x.rule_id: x for x in diagnose(f)}
    assert R.EMBED_NEEDS_PATCH not in found
    prefill = found[RR.IDS_PREFILL_ONLY]
    assert prefill.severity == "error" and "h2, h18, h33" in prefill.title
    assert "--disable-cuda-graph" in prefill.fix and "0.5.11" in prefill.fix
    assert any("cuda_graph_runner.py" in e.source for e in prefill.evidence)
    off = facts("0.5.6", "qwen3", 36, [-1, 2, 17], launch=LAUNCH + " --disable-cuda-graph")
    assert RR.IDS_PREFILL_ONLY not in ids_of(off)
    assert RR.IDS_PREFILL_ONLY not in ids_of(facts("0.5.12", "qwen3", 36, [-1, 2, 17]))


def test_explicit_default_shift_follows_the_release_for_deepseek():
    old = {x.rule_id: x for x in diagnose(facts("0.5.6", "deepseek_v3", 61, [2, 30, 58]))}
    assert "h3, h31, h59" in old[R.EXPLICIT_DEFAULT_SHIFT].title
    assert any("deepseek_v2.py" in e.source for e in old[R.EXPLICIT_DEFAULT_SHIFT].evidence)
    new = ids_of(facts("0.5.23", "deepseek_v3", 61, [2, 30, 58]))
    assert R.EXPLICIT_DEFAULT_SHIFT not in new  # verbatim unless the first id is 1 (0.5.13+)
    assert R.EXPLICIT_DEFAULT_SHIFT in ids_of(facts("0.5.23", "llama", 32, [2, 16, 29]))


def test_embed_needs_patch_by_release():
    ds = {x.rule_id: x for x in diagnose(facts("0.5.23", "deepseek_v3", 61, [-1, 2, 30]))}
    f = ds[R.EMBED_NEEDS_PATCH]
    assert f.severity == "error" and "write 0 instead of -1" in f.fix
    assert RR.WILL_NOT_START not in ds  # one cause, one finding
    llama = {x.rule_id: x for x in diagnose(facts("0.5.6", "llama", 32, [-1, 2, 15]))}
    assert "will not start" in llama[R.EMBED_NEEDS_PATCH].title
    assert R.EMBED_NEEDS_PATCH not in ids_of(facts("0.5.23", "llama", 32, [-1, 2, 15]))


def test_served_boundaries_come_from_the_release():
    served = R.served_boundaries(facts("0.5.23", "deepseek_v3", 61, [2, 30, 58]))
    assert served is not None and served[0] == (2, 30, 58) and "0.5.23" in served[1]


def test_will_not_start_for_steps_alone_and_sticky_qwen_moe_marks():
    alone = ("python3 -m sglang.launch_server --model-path /m --speculative-algorithm EAGLE3 "
             "--speculative-draft-model-path /d --speculative-num-steps 3")
    f = {x.rule_id: x for x in diagnose(facts("0.5.6", "llama", 32, None, launch=alone))}
    assert "will not start on SGLang 0.5.6" in f[RR.WILL_NOT_START].title
    assert RR.WILL_NOT_START not in ids_of(facts("0.4.9", "llama", 32, None, launch=alone))
    moe = {x.rule_id: x for x in diagnose(facts("0.5.6", "qwen3_moe", 48, [2, 24, 45]))}
    assert "fc takes 3 aux states" in moe[RR.WILL_NOT_START].title
    off = facts("0.5.6", "qwen3_moe", 48, [2, 24, 45], launch=LAUNCH + " --disable-cuda-graph")
    assert RR.WILL_NOT_START not in ids_of(off)


def test_multi_layer_draft_before_0_5_12():
    two = draft(None, num_hidden_layers=2)
    assert RR.WILL_NOT_START in ids_of(facts("0.5.6", "llama", 32, None, draft_config=two))
    assert RR.WILL_NOT_START not in ids_of(facts("0.5.12", "llama", 32, None, draft_config=two))


def test_eagle_algorithm_with_an_eagle3_draft():
    eagle = LAUNCH.replace("EAGLE3", "EAGLE")
    f = {x.rule_id: x for x in diagnose(facts("0.5.6", "llama", 32, None, launch=eagle))}
    assert f[RR.EAGLE_NOT_EAGLE3].severity == "error" and "EAGLE3" in f[RR.EAGLE_NOT_EAGLE3].fix


def _tensors(config: DraftConfig, rename: dict[str, str], extra: dict[str, tuple[int, ...]]) -> dict[str, TensorInfo]:
    out: dict[str, TensorInfo] = {}
    for name, shape in expected_tensors(config.raw, target_hidden_size=64).items():
        for old, new in rename.items():
            name = name.replace(old, new)
        out[name] = TensorInfo("BF16", shape, "model.safetensors")
    for name, shape in extra.items():
        out[name] = TensorInfo("BF16", shape, "model.safetensors")
    return out


def _checkpoint_facts(version: str, config: DraftConfig, tensors: dict[str, TensorInfo]) -> Facts:
    issues = check_tensors(config.raw, tensors, target_hidden_size=64, num_aux=3, d2t_values=())
    return facts(version, "llama", 32, None, draft_config=config, checkpoint_issues=issues,
                 checkpoint_tensors=tensors, target_hidden_size=64)


def test_layers0_names_load_from_0_5_12():
    config = draft(None)
    tensors = _tensors(config, {"midlayer.": "layers.0."}, {})
    assert R.UNKNOWN_WEIGHTS in ids_of(_checkpoint_facts("0.5.6", config, tensors))
    assert R.UNKNOWN_WEIGHTS not in ids_of(_checkpoint_facts("0.5.12", config, tensors))


def test_fc_norm_applied_when_the_config_sets_it():
    norms = {f"fc_norm.{i}.weight": (64,) for i in range(3)}
    flagged = draft(None, fc_norm=True)
    unflagged = draft(None)
    assert R.IGNORED_NORMS in ids_of(_checkpoint_facts("0.5.6", flagged, _tensors(flagged, {}, norms)))
    assert R.IGNORED_NORMS not in ids_of(_checkpoint_facts("0.5.23", flagged, _tensors(flagged, {}, norms)))
    kept = {x.rule_id: x for x in diagnose(_checkpoint_facts("0.5.23", unflagged, _tensors(unflagged, {}, norms)))}
    assert "applies fc_norm" in kept[R.IGNORED_NORMS].fix


def test_installed_for_other_ids_is_not_used():
    f = facts("0.5.23", "deepseek_v3", 61, [2, 30, 58])
    f.draft_config = draft([1, 29, 57])
    assert RR.installed_for_ids(f) is None


def test_wiring_fix_names_the_ids_the_release_needs():
    """The story's training wiring [embed, h3, h31] on Kimi-K2.5: -1-based ids and the patch on 0.5.12
    (kimi_k25.py -> deepseek_v2.py, +1), verbatim ids [0, 3, 31] and no patch on 0.5.23."""
    old = facts("0.5.12", "kimi_k25", 61, [2, 30, 58], data_slot_boundaries=(0, 3, 31, 59))
    fix = {x.rule_id: x for x in diagnose(old)}[R.WIRING_MISMATCH].fix
    assert "[-1, 2, 30]" in fix and "embed-capture patch" in fix
    new = facts("0.5.23", "kimi_k25", 61, [2, 30, 58], data_slot_boundaries=(0, 3, 31, 59))
    fix = {x.rule_id: x for x in diagnose(new)}[R.WIRING_MISMATCH].fix
    assert "[0, 3, 31]" in fix and "patch" not in fix
