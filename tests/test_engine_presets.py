"""Presets on vLLM, in vLLM's terms (session/presets/engine.py): a layer preset writes the ids vLLM reads
(its top-level key; vLLM's ids are boundaries) with only the ids' text changed, a flag preset rewrites
`num_speculative_tokens` or the draft inside `--speculative-config`, and both plans are checked."""

from __future__ import annotations

import json
import shlex

import pytest

from eagle3_tui.engines import get_engine
from eagle3_tui.errors import UserError
from eagle3_tui.profile import Preset
from eagle3_tui.session.presets.catalog import NO_SPEC_PRESET, TRAIN_PRESET, find_preset
from eagle3_tui.session.presets.engine import builtin_presets, plan_flags, plan_layers, with_boundaries

VLLM = get_engine("vllm")
SPEC = {"method": "eagle3", "model": "/d", "num_speculative_tokens": 3}
ARGV = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m", "--port", "8123",
        "--speculative-config", json.dumps(SPEC)]
CONFIG = json.dumps({"architectures": ["Eagle3LlamaForCausalLM"], "hidden_size": 64,
                     "eagle_aux_hidden_state_layer_ids": [1, 4, 6]}, indent=2) + "\n"


def _presets(num_layers: int = 8) -> list[Preset]:
    own = builtin_presets(VLLM, data_slots=(2, 4, 5, 8), current=VLLM.parse_launch(ARGV))
    return [with_boundaries(VLLM, p, num_layers) for p in own]


def test_builtin_presets_speak_vllms_ids() -> None:
    presets = _presets()
    assert [p.name for p in presets] == ["vllm-default", TRAIN_PRESET, NO_SPEC_PRESET, "draft-tokens=2",
                                         "draft-tokens=4"]
    train = find_preset(presets, TRAIN_PRESET)
    assert train.layer_ids == train.boundaries == (2, 4, 5)  # vLLM's ids are the boundaries
    assert find_preset(presets, "vllm-default").boundaries == VLLM.default_boundaries(8) == (2, 4, 5)


def test_a_layer_preset_changes_only_the_ids_text() -> None:
    plan = plan_layers(VLLM, find_preset(_presets(), TRAIN_PRESET), path="/d/config.json", before=CONFIG,
                       num_layers=8, fc_num_aux=3)
    assert plan.ok and json.loads(plan.after)["eagle_aux_hidden_state_layer_ids"] == [2, 4, 5]
    changed = [(a, b) for a, b in zip(CONFIG.splitlines(), plan.after.splitlines(), strict=True) if a != b]
    assert changed and all(a.strip().rstrip(",").isdigit() for a, _ in changed)  # only the ids' items
    assert "the draft will receive boundaries" in " ".join(plan.warnings)
    default = plan_layers(VLLM, find_preset(_presets(), "vllm-default"), path="/d/config.json", before=CONFIG,
                          num_layers=8, fc_num_aux=3)
    assert "eagle_aux_hidden_state_layer_ids" not in json.loads(default.after)


def test_ids_that_collapse_or_cannot_be_captured_block_the_preset() -> None:
    # a 5-layer target: vLLM's default (2, 2, 2) de-duplicates to one state for an fc that takes three
    small = plan_layers(VLLM, with_boundaries(VLLM, Preset("d", "layers", None), 5), path="c", before=CONFIG,
                        num_layers=5, fc_num_aux=3)
    assert not small.ok and "would capture 1 hidden states" in small.problems[0]
    far = plan_layers(VLLM, Preset("far", "layers", (1, 4, 12)), path="c", before=CONFIG, num_layers=8, fc_num_aux=3)
    assert not far.ok and "never captures boundaries" in far.problems[0]


