"""Each doctor rule: one case where it must fire (with evidence and a fix) and one where it must not."""

from __future__ import annotations

import json
import shlex

import pytest

from eagle3_tui.doctor import Facts, diagnose
from eagle3_tui.doctor import rules as R
from eagle3_tui.doctor.findings import Finding
from eagle3_tui.eagle.checkpoint import CheckpointIssue
from eagle3_tui.eagle.draft_config import DraftConfig
from eagle3_tui.sglang.launch import parse_launch

N = 61  # the seeds' Kimi-K2.5 target

SEED_LAUNCH = parse_launch(
    shlex.split(
        "python3 -m sglang.launch_server --model-path /models/Kimi-K2.5 --tp 8 --speculative-algorithm EAGLE3 "
        "--speculative-draft-model-path /root/draft --speculative-num-steps 1 "
        "--speculative-num-draft-tokens 16 --speculative-eagle-topk 1"
    )
)
GOOD_LAUNCH = parse_launch(
    shlex.split(
        "python3 -m sglang.launch_server --model-path /m --speculative-algorithm EAGLE3 "
        "--speculative-num-steps 5 --speculative-num-draft-tokens 6 --speculative-eagle-topk 1"
    )
)


def cfg(**keys: object) -> DraftConfig:
    base = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 7168, "rope_theta": 50000.0}
    base.update(keys)
    return DraftConfig.parse(json.dumps({k: v for k, v in base.items() if v is not None}))


def nested(ids: list[int], **keys: object) -> DraftConfig:
    return cfg(eagle_config={"eagle_aux_hidden_state_layer_ids": ids}, **keys)


def check(finding: Finding | None, rule_id: str, severity: str) -> Finding:
    assert finding is not None, f"{rule_id} did not fire"
    assert finding.rule_id == rule_id and finding.severity == severity
    assert finding.evidence and all(e.source and e.detail for e in finding.evidence)
    assert finding.fix.endswith(".") and finding.fix.count(". ") == 0  # one sentence
    assert finding.title
    return finding


# --- steps-override -------------------------------------------------------------------------------


def test_steps_override_fires_on_the_seed_flags() -> None:
    f = check(R.steps_override(Facts(launch=SEED_LAUNCH, launch_source="process 4242",
                                     server_args={"speculative_num_draft_tokens": 2})), R.STEPS_OVERRIDE, "warning")
    details = " ".join(e.detail for e in f.evidence)
    assert "--speculative-num-draft-tokens 16" in details and "steps + 1 = 2" in details
    assert any(e.source == "/server_info" and "= 2" in e.detail for e in f.evidence)
    assert "--speculative-num-steps 15" in f.fix
    assert f.evidence[0].source == "process 4242"


def test_steps_override_from_the_log_warning_alone() -> None:
    w = "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"
    f = check(R.steps_override(Facts(log_warnings=(w,), log_path="/var/log/sglang.log")), R.STEPS_OVERRIDE, "warning")
    assert f.evidence[0].source == "/var/log/sglang.log"


