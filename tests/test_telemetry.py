"""Rings, downsampling, derived metrics, the accept-rate definition guess, sketches and run splitting."""

from __future__ import annotations

import math
import random
import statistics
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eagle3_tui.sglang.logline import LogReader, parse_line
from eagle3_tui.telemetry.metrics import (
    Telemetry,
    accepted_per_step,
    guess_rate_definition,
    speedup,
    tool_accept_rate,
)
from eagle3_tui.telemetry.runs import RunSplitter, ValueSketch
from eagle3_tui.telemetry.series import Bucket, Ring


def test_ring_keeps_the_newest_points_in_order() -> None:
    r = Ring(4)
    assert len(r) == 0 and r.last() is None and r.times() == [] and r.downsample(10) == []
    for i in range(10):
        r.append(float(i), float(i * 10))
    assert len(r) == 4 and r.capacity == 4
    assert r.times() == [6.0, 7.0, 8.0, 9.0]
    assert r.values() == [60.0, 70.0, 80.0, 90.0]
    assert r.last() == (9.0, 90.0)
    assert list(r) == [(6.0, 60.0), (7.0, 70.0), (8.0, 80.0), (9.0, 90.0)]
    r.clear()
    assert len(r) == 0
    with pytest.raises(ValueError):
        Ring(0)


def test_downsample_min_mean_max_per_time_slice() -> None:
    r = Ring(1000)
    for i in range(100):
        r.append(float(i), float(i % 10))
    buckets = r.downsample(10)
    assert len(buckets) == 10
    assert all(b.count == 10 and b.lo == 0.0 and b.hi == 9.0 and b.mean == 4.5 for b in buckets)
    assert buckets[0].t == 4.5 and buckets[-1].t == 94.5
    # few points: returned as they are
    assert r.downsample(1000)[:2] == [Bucket(0.0, 0.0, 0.0, 0.0, 1), Bucket(1.0, 1.0, 1.0, 1.0, 1)]
    # a window, and a gap that stays a gap
    assert [b.count for b in r.downsample(2, 10.0, 19.0)] == [5, 5]
    g = Ring(10)
    for t in (0.0, 1.0, 9.0, 10.0):
        g.append(t, t)
    assert [b.t for b in g.downsample(3)] == [0.5, 9.5]
    same = Ring(10)
    for v in (1.0, 2.0, 3.0):
        same.append(5.0, v)
    assert same.downsample(2) == [Bucket(5.0, 1.0, 2.0, 3.0, 3)]


def test_derived_metric_helpers() -> None:
    assert accepted_per_step(2.5) == 1.5 and accepted_per_step(0.0) == 0.0
    assert tool_accept_rate(2.5, 3) == 0.5 and tool_accept_rate(2.5, None) is None and tool_accept_rate(2.5, 0) is None
    assert speedup(54.8, 90.0) == pytest.approx(0.6089, abs=1e-4)
    assert speedup(50.0, None) is None and speedup(None, 90.0) is None


def _decode(i: int, accept: float | None, tps: float, rate: float | None = None) -> str:
    msg = f"[2025-12-09 10:00:{i:02d} TP0] Decode batch, #running-req: {i}, #token: 9, token usage: 0.50, "
    if accept is not None:
        msg += f"accept len: {accept:.2f}, "
        if rate is not None:
            msg += f"accept rate: {rate:.2f}, "
    return msg + f"cuda graph: True, gen throughput (token/s): {tps:.2f}, #queue-req: 1, "


def test_telemetry_ingest_summary_and_markers() -> None:
    tel = Telemetry(capacity=8, max_markers=3)
    tel.num_steps = 3
    tel.baseline_tps = 100.0
    for i in range(20):
        ev = parse_line(_decode(i, 2.0 + (i % 2), 50.0 + i, (2.0 + (i % 2)) / 4))
        tel.ingest(ev)  # type: ignore[arg-type]
    assert tel.decode_lines == 20
    assert all(len(tel.series[name]) == 8 for name in tel.series)  # bounded
    s = tel.summary(window_s=3.0)
    assert s.decode_lines == 20 and s.window_lines == 4 and s.last_t == tel.series["gen_tps"].last()[0]  # type: ignore[index]
    assert s.last["accept_len"] == 3.0 and s.last["accepted_per_step"] == 2.0
    assert s.means["gen_tps"] == pytest.approx(67.5) and s.gen_tps == pytest.approx(67.5)
    assert s.means["accept_len"] == 2.5 and s.accept_len == 2.5
    assert s.means["accept_rate_tool"] == pytest.approx(0.5)
    assert s.last["accept_rate_sglang"] == 0.75
    assert s.speedup == pytest.approx(0.675)
    assert s.last["running_req"] == 19.0 and s.last["queue_req"] == 1.0 and s.last["token_usage"] == 0.5
    for i in range(5):
        tel.mark(float(i), f"restart {i}")
    assert [m.label for m in tel.markers] == ["restart 2", "restart 3", "restart 4"]
    tel.ingest(parse_line(_decode(30, 2.0, 10.0)), t=12345.0)  # type: ignore[arg-type]
    assert tel.series["gen_tps"].last() == (12345.0, 10.0)
    tel.reset()
    assert tel.decode_lines == 0 and tel.summary().means["gen_tps"] is None and not tel.markers


