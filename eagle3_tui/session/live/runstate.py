"""Which server run the log belongs to, and what that run's log has said: one state machine.

A restart relaunches the server into the same log file. The host rotates a non-empty log before the
launch, but the follower may still deliver the old file's last lines (a ready line, a crash) after
the new process started. So "the log says ready" or "the log shows a failure" only counts for a
launch once the follower reads *that launch's* file. `RunState` keeps the numbers apart:

- `launch`: the newest launch this session made (0: the server found when attaching);
- `reading`: the launch whose log lines the follower delivers now;
- `phase`: what the log of the run being read has said; `failure` the failure line that said it.

A launch's outcome (`RunState.outcome(n)`) is `pending` until the follower reads its file, then the
phase::

                Launched(rotates=True)
      any ───────────────────────────────▶ PENDING ── ready/failure lines: the old run's, ignored
       │                                      │        for this launch
       │                                      │ LogSwitched (rotated/truncated/opened)
       │  Launched(rotates=False)             ▼
       └─────────────────────────────────▶ STARTED ── ServerReady ──▶ READY
                                              │                        │
                                              └──────── Failure ───────┴──▶ FAILED

FAILED is final for that run (a ready line after a crash does not revive it, and the parent's sigquit
lines after a child's failure line do not replace it); the next `Launched` starts over. A log that was empty or missing before the launch cannot deliver old lines, so that
launch skips PENDING. `LogSwitched` while the follower already reads the newest launch (a truncation
of the live log, the first `opened`) changes nothing.

`reduce` is pure; `RunTracker` holds the current state for the parts that feed or read it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from eagle3_tui.engines import Failed, Ready
from eagle3_tui.sglang.logline import Failure, LogEvent, ServerReady

Phase = Literal["started", "ready", "failed"]
Outcome = Literal["pending", "started", "ready", "failed"]


@dataclass(frozen=True)
class Launched:
    """This session started a new server process. `rotates`: the log file had lines before it."""

    rotates: bool


@dataclass(frozen=True)
class LogSwitched:
    """The follower moved to a new file (rotated, truncated, or opened): the newest launch's log."""


RunEvent = Launched | LogSwitched | LogEvent | Ready | Failed


@dataclass(frozen=True)
class RunState:
    launch: int = 0
    reading: int = 0
    phase: Phase = "started"
    failure: Failure | Failed | None = None

    def outcome(self, launch: int) -> Outcome:
        """What the log said about `launch` (pending: its file is not being read yet)."""
        if launch != self.reading:
            return "pending"
        return self.phase

    def failure_of(self, launch: int) -> Failure | Failed | None:
        """The failure line of `launch`, when its log showed one."""
        return self.failure if self.outcome(launch) == "failed" else None

    @property
    def current_failure(self) -> Failure | Failed | None:
        """The failure in the log being read now (whichever run it belongs to)."""
        return self.failure if self.phase == "failed" else None


def _fresh(launch: int) -> RunState:
    return RunState(launch=launch, reading=launch, phase="started", failure=None)


def reduce(state: RunState, event: RunEvent) -> RunState:
    """The next state; events that do not concern the run (decode stats, warnings, ...) leave it."""
    if isinstance(event, Launched):
        n = state.launch + 1
        return replace(state, launch=n) if event.rotates else _fresh(n)
    if isinstance(event, LogSwitched):
        return state if state.reading == state.launch else _fresh(state.launch)
    if isinstance(event, (Failure, Failed)):
        if state.phase == "failed" and state.failure is not None and _consequence(event):
            return state  # the parent's SIGQUIT after a child's own failure line: that line names the cause
        return replace(state, phase="failed", failure=event)
    if isinstance(event, (ServerReady, Ready)) and state.phase == "started":
        return replace(state, phase="ready")
    return state


def _consequence(event: Failure | Failed) -> bool:
    """SGLang's parent lines after a child failed ("Received sigquit from a child process", "SIGQUIT received.
    ... It usually means one child failed."): they say a child died, not why; the child's own line (a
    scheduler exception: 0.5.23 ids out of range end in `RuntimeError: mat1 and mat2 shapes cannot be
    multiplied`) or the watcher's `crashed with exit code -9` came first and is kept."""
    return isinstance(event, Failure) and event.kind == "sigquit"


class RunTracker:
    """The current `RunState`, shared by the log feed (which feeds it) and the restart (which reads it)."""

    def __init__(self, state: RunState | None = None) -> None:
        self.state = state or RunState()

    def dispatch(self, event: RunEvent) -> RunState:
        self.state = reduce(self.state, event)
        return self.state

    def dispatch_all(self, events: Sequence[object]) -> RunState:
        for ev in events:
            if isinstance(ev, (Failure, ServerReady, Failed, Ready)):
                self.state = reduce(self.state, ev)
        return self.state
