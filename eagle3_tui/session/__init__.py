"""One attached host, as the only thing the UI and the headless commands talk to.

`Session` (facade.py) is the composition root: it builds its parts and wires them, each given what it
needs in its constructor. The views (`ConnView`, `ServerView`) are frozen snapshots replaced through
typed updates, and the events are the frozen dataclasses passed to listeners. The parts live in
sub-packages by family:

- `live/`: what the running server says (log feed and run state, monitor, HTTP charts, journal);
- `host/`: what the host says about it (discovery, deployment, probe, served flags, inputs, facts, data);
- `deploy/`: the deployment part and its owners' restarts (container, systemd, other nodes);
- `restart/`: the one restart path, its lock, and the strategy seam the deployments plug into;
- `store/`: the local store, the changes written and undone, the ledger;
- `check/`: the accuracy check as a job on the host;
- `presets/`: the preset catalogue and plans, each engine's presets;
- `attached/`: what the parts share of the attached server (`Known`), looking at the host again
  (`Survey`: servers, launch facts, the doctor's findings), ledger rows (`Recorder`);
- `control/`: what changes what runs: the server started, stopped, restarted (`ServerControl`), the
  presets applied and rolled back (`Presets`);
- `measure/`: the benchmark (its prompt format, chat or raw, and the engine's API it goes through) and
  the accuracy check with its training data;
- `demo/`: the demo world's lifecycle and the real engines' demo launch helpers.

Only the names below are the package's contract: an import-linter contract keeps `ui/` and `commands/`
on them. The UI and commands reach the parts as a session's attributes: `session.control`,
`session.presets`, `session.bench`, `session.accuracy`, `session.survey`, `session.records`.
"""

from __future__ import annotations

from eagle3_tui.actions import CHANGES_HOST, HOST_ACTIONS, HostAction, host_action
from eagle3_tui.profile import Preset
from eagle3_tui.session.actions import refuse_readonly
from eagle3_tui.session.demo.lifecycle import real_engine_missing
from eagle3_tui.session.demo.real_sglang import MISSING as REAL_SGLANG_MISSING
from eagle3_tui.session.demo.real_sglang import find_real_sglang
from eagle3_tui.session.events import (
    AnyLogEvent,
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
from eagle3_tui.session.fleet_link import SSHTunnels, fleet_profile
from eagle3_tui.session.host.discovery import discover
from eagle3_tui.session.host.probe import TargetInfo
from eagle3_tui.session.host.training_data import parse_slots, unknown_line
from eagle3_tui.session.launch import redact_argv
from eagle3_tui.session.live.httpstats import no_log
from eagle3_tui.session.presets.catalog import (
    LAUNCH_COMMAND_PATH,
    ApplyPlan,
    builtin_presets,
    check_grid,
    ledger_configs,
    sha256_text,
)
from eagle3_tui.session.sweep import Sweep, SweepResult, SweepStep, served_config

__all__ = [
    "CHANGES_HOST",
    "HOST_ACTIONS",
    "LAUNCH_COMMAND_PATH",
    "REAL_SGLANG_MISSING",
    "AnyLogEvent",
    "ApplyPlan",
    "BenchFinished",
    "BenchProgress",
    "CheckFinished",
    "CheckProgress",
    "ConnView",
    "ConnectionChanged",
    "DemoWorldBuild",
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
    "SSHTunnels",
    "ServerChanged",
    "ServerState",
    "ServerView",
    "Session",
    "SessionEvent",
    "StatsUpdated",
    "Sweep",
    "SweepResult",
    "SweepStep",
    "TargetInfo",
    "builtin_presets",
    "check_grid",
    "demo_attach_and_start",
    "demo_boot",
    "demo_emergency_stop",
    "demo_stop_and_close",
    "discover",
    "find_real_sglang",
    "fleet_profile",
    "host_action",
    "ledger_configs",
    "new_demo_root",
    "no_log",
    "parse_slots",
    "real_engine_missing",
    "redact_argv",
    "refuse_readonly",
    "served_config",
    "sha256_text",
    "unknown_line",
]

# the demo's lifecycle (demo.py imports Session from here, so it comes last)
from eagle3_tui.session.demo.lifecycle import WorldBuild as DemoWorldBuild
from eagle3_tui.session.demo.lifecycle import attach_and_start as demo_attach_and_start
from eagle3_tui.session.demo.lifecycle import demo_boot
from eagle3_tui.session.demo.lifecycle import emergency_stop as demo_emergency_stop
from eagle3_tui.session.demo.lifecycle import new_state_root as new_demo_root
from eagle3_tui.session.demo.lifecycle import stop_and_close as demo_stop_and_close
