"""One attached host, as the only thing the UI and the headless commands talk to.

`Session` is the facade; the views (`ConnView`, `ServerView`) are frozen snapshots that are replaced
on change, and the events are the frozen dataclasses passed to listeners. The parts behind the facade
live in the submodules; only the names below are the package's contract.
"""

from __future__ import annotations

from eagle3_tui.actions import CHANGES_HOST, HOST_ACTIONS, HostAction, host_action
from eagle3_tui.profile import Preset
from eagle3_tui.session.actions import refuse_readonly
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
from eagle3_tui.session.presets import LAUNCH_COMMAND_PATH, ApplyPlan, check_grid, ledger_configs, sha256_text

__all__ = [
    "CHANGES_HOST",
    "HOST_ACTIONS",
    "LAUNCH_COMMAND_PATH",
    "ApplyPlan",
    "BenchFinished",
    "BenchProgress",
    "CheckFinished",
    "CheckProgress",
    "ConnView",
    "ConnectionChanged",
    "FindingsChanged",
    "HostAction",
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
    "check_grid",
    "host_action",
    "ledger_configs",
    "refuse_readonly",
    "sha256_text",
]
