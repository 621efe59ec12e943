"""Which target states vLLM feeds the draft: its draft-config id convention (vllm 0.32 gpu_model_runner.py)."""

from __future__ import annotations

from eagle3_tui.vllm import capture, procs


def test_top_level_wins_over_nested() -> None:
    cfg = {"eagle_aux_hidden_state_layer_ids": [0, 2, 6], "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 5, 8]}}
    a = capture.aux_layers(cfg, 12)
    assert (a.ids, a.source, a.boundaries, a.ignored) == ((0, 2, 6), capture.TOP_LEVEL, (0, 2, 6), (capture.NESTED,))


def test_nested_when_no_top_level() -> None:
    a = capture.aux_layers({"eagle_config": {"eagle_aux_hidden_state_layer_ids": [6, 2, 2]}}, 12)
    assert a.source == capture.NESTED and a.boundaries == (2, 6) and a.collapsed


def test_default_and_its_collapse_on_small_targets() -> None:
    assert capture.aux_layers({}, 12).boundaries == (2, 6, 9)
    assert capture.aux_layers({}, 32).boundaries == (2, 16, 29)
    four = capture.aux_layers({}, 4)
    assert four.ids == (2, 2, 1) and four.boundaries == (1, 2) and four.collapsed
    assert not capture.aux_layers({}, 7).collapsed and capture.aux_layers({}, 6).collapsed


def test_bad_values_fall_through() -> None:
    a = capture.aux_layers({"eagle_aux_hidden_state_layer_ids": "0,2,6", "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}}, 12)
    assert a.source == capture.NESTED and capture.TOP_LEVEL in a.ignored
    # an empty top-level list is falsy: vLLM looks further
    assert capture.aux_layers({"eagle_aux_hidden_state_layer_ids": []}, 12).source == capture.DEFAULT


def test_ids_are_boundaries_and_reach_the_embedding_and_the_last_layer() -> None:
    assert capture.ids_to_boundaries([6, 0, 2]) == (0, 2, 6)
    assert capture.boundaries_to_ids((0, 2, 6)) == (0, 2, 6)
    assert capture.uncaptured((0, 12, 13, -1), 12) == (13, -1)


def test_process_titles() -> None:
    assert procs.title_role("VLLM::EngineCore") == "EngineCore"
    assert procs.title_role("VLLM::EngineCore_DP1") == "EngineCore"
    assert procs.title_role("VLLM::Worker_TP0  ") == "Worker"
    assert procs.title_role("sglang::scheduler_TP0") is None
    assert procs.title_role("python -m vllm.entrypoints.openai.api_server") is None
    assert "VLLM::Worker" in procs.process_titles()


def test_rewiring_writes_the_top_level_key_only() -> None:
    import json

    from eagle3_tui.eagle.draft_config import set_top_level_layer_ids
    from eagle3_tui.errors import UserError

    text = ('{\n  "eagle_aux_hidden_state_layer_ids": [\n    2,\n    6,\n    9\n  ],\n'
            '  "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 5, 8]}\n}\n')
    out = set_top_level_layer_ids(text, [0, 2, 6])
    assert out == text.replace("    2,\n    6,\n    9\n", "    0,\n    2,\n    6\n")
    assert capture.aux_layers(json.loads(out), 12).boundaries == (0, 2, 6)
    gone = set_top_level_layer_ids(out, None)
    assert "eagle_config" in gone and capture.aux_layers(json.loads(gone), 12).source == capture.NESTED
    assert set_top_level_layer_ids(gone, None) == gone
    try:
        set_top_level_layer_ids("{not json", [1])
    except UserError as err:
        assert "not valid JSON" in str(err)
    else:
        raise AssertionError("bad JSON was accepted")
