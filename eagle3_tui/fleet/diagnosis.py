"""The doctor's worst finding for one fleet row, from what the fleet reads anyway (pure).

The one-server console gathers facts over SSH (the draft config, the checkpoint, the installed source); a
fleet row has only the server's HTTP answers: SGLang's `/server_info` (its effective flags, its release,
and from 0.5.23 its `launch_command`, where an overridden flag shows) and the live numbers. The doctor's
rules run on those facts; a rule missing what it needs says nothing, as everywhere.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from typing import Any

from eagle3_tui.doctor import Facts, Finding, diagnose
from eagle3_tui.errors import UserError
from eagle3_tui.fleet.rows import FleetRow
from eagle3_tui.sglang.launch import parse_launch


def launch_argv(info: Mapping[str, Any]) -> list[str] | None:
    """The launch command `/server_info` reports (a string or a list; SGLang 0.5.23 has it), else None.

    0.5.23's is `sys.argv[1:]` of `launch_server` joined (`prepare_server_args(sys.argv[1:])`): the flags
    without the program, which is put back in front so the launch reads as the command it was."""
    raw = info.get("launch_command")
    argv: list[str] | None = None
    if isinstance(raw, str) and raw.strip():
        try:
            argv = shlex.split(raw)
        except ValueError:
            return None
    elif isinstance(raw, list) and raw and all(isinstance(t, str) for t in raw):
        argv = list(raw)
    if argv and argv[0].startswith("-"):
        argv = ["python", "-m", "sglang.launch_server", *argv]
    return argv


def facts_for(row: FleetRow, info: Mapping[str, Any] | None) -> Facts:
    f = Facts(engine=row.engine, engine_release=row.release)
    f.live_accept_len = row.accept_window
    f.live_gen_tps = row.tok_s
    f.live_per_position = row.per_position
    f.live_source = "/metrics"
    if row.engine == "sglang" and info is not None:
        f.server_args = dict(info)
        argv = launch_argv(info)
        if argv is not None:
            try:
                f.launch = parse_launch(argv)
                f.launch_source = "/server_info launch_command"
            except UserError:
                pass
    return f


def worst_finding(row: FleetRow, info: Mapping[str, Any] | None) -> Finding | None:
    """The first of the doctor's findings (worst first), None when it finds nothing."""
    found = diagnose(facts_for(row, info))
    return found[0] if found else None


def finding_label(finding: Finding | None) -> str | None:
    """The row's cell: severity and rule id (the title is in the detail line)."""
    return None if finding is None else f"{finding.severity} {finding.rule_id}"