def test_telemetry_without_spec_or_steps() -> None:
    tel = Telemetry()
    tel.ingest(parse_line(_decode(1, None, 90.0)))  # type: ignore[arg-type]
    s = tel.summary()
    assert s.accept_len is None and s.gen_tps == 90.0 and s.speedup is None
    assert len(tel.series["accept_rate_tool"]) == 0


@pytest.mark.parametrize(
    "pairs, definition, draft",
    [
        # 0.5.3.post2..0.5.6: accepted / (fwd * draft tokens), bonus included (fixture 11948: 2.17/0.54, draft 4)
        ([(2.17, 0.54), (1.5, 0.38), (3.0, 0.75), (2.61, 0.65)], "bonus-included", 4),
        # fastrl#4: 1.00/0.11 with draft 9
        ([(1.0, 0.11), (1.8, 0.2), (2.25, 0.25)], "bonus-included", 9),
        # 2026: (len - 1) / (draft - 1), bonus excluded (sgl-kernel-npu#608: 3.05/0.68, draft 4)
        ([(3.05, 0.68), (1.6, 0.2), (2.5, 0.5), (4.0, 1.0)], "bonus-excluded", 4),
    ],
)
def test_rate_definition_guess(pairs: list[tuple[float, float]], definition: str, draft: int) -> None:
    g = guess_rate_definition(pairs)
    assert g is not None and g.definition == definition and g.num_draft_tokens == draft
    assert g.fitting == g.samples == len(pairs)


def test_rate_definition_guess_edge_cases() -> None:
    assert guess_rate_definition([]) is None
    constant = guess_rate_definition([(2.0, 0.5)] * 5)
    assert constant is not None and constant.definition == "ambiguous"
    known = guess_rate_definition([(2.0, 0.5)] * 5, num_draft_tokens=4)
    assert known is not None and known.definition == "bonus-included"
    nonsense = guess_rate_definition([(2.0, 0.93), (3.0, 0.07), (1.5, 0.61)])
    assert nonsense is not None and nonsense.definition == "unknown"


def test_value_sketch_exact_percentiles_and_order_independence() -> None:
    rng = random.Random(3)
    values = [round(rng.uniform(1, 4), 2) for _ in range(5001)]
    a = ValueSketch()
    for v in values:
        a.add(v)
    d = a.dist()
    assert d is not None and d.n == 5001
    s = sorted(values)
    assert d.p50 == s[2500] and d.p10 == s[500] and d.p90 == s[4500]  # nearest rank
    assert d.mean == pytest.approx(statistics.fmean(values), abs=1e-9)
    assert (d.lo, d.hi) == (s[0], s[-1])
    b = ValueSketch()
    b.add_texts(Counter(f"{v:.2f}".encode() for v in values[:100]))
    for v in values[100:]:
        b.add(v)
    b.add_texts({b"garbage": 3, "nan": 1})
    assert b.dist() == d and b.skipped == 4
    assert ValueSketch().dist() is None


def test_value_sketch_stays_bounded() -> None:
    sk = ValueSketch(level=1, max_keys=100)
    for i in range(100_000):
        sk.add(i / 100)
    d = sk.dist()
    assert d is not None and d.n == 100_000
    assert len(sk._counts) <= 100 and sk.resolution >= 10.0
    assert d.mean == pytest.approx(499.995, rel=0.02) and d.p50 == pytest.approx(500, rel=0.05)


def _feed(splitter: RunSplitter, lines: list[str]) -> None:
    reader = LogReader()
    for line in lines:
        for ev in reader.feed(line):
            splitter.event(ev)
    for ev in reader.flush():
        splitter.event(ev)


ARGS = (
    "[2025-12-09 10:{m:02d}:00] server_args=ServerArgs(model_path='/m', speculative_algorithm='EAGLE3', "
    "speculative_num_steps={steps}, speculative_eagle_topk=1, speculative_num_draft_tokens={draft})"
)
READY = "[2025-12-09 10:{m:02d}:05] The server is fired up and ready to roll!"
WARN = "[2025-12-09 10:{m:02d}:00] speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"


