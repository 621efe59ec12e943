"""vLLM's own failure shapes as findings."""

from __future__ import annotations

from eagle3_tui.vllm import diagnose


def test_sampling_collapse_only_with_sampling_on_cpu() -> None:
    f = diagnose.sampling_collapse((0.41, 0.0, 0.0), 0.7, "cpu")
    assert f is not None and f.code == "vllm-cpu-sampling" and "0.41, 0.00, 0.00" in f.sentence
    assert diagnose.sampling_collapse((0.41, 0.0, 0.0), 0.0, "cpu") is None
    assert diagnose.sampling_collapse((0.41, 0.0, 0.0), 0.7, "cuda") is None
    # the real greedy server's shape (tests/vllm_samples/serve_trained.log) is no collapse
    assert diagnose.sampling_collapse((0.681, 0.520, 0.415), 0.7, "cpu") is None
    assert diagnose.sampling_collapse((0.0, 0.0, 0.0), 0.7, "cpu") is None


def test_ignored_ids() -> None:
    cfg = {"eagle_aux_hidden_state_layer_ids": [0, 2, 6], "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 5, 8]}}
    f = diagnose.ignored_ids(cfg, 12)
    assert f is not None and "eagle_config.eagle_aux_hidden_state_layer_ids" in f.sentence and "[0, 2, 6]" in f.sentence
    assert diagnose.ignored_ids({"eagle_aux_hidden_state_layer_ids": [0, 2, 6]}, 12) is None


def test_collapsed_capture_on_a_small_target() -> None:
    f = diagnose.collapsed_capture({}, 4)
    assert f is not None and "[2, 2, 1]" in f.sentence and "[1, 2]" in f.sentence and "receives 2 states, not 3" in f.sentence
    assert diagnose.collapsed_capture({}, 12) is None
