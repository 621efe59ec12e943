"""The log feed over a real file and the real LocalHost follower: batched events, nothing lost, the run
state across a rotation, a recorded log fed without a host."""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from pathlib import Path

import pytest

from eagle3_tui.remote.local import LocalHost
from eagle3_tui.session.events import ConnView, LogBatch, ServerView, StatsUpdated
from eagle3_tui.session.live.logfeed import EMIT_INTERVAL_S, LogFeed
from eagle3_tui.session.live.runstate import Launched, RunTracker
from eagle3_tui.session.views import Views
from eagle3_tui.sglang.logline import DecodeStats
from eagle3_tui.telemetry.metrics import Telemetry


def decode(n: int) -> str:
    return (f"[2025-12-09 10:{n // 60 % 60:02d}:{n % 60:02d}] Decode batch, #running-req: 4, #token: 900, "
            f"token usage: 0.01, accept len: 1.50, accept rate: 0.40, cuda graph: True, "
            f"gen throughput (token/s): {n}.00, #queue-req: 0, \n")


async def wait_until(pred, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


class Parts:
    def __init__(self, host: LocalHost) -> None:
        self.views = Views(ConnView("local"), ServerView())
        self.telemetry = Telemetry()
        self.tracker = RunTracker()
        self.feed = LogFeed(host, self.tracker, self.views, self.telemetry)
        self.batches: list[tuple[float, LogBatch]] = []
        self.stats = 0
        self.views.add_listener(self._hear)

    def _hear(self, ev: object) -> None:
        if isinstance(ev, LogBatch):
            self.batches.append((time.monotonic(), ev))
        elif isinstance(ev, StatsUpdated):
            self.stats += 1

    def lines(self) -> list[str]:
        return [line for _, b in self.batches for line in b.lines]


@pytest.fixture
async def host():
    h = LocalHost()
    yield h
    await h.close()


async def test_batched_at_most_ten_a_second_and_nothing_lost(tmp_path: Path, host: LocalHost) -> None:
    log = tmp_path / "server.log"
    log.write_text("")
    p = Parts(host)
    p.feed.start(str(log), start="begin")
    n = 0
    try:
        for _ in range(30):  # many small writes, about 1.5 s
            with log.open("a") as f:
                for _ in range(40):
                    f.write(decode(n))
                    n += 1
            await asyncio.sleep(0.05)
        await wait_until(lambda: len(p.lines()) == n)
    finally:
        await p.feed.close()
    assert p.lines() == [decode(i).rstrip("\n") for i in range(n)], "every line once, in order"
    assert p.telemetry.decode_lines == n
    seen = [e.gen_throughput for _, b in p.batches for e in b.events if isinstance(e, DecodeStats)]
    assert seen == [float(i) for i in range(n)]
    times = [t for t, _ in p.batches]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(p.batches) < 30, "writes were coalesced"
    assert min(gaps) >= EMIT_INTERVAL_S * 0.9, gaps
    assert 0 < p.stats <= len(p.batches)


async def test_old_runs_crash_line_after_the_launch_does_not_fail_it(tmp_path: Path, host: LocalHost) -> None:
    """The follower drains the rotated file: its crash arrives after `Launched`, and stays the old run's."""
    log = tmp_path / "server.log"
    log.write_text("[2025-12-09 10:00:00] The server is fired up and ready to roll!\n")
    p = Parts(host)
    p.feed.start(str(log), start="begin")
    try:
        await wait_until(lambda: len(p.lines()) == 1)
        launch = p.tracker.dispatch(Launched(rotates=True)).launch
        with log.open("a") as f:  # the old server's last words, written after the new launch began
            f.write("[2025-12-09 10:00:01] Received sigquit from a child process. It usually means the child failed.\n"
                    "[2025-12-09 10:00:02] next record\n")
        await wait_until(lambda: p.tracker.state.current_failure is not None)
        assert p.tracker.state.outcome(launch) == "pending"
        os.rename(log, tmp_path / "server.log.1")  # what the host's launch does to a non-empty log
        log.write_text("[2025-12-09 10:01:00] The server is fired up and ready to roll!\n")
        await wait_until(lambda: p.tracker.state.outcome(launch) != "pending")
        await wait_until(lambda: p.tracker.state.outcome(launch) == "ready")
        assert p.tracker.state.failure_of(launch) is None
    finally:
        await p.feed.close()


async def test_a_held_failure_is_delivered_when_the_server_is_gone(tmp_path: Path, host: LocalHost) -> None:
    log = tmp_path / "server.log"
    log.write_text("")
    p = Parts(host)
    p.tracker.dispatch(Launched(rotates=False))
    p.feed.start(str(log), start="begin")
    try:
        with log.open("a") as f:
            f.write("[2025-12-09 10:01:00] Scheduler hit an exception: Traceback (most recent call last):\n"
                    '  File "scheduler.py", line 1, in event_loop\nRuntimeError: CUDA error: illegal memory access\n')
        await wait_until(lambda: len(p.lines()) == 3)
        assert p.tracker.state.failure_of(1) is None, "held until the traceback ends"
        await p.feed.settle()
        f = p.tracker.state.failure_of(1)
        assert f is not None and "illegal memory access" in f.last_line
    finally:
        await p.feed.close()


def test_a_recorded_log_without_a_host(tmp_path: Path) -> None:
    p = Parts(LocalHost())
    p.feed.ingest_now([decode(i).rstrip("\n") for i in range(5)], log_time=True)
    assert p.telemetry.decode_lines == 5 and len(p.batches) == 1 and p.stats == 1
    times = p.telemetry.series["gen_tps"].times()
    assert times[-1] - times[0] == pytest.approx(4.0), "filed under the log's own timestamps"
    assert p.feed.recent(2) == [decode(3).rstrip("\n"), decode(4).rstrip("\n")]


def test_a_new_launchs_log_forgets_the_old_runs_warnings(tmp_path: Path) -> None:
    """steps 1 with 16 draft tokens logs SGLang's 'adjusted' warning; the steps 15 server that follows does
    not, and the doctor must not keep citing the old run's line."""
    warn = ("[2025-12-09 10:00:00] speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
            "speculative_eagle_topk == 1")
    p = Parts(LocalHost())
    p.feed.ingest_now([warn, "[2025-12-09 10:00:01] server_args=ServerArgs(model_path='/m', port=1)"])
    assert len(p.feed.warnings) == 1 and p.feed.server_args

    async def relaunch() -> None:
        (tmp_path / "server.log").write_text("")
        p.feed.start(str(tmp_path / "server.log"), start="begin", fresh=True)
        await p.feed.close()

    asyncio.run(relaunch())
    assert not p.feed.warnings and not p.feed.server_args


def test_the_loop_gets_the_notable_events_and_the_listeners_every_event() -> None:
    """The worker picks the events the feed acts on (decode stats merged over DP ranks, warnings, the
    ready line) out of a busy server's lines; the LogBatch still carries one event per line, in order,
    the access lines' and request dumps' too."""
    from eagle3_tui.session.live.logfeed import NOTABLE
    from eagle3_tui.sglang.logline import HttpAccess, ServerReady, ServerWarning

    lines = [
        '[2026-04-05 20:00:01] INFO:     127.0.0.1:43497 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
        "[2026-04-05 20:00:01 DP0 TP0] Decode batch, #running-req: 2, accept len: 3.00, "
        "gen throughput (token/s): 100.00, #queue-req: 0",
        "[2026-04-05 20:00:02 DP1 TP8] Decode batch, #running-req: 3, accept len: 2.00, "
        "gen throughput (token/s): 300.00, #queue-req: 0",
        "[2026-04-05 20:00:02] Receive: obj=GenerateReqInput(rid='a', text='Warning: not a warning')",
        "[2026-04-05 20:00:03] WARNING: something the doctor should see",
        "[2026-04-05 20:00:04] The server is fired up and ready to roll!",
    ]
    p = Parts(LocalHost())
    parsed = p.feed._parse(lines, None)
    assert len(parsed.events) == len(lines) and isinstance(parsed.events[0], HttpAccess)
    assert all(type(e) in NOTABLE for e in parsed.notable)
    assert [type(e) for e in parsed.notable] == [DecodeStats, DecodeStats, ServerWarning, ServerReady]
    merged = parsed.notable[1]
    assert isinstance(merged, DecodeStats) and merged.gen_throughput == pytest.approx(400.0)
    p2 = Parts(LocalHost())
    p2.feed.ingest_now(lines, log_time=True)
    [batch] = [b for _, b in p2.batches]
    assert [e.line for e in batch.events] == lines and p2.feed.warnings and p2.tracker.state is not None
    assert p2.telemetry.series["gen_tps"].values() == pytest.approx([100.0, 400.0])


def test_the_requests_a_server_logs_as_they_finish_reach_the_live_view() -> None:
    """A server run with --log-requests writes each finished request's meta_info: the feed files their accept
    lengths (garbage beside them is only a log line), and the Live tab's row under the charts summarises the
    traffic really served where SGLang reports no per-position rates."""
    from eagle3_tui.ui.viewmodel import POSITIONS_NOT_REPORTED, positions_line
    from tests.test_bench_sets import FINISH_JSON, FINISH_OLD, FINISH_TEXT

    p = Parts(LocalHost())
    assert positions_line(p.telemetry, "sglang").startswith(POSITIONS_NOT_REPORTED)
    assert "--log-requests" in positions_line(p.telemetry, "sglang")
    bad = FINISH_TEXT.replace("'spec_verify_ct': 28", "'spec_verify_ct': 0")  # no verify step: no accept length
    one = Parts(LocalHost())
    one.feed.ingest_now([FINISH_OLD])
    assert "(1 request the server logged)" in positions_line(one.telemetry, "sglang")
    p.feed.ingest_now([decode(1).rstrip("\n"), FINISH_TEXT, "garbage spec_verify_ct {", FINISH_OLD, bad, FINISH_JSON])
    assert list(p.telemetry.requests) == [pytest.approx(64 / 28), 1.5, pytest.approx(40 / 12)]
    assert p.stats == 1 and len(p.lines()) == 6
    line = positions_line(p.telemetry, "sglang")
    mean = (64 / 28 + 1.5 + 40 / 12) / 3
    assert line.startswith("per-request accept length (3 requests the server logged): ")
    assert f"mean {mean:.2f}" in line and "p50 2.29" in line
    p.telemetry.ingest_requests([2.0] * 1200 + [float("nan"), 0.5])  # what is not an accept length is dropped
    assert "(last 1,000 of 1,203 requests the server logged)" in positions_line(p.telemetry, "sglang")


def test_real_sglang_0523_finish_lines_are_read() -> None:
    """Captured from real SGLang 0.5.23 on the demo world (`--log-requests --log-requests-level 0`, 3/1/4): the
    warm-up request and two /generate requests whose meta_info said spec_accept_length 1.5. 0.5.23 writes these
    lines to stdout: the console sees them where both streams go to the log (`> server.log 2>&1`)."""
    lines = (Path(__file__).parent / "ui" / "data" / "real_sglang_0523_finish.log").read_text().splitlines()
    p = Parts(LocalHost())
    p.feed.ingest_now(lines)
    assert list(p.telemetry.requests) == [2.0, 1.5, 1.5]