def test_steps_override_silent_when_consistent() -> None:
    assert R.steps_override(Facts(launch=GOOD_LAUNCH)) is None
    topk4 = parse_launch(["sglang", "serve", "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
                          "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "16"])
    assert R.steps_override(Facts(launch=topk4)) is None
    assert R.steps_override(Facts()) is None


# --- spec-flags-incomplete (beyond DESIGN's table) -------------------------------------------------


def test_spec_flags_incomplete_fires_without_steps() -> None:
    a = parse_launch(["sglang", "serve", "--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "1",
                      "--speculative-num-draft-tokens", "16"])
    f = check(R.spec_flags_incomplete(Facts(launch=a)), R.SPEC_FLAGS_INCOMPLETE, "error")
    assert "--speculative-eagle-topk 1 --speculative-num-draft-tokens 16" in f.evidence[0].detail


def test_spec_flags_incomplete_silent_when_complete_or_all_unset() -> None:
    assert R.spec_flags_incomplete(Facts(launch=SEED_LAUNCH)) is None
    assert R.spec_flags_incomplete(Facts(launch=parse_launch(["sglang", "serve", "--speculative-algorithm", "EAGLE3"]))) is None
    assert R.spec_flags_incomplete(Facts()) is None


# --- config-key-ignored ---------------------------------------------------------------------------


def test_config_key_ignored_top_level_ids() -> None:
    f = check(
        R.config_key_ignored(Facts(draft_config=cfg(eagle_aux_hidden_state_layer_ids=[0, 3, 31]),
                                   draft_config_path="/root/draft/config.json", target_num_layers=N)),
        R.CONFIG_KEY_IGNORED, "error",
    )
    assert f.evidence[0].source == "/root/draft/config.json" and "[0, 3, 31]" in f.evidence[0].detail
    assert "[-1, 2, 30]" in f.fix  # same boundaries in SGLang's counting


def test_config_key_ignored_is_info_when_it_equals_the_default() -> None:
    # vLLM ids (2, 16, 29) on a 32-layer target are SGLang's default boundaries: harmless.
    f = R.config_key_ignored(Facts(draft_config=cfg(eagle_aux_hidden_state_layer_ids=[2, 16, 29]), target_num_layers=32))
    check(f, R.CONFIG_KEY_IGNORED, "info")


def test_config_key_ignored_malformed_nested_value() -> None:
    c = cfg(eagle_config={"eagle_aux_hidden_state_layer_ids": "2,30,58"})
    f = check(R.config_key_ignored(Facts(draft_config=c)), R.CONFIG_KEY_IGNORED, "error")
    assert "not a list of integers" in f.evidence[0].detail


def test_config_key_ignored_silent_when_nested_or_absent() -> None:
    assert R.config_key_ignored(Facts(draft_config=nested([2, 30, 58], eagle_aux_hidden_state_layer_ids=[3, 31, 59]))) is None
    assert R.config_key_ignored(Facts(draft_config=cfg())) is None
    assert R.config_key_ignored(Facts()) is None


# --- explicit-default-shift -----------------------------------------------------------------------


def test_explicit_default_shift_fires() -> None:
    f = check(R.explicit_default_shift(Facts(draft_config=nested([2, 16, 29]), target_num_layers=32)),
              R.EXPLICIT_DEFAULT_SHIFT, "warning")
    assert "h3, h17, h30" in f.title
    assert "[1, 15, 28]" in f.fix


def test_explicit_default_shift_silent_for_the_right_ids() -> None:
    assert R.explicit_default_shift(Facts(draft_config=nested([1, 15, 28]), target_num_layers=32)) is None
    assert R.explicit_default_shift(Facts(draft_config=nested([2, 16, 29]))) is None  # N unknown
    assert R.explicit_default_shift(Facts(draft_config=cfg(), target_num_layers=32)) is None


# --- embed-needs-patch ----------------------------------------------------------------------------


def test_embed_needs_patch_fires_without_the_patch() -> None:
    facts = Facts(draft_config=nested([-1, 2, 30]), embed_capture_supported=False,
                  embed_capture_evidence="/root/sglang/python/sglang/srt/models/deepseek_v2.py: no capture_embedding_for_eagle3")
    f = check(R.embed_needs_patch(facts), R.EMBED_NEEDS_PATCH, "error")
    assert any("deepseek_v2.py" in e.detail for e in f.evidence)


def test_embed_needs_patch_unknown_support_is_info() -> None:
    check(R.embed_needs_patch(Facts(draft_config=nested([-1, 2, 30]))), R.EMBED_NEEDS_PATCH, "info")


def test_embed_needs_patch_silent_with_patch_or_without_minus_one() -> None:
    assert R.embed_needs_patch(Facts(draft_config=nested([-1, 2, 30]), embed_capture_supported=True)) is None
    assert R.embed_needs_patch(Facts(draft_config=nested([2, 30, 58]), embed_capture_supported=False)) is None


def test_sim_patch_flag_is_the_embed_capture_evidence() -> None:
    argv = ["python", "-m", "eagle3_tui.sim.server", "--speculative-algorithm", "EAGLE3"]
    without = diagnose(Facts(launch=parse_launch(argv), draft_config=nested([-1, 1, 5]), target_num_layers=10))
    assert [f.severity for f in without if f.rule_id == R.EMBED_NEEDS_PATCH] == ["error"]
    with_patch = diagnose(Facts(launch=parse_launch([*argv, "--sim-embed-capture-patch"]),
                                draft_config=nested([-1, 1, 5]), target_num_layers=10))
    assert R.EMBED_NEEDS_PATCH not in {f.rule_id for f in with_patch}


# --- layer-out-of-range ---------------------------------------------------------------------------


def test_layer_out_of_range_fires() -> None:
    f = check(R.layer_out_of_range(Facts(draft_config=nested([2, 30, 60]), target_num_layers=N,
                                         target_config_path="/models/Kimi-K2.5/config.json")),
              R.LAYER_OUT_OF_RANGE, "error")
    assert any("id 60 -> boundary 61" in e.detail for e in f.evidence)
    assert "between -1 and 59" in f.fix


def test_layer_out_of_range_silent_in_range() -> None:
    assert R.layer_out_of_range(Facts(draft_config=nested([-1, 30, 59]), target_num_layers=N)) is None
    assert R.layer_out_of_range(Facts(draft_config=nested([2, 30, 600]))) is None  # N unknown


# --- checkpoint rules (map eagle.checkpoint issues) -------------------------------------------------

FC_ISSUE = CheckpointIssue("fc-width", "fc.weight", "fc.weight takes 14336 inputs but the draft is fed 3 aux states x target hidden 7168 = 21504 (it fits 2 aux states)")
UNKNOWN = [
    CheckpointIssue("unknown", f"layers.0.{n}", f"layers.0.{n} is speculators/vLLM naming that SGLang's llama_eagle3 loader skips silently (it loads midlayer.{n}), leaving that weight random")
    for n in ("mlp.up_proj.weight", "self_attn.q_proj.weight")
] + [CheckpointIssue("missing", "midlayer.mlp.up_proj.weight", "midlayer.mlp.up_proj.weight is missing (the checkpoint has layers.0.mlp.up_proj.weight instead, which SGLang does not load)")]
NORM = CheckpointIssue("ignored-norm", "fc_norm.0.weight", "fc_norm.0.weight (fc_norm) is a norm SGLang's llama_eagle3 does not apply")
SHAPE = CheckpointIssue("shape", "norm.weight", "norm.weight is [10] but SGLang's llama_eagle3 expects [7168] from the draft config's sizes")


def test_fc_width_fires_and_names_the_checkpoint() -> None:
    f = check(R.fc_width(Facts(checkpoint_issues=[FC_ISSUE], checkpoint_path="/root/draft", draft_config=cfg(),
                               target_hidden_size=7168)), R.FC_WIDTH, "error")
    assert f.evidence[0] .source == "/root/draft" and "14336" in f.evidence[0].detail


def test_unknown_weights_fires_and_summarises() -> None:
    f = check(R.unknown_weights(Facts(checkpoint_issues=UNKNOWN)), R.UNKNOWN_WEIGHTS, "error")
    assert "2 tensors named layers.0.*" in f.evidence[0].detail
    assert "2 checkpoint tensors" in f.title and "1 it needs" in f.title


def test_ignored_norms_fires() -> None:
    check(R.ignored_norms(Facts(checkpoint_issues=[NORM])), R.IGNORED_NORMS, "warning")


def test_checkpoint_shapes_fires() -> None:
    check(R.checkpoint_shapes(Facts(checkpoint_issues=[SHAPE])), R.CHECKPOINT_SHAPES, "error")


@pytest.mark.parametrize("rule", [R.fc_width, R.unknown_weights, R.ignored_norms, R.checkpoint_shapes])
def test_checkpoint_rules_silent_on_other_issues_or_none(rule) -> None:
    assert rule(Facts()) is None
    assert rule(Facts(checkpoint_issues=[])) is None
    others = {R.fc_width: [NORM, SHAPE, *UNKNOWN], R.unknown_weights: [FC_ISSUE, NORM, SHAPE],
              R.ignored_norms: [FC_ISSUE, SHAPE, *UNKNOWN], R.checkpoint_shapes: [FC_ISSUE, NORM, *UNKNOWN]}[rule]
    assert rule(Facts(checkpoint_issues=others)) is None


# --- rope-theta -----------------------------------------------------------------------------------


def test_rope_theta_fires_and_suggests_the_trained_value() -> None:
    c = DraftConfig.parse(json.dumps({"eagle_aux_hidden_state_layer_ids": [1, 2, 3],
                                      "transformer_layer_config": {"rope_theta": 500000.0}}))
    f = check(R.rope_theta(Facts(draft_config=c, target_rope_theta=500000.0)), R.ROPE_THETA, "warning")
    assert '"rope_theta": 500000' in f.fix
    check(R.rope_theta(Facts(draft_config=cfg(rope_theta=None))), R.ROPE_THETA, "warning")


def test_rope_theta_silent_when_present_or_harmless() -> None:
    assert R.rope_theta(Facts(draft_config=cfg())) is None
    assert R.rope_theta(Facts(draft_config=cfg(rope_theta=None), target_rope_theta=10000.0)) is None
    # trained with 10000 (its own nested config) on a 500000 target: SGLang's fallback is what it learned
    c = DraftConfig.parse(json.dumps({"transformer_layer_config": {"rope_theta": 10000.0}}))
    assert R.rope_theta(Facts(draft_config=c, target_rope_theta=500000.0)) is None


# --- wiring-mismatch ------------------------------------------------------------------------------


def test_wiring_mismatch_on_the_seed_story() -> None:
    facts = Facts(draft_config=nested([2, 30, 58]), target_num_layers=N, data_slot_boundaries=(0, 3, 31, 59),
                  training_convention="[:-1]", data_source="/data/hs/*.pt", draft_config_path="/root/draft/config.json")
    f = check(R.wiring_mismatch(facts), R.WIRING_MISMATCH, "error")
    assert "embed, h3, h31" in f.title and "h3, h31, h59" in f.title
    assert f.evidence[0].source == "/data/hs/*.pt"
    assert "[-1, 2, 30]" in f.fix and "embed-capture patch" in f.fix


def test_wiring_mismatch_assumes_speculators_convention_with_a_verifier_slot() -> None:
    facts = Facts(draft_config=cfg(), target_num_layers=10, data_slot_boundaries=(0, 2, 6, 9))
    f = check(R.wiring_mismatch(facts), R.WIRING_MISMATCH, "error")
    assert "assumed" in f.evidence[0].detail and "h2, h5, h7" in f.title  # SGLang default for N=10


def test_wiring_mismatch_silent_when_aligned() -> None:
    aligned = Facts(draft_config=nested([-1, 2, 30]), target_num_layers=N, data_slot_boundaries=(0, 3, 31, 59),
                    training_convention="[:-1]")
    assert R.wiring_mismatch(aligned) is None
    assert R.wiring_mismatch(Facts(draft_config=nested([2, 30, 58]), target_num_layers=N)) is None  # no data facts
    reported = Facts(served_boundaries=(0, 3, 31), data_slot_boundaries=(0, 3, 31))
    assert R.wiring_mismatch(reported) is None


# --- spec-slower-than-baseline --------------------------------------------------------------------


def test_spec_slower_fires_on_the_seed_numbers() -> None:
    f = check(R.spec_slower_than_baseline(Facts(launch=SEED_LAUNCH, live_gen_tps=56.8, baseline_tps=90.0,
                                                live_accept_len=1.6)), R.SPEC_SLOWER, "warning")
    assert any(e.detail == "0.63x" for e in f.evidence)


def test_spec_slower_silent_when_faster_or_unknown() -> None:
    assert R.spec_slower_than_baseline(Facts(live_gen_tps=120.0, baseline_tps=90.0)) is None
    assert R.spec_slower_than_baseline(Facts(live_gen_tps=56.8)) is None
    no_spec = parse_launch(["sglang", "serve", "--model-path", "m"])
    assert R.spec_slower_than_baseline(Facts(launch=no_spec, live_gen_tps=80.0, baseline_tps=90.0)) is None


# --- online-offline-gap ---------------------------------------------------------------------------


def test_online_offline_gap_fires_on_the_seed_numbers() -> None:
    f = check(R.online_offline_gap(Facts(launch=GOOD_LAUNCH, live_accept_len=1.8, predicted_accept_len=3.29)),
              R.ONLINE_OFFLINE_GAP, "warning")
    assert any("35%" in e.detail for e in f.evidence)
    assert any("steps 5, topk 1, draft tokens 6" in e.detail for e in f.evidence)


def test_online_offline_gap_uses_server_info_when_the_log_has_none() -> None:
    f = check(R.online_offline_gap(Facts(server_info_accept_len=1.5, predicted_accept_len=3.0)),
              R.ONLINE_OFFLINE_GAP, "warning")
    assert f.evidence[0].source.startswith("/server_info")


def test_online_offline_gap_silent_when_close() -> None:
    assert R.online_offline_gap(Facts(live_accept_len=3.0, predicted_accept_len=3.29)) is None
    assert R.online_offline_gap(Facts(live_accept_len=1.1, predicted_accept_len=1.3)) is None  # tiny absolute gap
    assert R.online_offline_gap(Facts(live_accept_len=1.8)) is None


# --- no-accept-stats ------------------------------------------------------------------------------


def test_no_accept_stats_fires_for_old_sglang() -> None:
    f = check(R.no_accept_stats(Facts(launch=GOOD_LAUNCH, log_has_accept_stats=False, log_decode_lines=40,
                                      server_info_accept_len=2.4)), R.NO_ACCEPT_STATS, "info")
    assert any("2.40" in e.detail for e in f.evidence)


def test_no_accept_stats_silent_when_present_or_not_speculating() -> None:
    assert R.no_accept_stats(Facts(launch=GOOD_LAUNCH, log_has_accept_stats=True, log_decode_lines=40)) is None
    no_spec = parse_launch(["sglang", "serve", "--model-path", "m"])
    assert R.no_accept_stats(Facts(launch=no_spec, log_has_accept_stats=False, log_decode_lines=40)) is None
    assert R.no_accept_stats(Facts(launch=GOOD_LAUNCH, log_has_accept_stats=False, log_decode_lines=0)) is None


def test_every_design_rule_has_a_stable_id() -> None:
    design = ["steps-override", "config-key-ignored", "explicit-default-shift", "embed-needs-patch",
              "layer-out-of-range", "fc-width", "unknown-weights", "ignored-norms", "rope-theta",
              "wiring-mismatch", "spec-slower-than-baseline", "online-offline-gap", "no-accept-stats"]
    assert set(design) <= set(R.RULE_IDS)
