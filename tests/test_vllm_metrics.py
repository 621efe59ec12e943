"""vLLM's /metrics counters, read from a real server's answers (tests/vllm_samples/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eagle3_tui.vllm import metrics

SAMPLES = Path(__file__).parent / "vllm_samples"


def read(name: str) -> metrics.Counters:
    return metrics.read_counters((SAMPLES / name).read_text())


def test_counters_of_a_real_server() -> None:
    c = read("metrics_trained.txt")
    assert c.speculative
    assert (c.drafts, c.draft_tokens, c.accepted) == (1193, 3579, 1899)
    assert c.accepted_per_position == (804, 612, 483)
    assert sum(c.accepted_per_position) == c.accepted
    assert c.mean_acceptance_length == pytest.approx(1 + 1899 / 1193)
    assert c.per_position == pytest.approx((804 / 1193, 612 / 1193, 483 / 1193))
    assert c.running == 0 and c.waiting == 0 and c.generation_tokens > 0


def test_fresh_server() -> None:
    c = read("metrics_fresh.txt")
    assert c.speculative and c.drafts == 0 and c.mean_acceptance_length is None and c.per_position == ()


def test_window_and_restart() -> None:
    """default (cumulative) -> a restarted server (fresh) -> that server after load: no crash, one restart."""
    w = metrics.SpecWindow(span=60)
    assert w.add(0.0, read("metrics_fresh.txt")) is None
    got = w.add(10.0, read("metrics_default.txt"))
    assert got is not None and got.mean_acceptance_length == pytest.approx(read("metrics_default.txt").mean_acceptance_length)
    assert got.generation_throughput == pytest.approx(read("metrics_default.txt").generation_tokens / 10)
    assert w.add(20.0, read("metrics_fresh.txt")) is None and w.restarts == 1
    again = w.add(30.0, read("metrics_trained.txt"))
    assert again is not None and again.per_position == pytest.approx(read("metrics_trained.txt").per_position)
    assert w.restarts == 1


def test_window_span_drops_old_reads() -> None:
    base = read("metrics_fresh.txt")

    def at(drafts: float, accepted: float) -> metrics.Counters:
        return metrics.Counters(drafts, drafts * 3, accepted, (accepted,), 0, 0, None, None, None, True)

    w = metrics.SpecWindow(span=10)
    w.add(0, base)
    w.add(5, at(100, 50))
    w.add(15, at(200, 150))
    got = w.add(25, at(300, 150))
    assert got is not None and got.seconds == 10 and got.mean_acceptance_length == 1.0


def test_garbage_and_missing() -> None:
    c = metrics.read_counters("<html>502 Bad Gateway</html>\n")
    assert not c.speculative and c.drafts == 0
    text = (SAMPLES / "metrics_trained.txt").read_text().replace('position="1"', 'position="x"')
    c = metrics.read_counters(text + "vllm:spec_decode_num_drafts_total{engine=\"1\"} NaN\n")
    assert c.accepted_per_position == (804, 0, 483) and c.drafts == 1193
    assert metrics.window(read("metrics_trained.txt"), read("metrics_trained.txt"), 0) is None
