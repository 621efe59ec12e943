"""The sim resolves --dtype as SGLang 0.5.23 does (`srt/configs/model_config.py` `_get_and_verify_dtype`)."""

from __future__ import annotations

import pytest

from eagle3_tui.sim.engine import served_dtype


def test_auto_runs_a_float32_model_in_float16_and_keeps_other_dtypes() -> None:
    assert served_dtype("auto", {"torch_dtype": "float32", "model_type": "llama"}) == "float16"
    assert served_dtype("auto", {"model_type": "llama"}) == "float16"  # no dtype in the config: float32
    assert served_dtype("auto", {"torch_dtype": "float32", "model_type": "gemma2"}) == "bfloat16"
    assert served_dtype("auto", {"torch_dtype": "bfloat16"}) == "bfloat16"
    assert served_dtype("auto", {"dtype": "float16", "torch_dtype": "float32"}) == "float16"  # transformers 5


def test_an_explicit_dtype_wins_and_an_unknown_one_fails_like_sglang() -> None:
    assert served_dtype("float32", {"torch_dtype": "float32"}) == "float32"
    assert served_dtype("half", {"torch_dtype": "bfloat16"}) == "float16"
    assert served_dtype("BFloat16", {}) == "bfloat16"
    with pytest.raises(ValueError, match="Unknown dtype: fp8"):
        served_dtype("fp8", {})
