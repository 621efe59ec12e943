"""The run state machine (session/live/runstate.py): every transition of `reduce`, on events parsed from real
log lines by the project's own parser."""

from __future__ import annotations

import dataclasses

import pytest

from eagle3_tui.session.live.runstate import Launched, LogSwitched, RunState, RunTracker, reduce
from eagle3_tui.sglang.logline import Failure, LogReader, ServerReady, parse_line

READY = parse_line("[2025-12-09 10:00:00] The server is fired up and ready to roll!")
CRASH = parse_line("[2025-12-09 10:01:00] Scheduler hit an exception: Traceback (most recent call last):")
DECODE = parse_line("[2025-12-09 10:00:05] Decode batch, #running-req: 4, #token: 900, token usage: 0.01, "
                    "accept len: 1.50, accept rate: 0.40, cuda graph: True, gen throughput (token/s): 50.00, "
                    "#queue-req: 0, ")
assert isinstance(READY, ServerReady) and isinstance(CRASH, Failure)


def run(*events, state: RunState | None = None) -> RunState:
    s = state or RunState()
    for ev in events:
        s = reduce(s, ev)
    return s


def test_attached_run_starts_in_started() -> None:
    s = RunState()
    assert (s.launch, s.reading, s.phase, s.failure) == (0, 0, "started", None)
    assert s.outcome(0) == "started" and s.outcome(1) == "pending"


def test_launch_into_an_empty_log_reads_the_new_run_at_once() -> None:
    s = run(CRASH, Launched(rotates=False))
    assert (s.launch, s.reading, s.phase, s.failure) == (1, 1, "started", None)
    assert s.outcome(1) == "started"


def test_launch_into_a_rotating_log_is_pending_until_the_switch() -> None:
    s = run(Launched(rotates=True))
    assert (s.launch, s.reading) == (1, 0)
    assert s.outcome(1) == "pending"
    s = reduce(s, LogSwitched())
    assert (s.reading, s.phase) == (1, "started") and s.outcome(1) == "started"


def test_a_failure_line_of_the_previous_run_never_fails_the_new_launch() -> None:
    s = run(Launched(rotates=True), CRASH)
    assert s.outcome(1) == "pending" and s.failure_of(1) is None
    assert s.failure_of(0) is CRASH  # it is the old run's failure
    s = run(LogSwitched(), READY, state=s)
    assert s.outcome(1) == "ready" and s.failure_of(1) is None and s.failure is None


def test_a_ready_line_of_the_previous_run_never_makes_the_new_launch_ready() -> None:
    s = run(Launched(rotates=True), READY)
    assert s.outcome(1) == "pending"
    s = reduce(s, LogSwitched())
    assert s.outcome(1) == "started"


def test_started_to_ready_to_failed() -> None:
    s = run(Launched(rotates=False), READY)
    assert s.outcome(1) == "ready"
    s = reduce(s, CRASH)
    assert s.outcome(1) == "failed" and s.failure_of(1) is CRASH and s.current_failure is CRASH


def test_started_to_failed() -> None:
    s = run(Launched(rotates=False), CRASH)
    assert s.outcome(1) == "failed" and s.failure_of(1) is CRASH


def test_failed_is_final_for_its_run() -> None:
    s = run(Launched(rotates=False), CRASH, READY)
    assert s.outcome(1) == "failed"


def test_a_later_failure_line_replaces_the_earlier() -> None:
    later = dataclasses.replace(CRASH, kind="segfault")
    s = run(Launched(rotates=False), CRASH, later)
    assert s.failure_of(1) is later


def test_the_next_launch_starts_over() -> None:
    s = run(Launched(rotates=False), CRASH, Launched(rotates=False))
    assert (s.launch, s.outcome(2), s.failure) == (2, "started", None)
    s = run(Launched(rotates=False), CRASH, Launched(rotates=True))
    assert s.outcome(2) == "pending" and s.failure_of(2) is None


def test_a_switch_within_the_newest_run_changes_nothing() -> None:
    """A truncation of the live log (or the follower's first `opened`) keeps what the log said."""
    s = run(Launched(rotates=False), CRASH)
    assert reduce(s, LogSwitched()) is s
    assert reduce(RunState(), LogSwitched()) == RunState()


@pytest.mark.parametrize("event", [DECODE, parse_line("INFO:     127.0.0.1:1 - \"GET /health HTTP/1.1\" 200 OK"),
                                   parse_line("some other line")])
def test_events_that_do_not_concern_the_run_leave_it(event) -> None:
    s = run(Launched(rotates=True))
    assert reduce(s, event) is s


def test_reduce_is_pure() -> None:
    s = RunState()
    after = run(Launched(rotates=False), CRASH, state=s)
    assert s == RunState() and after is not s


def test_tracker_feeds_the_reader_events_of_a_real_traceback() -> None:
    """The reader holds a failure until its traceback ends; the tracker sees the whole failure."""
    reader = LogReader()
    lines = [
        "[2025-12-09 10:01:00] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "scheduler.py", line 1, in event_loop',
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        "[2025-12-09 10:01:01] Received sigquit from a child process. It usually means the child failed.",
    ]
    tracker = RunTracker()
    tracker.dispatch(Launched(rotates=False))
    for line in lines:
        tracker.dispatch_all(reader.feed(line))
    tracker.dispatch_all(reader.flush())
    f = tracker.state.failure_of(1)
    # the child's own failure, not the parent's sigquit that followed it: the restart names the cause
    assert f is not None and f.kind == "scheduler-exception"
    assert f.last_line == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert tracker.state.outcome(1) == "failed"
