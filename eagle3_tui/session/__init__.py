"""One attached host, as the only thing the UI and the headless commands talk to.

`Session` is the facade; the views (`ConnView`, `ServerView`) are frozen snapshots that are replaced
on change, and the events are the frozen dataclasses passed to listeners. The parts behind the facade
live in the submodules; only the names below are the package's contract.
"""

from __future__ import annotations

from eagle3_tui.profile import Preset
from eagle3_tui.session.events import (
    BenchFinished,
    BenchProgress,
    CheckFinished,
    CheckProgress,
    ConnectionChanged,
    ConnView,
    FindingsChanged,
    HttpSample,
    LedgerChanged,
    LogBatch,
    Notice,
    ReadOnlyError,
    RestartFailed,
    RestartProgress,
    ServerChanged,
    ServerState,
    ServerView,
    SessionEvent,
    StatsUpdated,
)
from eagle3_tui.session.facade import Session
from eagle3_tui.session.presets import LAUNCH_COMMAND_PATH, ApplyPlan, sha256_text

__all__ = [
    "LAUNCH_COMMAND_PATH",
    "ApplyPlan",
    "BenchFinished",
    "BenchProgress",
    "CheckFinished",
    "CheckProgress",
    "ConnView",
    "ConnectionChanged",
    "FindingsChanged",
    "HttpSample",
    "LedgerChanged",
    "LogBatch",
    "Notice",
    "Preset",
    "ReadOnlyError",
    "RestartFailed",
    "RestartProgress",
    "ServerChanged",
    "ServerState",
    "ServerView",
    "Session",
    "SessionEvent",
    "StatsUpdated",
    "sha256_text",
]
