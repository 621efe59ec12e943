"""`eagle3-tui report`: attach (to a host, or to the demo world), watch the server a while, and write the
shareable report: one Markdown file and its PNG charts (eagle3_tui/report/).

It writes only on this machine, so `--readonly` does not refuse it. A headless session has no history of
its own: attaching reads the log's last lines at once (they would all fall on one instant), so with
`--watch S` (the default) those are set aside and the series are the S seconds watched; the ledger (runs,
changes, restarts, stored checks) and the doctor's findings are the host's whole story either way.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eagle3_tui.session import Session

DEFAULT_WATCH_S = 30.0
FIRST_BATCH_S = 3.0


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    p = subparsers.add_parser(
        "report", parents=[common],
        help="write a shareable report: Markdown with PNG charts (accept length, tok/s, changes, check, findings)",
        description=(
            "Attach to the server (or the demo world), watch it for --watch seconds, and write report.md with "
            "its charts (accept length and tok/s over time with restarts, per-position acceptance, before/after "
            "each applied change, the accuracy check's table, the findings with their evidence, the ledger) into "
            "one folder, ready to paste into an issue. In the console, `r` writes the same report."
        ),
    )
    p.add_argument("-o", "--output", metavar="DIR", help="the report's folder (new, empty, or an earlier report's, "
                   "which is replaced); default: ./eagle3-report-HOST-TIME")
    p.add_argument("--watch", type=float, default=DEFAULT_WATCH_S, metavar="S",
                   help=f"seconds to watch the live log for the charts (default {DEFAULT_WATCH_S:.0f}; 0: only the "
                   "log's last lines, read at attach)")
    p.add_argument("--demo", action="store_true", help="report on the demo world (starts its server, stops it after)")
    p.add_argument("--engine", choices=("sim", "sglang", "vllm"), default="sim",
                   help="with --demo: what serves the demo world (as `eagle3-tui --demo --engine`)")
    p.add_argument("--port", type=int, help="the server's port, when several servers run on the host")
    p.add_argument("--pid", type=int, help="the server's pid, when several servers run on the host")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import asyncio
    from pathlib import Path

    from eagle3_tui.errors import UserError

    if args.watch < 0:
        raise UserError(f"--watch must be 0 or more seconds, not {args.watch:g}")
    if args.demo and (args.host or args.local):
        raise UserError("--demo reports on the demo world: give it without --host or --local")
    if args.output:
        from eagle3_tui.report.write import preflight

        preflight(Path(args.output))  # before attaching and watching, not after
    return asyncio.run(_run_demo(args) if args.demo else _run_host(args))


async def _run_host(args: argparse.Namespace) -> int:
    from eagle3_tui.commands.hostcmds import _profile, pin_pid
    from eagle3_tui.session import Session

    session = Session(_profile(args), readonly=args.readonly)
    try:
        await pin_pid(session, args.pid)
        await _report(session, args, lambda: session.attach())
    finally:
        await session.close()
    return 0


async def _run_demo(args: argparse.Namespace) -> int:
    import asyncio
    import shutil

    from eagle3_tui.errors import UserError
    from eagle3_tui.session import (
        DemoWorldBuild,
        demo_attach_and_start,
        demo_boot,
        demo_stop_and_close,
        new_demo_root,
        real_engine_missing,
    )

    missing = real_engine_missing(args.engine)
    if missing is not None:
        raise UserError(missing)
    root, _ = await asyncio.to_thread(new_demo_root, None)
    build = DemoWorldBuild()
    try:
        session = await demo_boot(args.readonly, root, build, engine=args.engine)(_progress)
        try:
            await _report(session, args, lambda: demo_attach_and_start(session))
        finally:
            await demo_stop_and_close(session)
    finally:
        build.stop()
        shutil.rmtree(root, ignore_errors=True)
    return 0


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def _report(session: Session, args: argparse.Namespace, attach: Any) -> None:
    """Attach, watch, gather, write; the report's path on stdout."""
    import asyncio
    from pathlib import Path

    from eagle3_tui.report import gather, write_report
    from eagle3_tui.session import LogBatch

    first = asyncio.Event()

    def heard(ev: object) -> None:
        if isinstance(ev, LogBatch):
            first.set()

    session.add_listener(heard)
    await attach()
    if session.recovered:
        print(f"eagle3-tui: warning: {session.recovered}", file=sys.stderr, flush=True)
    note = ""
    if args.watch > 0:
        if session.server.log_path:  # the log's last lines, read at attach, land at one instant: set aside
            try:
                await asyncio.wait_for(first.wait(), FIRST_BATCH_S)
            except asyncio.TimeoutError:
                pass
            session.telemetry.reset()
        _progress(f"watching the server for {args.watch:g} s (--watch 0 skips)…")
        await asyncio.sleep(args.watch)
        note = f"The points are the {args.watch:g} s `eagle3-tui report` watched the server."
    await session.survey.refresh_findings()
    data = gather(session, series_note=note)
    path = await asyncio.to_thread(write_report, data, Path(args.output) if args.output else None)
    print(path)