def test_flag_presets_rewrite_the_speculative_config() -> None:
    plan = plan_flags(VLLM, find_preset(_presets(), "draft-tokens=2"), argv=ARGV)
    after = shlex.split(plan.after)
    assert json.loads(after[after.index("--speculative-config") + 1])["num_speculative_tokens"] == 2
    assert after[:-1] == ARGV[:-1] and plan.before == shlex.join(ARGV) + "\n"
    base = shlex.split(plan_flags(VLLM, find_preset(_presets(), NO_SPEC_PRESET), argv=ARGV).after)
    assert "--speculative-config" not in base and base == ARGV[:-2]
    moved = shlex.split(plan_flags(VLLM, Preset("d2", "flags", flags={"draft_model": "/d2"}), argv=ARGV).after)
    assert json.loads(moved[-1])["model"] == "/d2"
    with pytest.raises(UserError, match="num_speculative_tokens"):
        plan_flags(VLLM, Preset("x", "flags", flags={"speculative-num-steps": 2}), argv=ARGV)


def test_a_sweep_on_vllm_serves_chains_in_vllms_terms() -> None:
    """vLLM drafts a chain of num_speculative_tokens: the sweep keeps the grid's chains (steps/1/steps+1),
    and serves each by rewriting num_speculative_tokens inside --speculative-config, every other token kept."""
    from eagle3_tui.eagle.spec_config import SpecConfig
    from eagle3_tui.session.sweep import config_plan, servable
    from eagle3_tui.session.terms import SeamTerms, terms_for

    grid = [SpecConfig(3, 1, 4), SpecConfig(3, 4, 8), SpecConfig(5, 4, 16), SpecConfig(7, 1, 8), SpecConfig(2, 1, 2)]
    assert servable(VLLM, grid) == [SpecConfig(3, 1, 4), SpecConfig(7, 1, 8)]
    assert servable(get_engine("sglang"), grid) == grid
    terms = terms_for(VLLM)
    assert isinstance(terms, SeamTerms)
    argv = terms.sweep_argv(SpecConfig(7, 1, 8), ARGV)
    at = argv.index("--speculative-config")
    assert json.loads(argv[at + 1]) == {**SPEC, "num_speculative_tokens": 7}
    assert argv[:at] + argv[at + 2:] == ARGV[:at] + ARGV[at + 2:]
    plan = config_plan(terms, "sweep 7/1/8", SpecConfig(7, 1, 8), ARGV)
    assert plan.problems == [] and shlex.split(plan.after) == argv


def test_vllm_flag_presets_read_as_changes_inside_speculative_config() -> None:
    """The Config pane shows vLLM's flag presets as what they change: keys inside --speculative-config
    (there is no --num_speculative_tokens flag), and the no-speculation preset drops the flag itself."""
    from eagle3_tui.ui.format import fmt_flags

    shown = {p.name: fmt_flags(dict(p.flags)) for p in _presets() if p.kind == "flags"}
    assert shown["draft-tokens=2"] == "--speculative-config num_speculative_tokens=2"
    assert shown[NO_SPEC_PRESET] == "drop --speculative-config"
    assert fmt_flags({"speculative-num-steps": 15}) == "--speculative-num-steps 15"  # SGLang's flags as they are


def test_sglang_sweeps_through_its_own_three_flags() -> None:
    """SGLang's terms serve a configuration through its three flags, with its own effective-value check:
    topk 1 with more draft tokens than steps + 1 is adjusted, and the plan says so."""
    from eagle3_tui.eagle.spec_config import SpecConfig
    from eagle3_tui.session.sweep import config_plan
    from eagle3_tui.session.terms import SGLangTerms, terms_for

    terms = terms_for(get_engine("sglang"))
    assert isinstance(terms, SGLangTerms)
    argv = ["python", "-m", "sglang.launch_server", "--model-path", "/m", "--speculative-algorithm", "EAGLE3",
            "--speculative-draft-model-path", "/d", "--speculative-num-steps", "3", "--port", "30000"]
    after = terms.sweep_argv(SpecConfig(2, 1, 3), argv)
    assert after[after.index("--speculative-num-steps") + 1] == "2"
    assert after[after.index("--speculative-eagle-topk") + 1] == "1"
    assert after[after.index("--speculative-num-draft-tokens") + 1] == "3"
    assert after[after.index("--port") + 1] == "30000" and after[:5] == argv[:5]
    plan = config_plan(terms, "sweep 2/1/8", SpecConfig(2, 1, 8), argv)
    assert any("draft tokens 3" in w for w in plan.warnings), plan.warnings