def test_run_splitting_at_starts_and_second_readiness() -> None:
    sp = RunSplitter()
    lines = [
        _decode(1, 2.0, 40.0, 0.5),  # a run that began before the log
        WARN.format(m=1),  # printed by the next server before its server_args line
        ARGS.format(m=1, steps=3, draft=4),
        READY.format(m=1),
        *[_decode(i, 2.0 + i / 100, 100.0 + i, (2.0 + i / 100) / 4) for i in range(10, 20)],
        "[2025-12-09 10:02:00] Scheduler hit an exception: Traceback (most recent call last):",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "[2025-12-09 10:02:01] Received sigquit from a child process. It usually means the child failed.",
        READY.format(m=3),  # a readiness line with no server_args line: a new run too
        READY.format(m=4),
    ]
    _feed(sp, lines)
    runs = sp.finish()
    assert [r.started_by for r in runs] == ["log-start", "server-args", "ready", "ready"]
    first, second = runs[0], runs[1]
    assert first.decode_lines == 1 and first.warnings == [] and first.spec is None
    assert second.warnings == [(WARN.format(m=1).split("] ", 1)[1], 1)]
    assert second.spec == {"algorithm": "EAGLE3", "num_steps": 3, "topk": 1, "num_draft_tokens": 4}
    assert second.decode_lines == 10 and second.accept_len is not None
    assert second.accept_len.mean == pytest.approx(2.145) and second.accept_len.p50 == 2.14
    assert second.gen_tps is not None and second.gen_tps.n == 10
    assert second.rate_guess is not None and second.rate_guess.definition == "bonus-included"
    assert second.num_steps == 3 and second.num_steps_source == "server-args"
    assert second.accept_rate_tool == pytest.approx(1.145 / 3)
    assert [f.kind for f in second.failures] == ["scheduler-exception", "sigquit"]
    assert second.failures[0].last_line.startswith("RuntimeError: CUDA error")
    assert second.ready_at is not None and second.span_s == 61.0  # 10:01:00 (its warning) .. 10:02:01
    assert runs[2].decode_lines == 0 and runs[3].ready_at is not None
    again = sp.finish()  # the splitter starts afresh
    assert len(again) == 1 and again[0].decode_lines == 0 and again[0].started_by == "log-start"


def test_num_steps_inferred_from_the_printed_rate() -> None:
    sp = RunSplitter()
    _feed(sp, [_decode(i, 1.0 + i / 10, 50.0, (i / 10) / 4) for i in range(1, 30)])  # 2026 rate, draft 5
    (run,) = sp.finish()
    assert run.rate_guess is not None and run.rate_guess.definition == "bonus-excluded"
    assert run.num_steps == 4 and run.num_steps_source == "inferred from accept rate"
    d = run.to_dict()
    assert d["num_steps"] == 4 and d["span_s"] == 28.0


def test_repeated_startup_warnings_stay_bounded_and_move_to_the_new_run() -> None:
    sp = RunSplitter()
    _feed(sp, [_decode(1, 2.0, 40.0)])
    warning = parse_line(WARN.format(m=5))
    for _ in range(50_000):
        sp.event(warning)  # type: ignore[arg-type]
    assert len(sp._run.tail_warnings) == 1 and len(sp._run.tail_times) <= 2  # bounded
    _feed(sp, [ARGS.format(m=6, steps=3, draft=4)])
    first, second = sp.finish()
    assert first.warnings == [] and first.end == first.start
    assert second.warnings == [(warning.message, 50_000)]  # type: ignore[union-attr]
    assert second.start == warning.timestamp  # type: ignore[union-attr]


def test_summary_means_start_at_the_new_run_the_points_stay() -> None:
    tel = Telemetry()
    for i in range(5):
        tel.ingest(parse_line(_decode(i, 1.3, 70.0)), t=100.0 + i)  # type: ignore[arg-type]
    tel.new_run(110.0)  # a restart: the old server's five lines are not the new one's
    s = tel.summary(window_s=60.0)
    assert s.accept_len is None and s.gen_tps is None and s.window_lines == 0 and s.last["accept_len"] == 1.3
    for i in range(2):
        tel.ingest(parse_line(_decode(i, 1.8, 110.0)), t=111.0 + i)  # type: ignore[arg-type]
    s = tel.summary(window_s=60.0)
    assert s.accept_len == pytest.approx(1.8) and s.gen_tps == pytest.approx(110.0) and s.window_lines == 2
    assert len(tel.series["accept_len"]) == 7  # the chart keeps both runs
    tel.reset()
    tel.ingest(parse_line(_decode(9, 2.0, 90.0)), t=50.0)  # type: ignore[arg-type]
    assert tel.summary().accept_len == 2.0  # reset forgets the run start too


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 8),
    st.lists(st.tuples(st.sampled_from([0.0, 1.0, 1.0, 2.0, 3.5, 5.0, -1.0, float("nan")]), st.floats(-5, 5)), max_size=30),
    st.sampled_from([None, -2.0, 0.0, 1.0, 2.5, 5.0]),
    st.sampled_from([None, 0.0, 1.0, 3.5, 9.0]),
)
def test_ring_window_by_bisection_is_the_filter(cap: int, points: list[tuple[float, float]], t0: float | None, t1: float | None) -> None:
    """The window is found by bisection while the times held are in order: it must be the plain filter."""
    r = Ring(cap)
    for i, (t, v) in enumerate(points):
        r.append(t + i * (points[0][0] == 0.0), v)  # in order, or not, as drawn
        lo = -math.inf if t0 is None else t0
        hi = math.inf if t1 is None else t1
        held = list(r)
        assert r.window(t0, t1) == [(a, b) for a, b in held if lo <= a <= hi]
