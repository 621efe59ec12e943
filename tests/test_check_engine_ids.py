"""The check compares boundaries, never bare ids: each side's ids become boundaries by its own convention.

An SGLang-named draft keeps its ids in `eagle_config` (SGLang counting: boundary = id + 1); speculators' data
generator stores the slots by vLLM's counting (boundary = id) plus the last layer N. On an 8-layer target the
draft's trained wiring [1, 3, 4] (SGLang ids) is the data's boundaries [2, 4, 5], not [1, 3, 4].
"""

from __future__ import annotations

from eagle3_tui.eagle import trainers, wiring
from eagle3_tui.engines import get_engine


def test_sglang_named_draft_against_speculators_data() -> None:
    cfg = {"architectures": ["LlamaForCausalLMEagle3"],
           "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 4], "use_aux_hidden_state": True}}
    boundaries, convention = wiring.config_boundaries(cfg)
    assert (boundaries, convention) == ((2, 4, 5), "sglang")
    slots, note = trainers.speculators_slot_boundaries(4, 8, boundaries)
    assert slots == (2, 4, 5, 8) and "2, 4, 5, 8" in note
    # the engines agree: SGLang serves this draft at the same boundaries the data holds
    assert get_engine("sglang").captured_boundaries(cfg, 8) == (2, 4, 5)


def test_speculators_draft_top_level_ids() -> None:
    cfg = {"eagle_aux_hidden_state_layer_ids": [2, 4, 5], "speculators_model_type": "eagle3"}
    assert wiring.config_boundaries(cfg) == ((2, 4, 5), "vllm")
    assert trainers.speculators_slot_boundaries(4, 8, wiring.config_boundaries(cfg)[0])[0] == (2, 4, 5, 8)
    assert get_engine("vllm").captured_boundaries(cfg, 8) == (2, 4, 5)


def test_top_level_wins_and_nothing_named() -> None:
    both = {"eagle_aux_hidden_state_layer_ids": [2, 4, 5], "eagle_config": {"eagle_aux_hidden_state_layer_ids": [0, 1, 2]}}
    assert wiring.config_boundaries(both) == ((2, 4, 5), "vllm")
    assert wiring.config_boundaries({}) == (None, "")
    assert wiring.config_boundaries({"eagle_config": {"eagle_aux_hidden_state_layer_ids": "1,3,4"}}) == (None, "")
    # without ids the generator's default layout is assumed: vLLM's (2, N//2, N-3) plus N
    assert trainers.speculators_slot_boundaries(4, 8, None)[0] == (2, 4, 5, 8)
