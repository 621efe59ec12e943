"""`eagle3-tui fleet FILE [--once] [--json]`: the fleet table without the console.

The same fleet as the Fleet screen (`eagle3_tui.fleet`): each server's `/metrics` read directly or over
SSH, or every instance from `--prometheus URL`. Without `--once` it prints the table every interval until
stopped.
"""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    p = subparsers.add_parser(
        "fleet",
        parents=[common],
        help="the fleet table: accept length, tok/s, outliers and findings of many servers",
        description=(
            "Read many SGLang and vLLM servers at once (a fleet file, --host given several times, or a "
            "Prometheus server) and print one row per server: engine and release, draft, flags, accept "
            "length now and over the window, per-position rates, tok/s, running requests, last restart, "
            "the doctor's worst finding, and whether it is an outlier among its siblings."
        ),
    )
    p.add_argument("file", nargs="?", metavar="FILE", help="the fleet file (TOML: [[server]] tables)")
    add_fleet_options(p, inherit=True)
    p.add_argument("--once", action="store_true", help="print one table (two reads, --settle apart) and exit")
    p.add_argument("--json", action="store_true", help="JSON instead of a table")
    p.add_argument("--settle", type=float, default=1.0, metavar="S",
                   help="with --once: seconds between the two reads (rates need two; default 1)")
    p.add_argument("--sort", metavar="KEY", default=None,
                   help="sort the rows (name, status, engine, draft, steps, accept, window, tok_s, running, restart, "
                   "finding; a leading - reverses); default: the file's order")
    p.add_argument("--interval", type=float, default=None, metavar="S",
                   help="seconds between tables (default: the fleet file's interval_s, else 5)")
    p.set_defaults(func=run)


def add_fleet_options(p: argparse.ArgumentParser, *, inherit: bool = False) -> None:
    """Options the console's --fleet shares with the command. `inherit`: the subcommand's copy, whose unset
    options leave the values given before the subcommand (`eagle3-tui --prometheus URL fleet`) alone."""
    p.add_argument("--prometheus", metavar="URL", default=argparse.SUPPRESS if inherit else None,
                   help="read the fleet from this Prometheus server's HTTP API (one row per instance label)")
    p.add_argument("--fleet-engine", choices=("auto", "sglang", "vllm"), default=argparse.SUPPRESS if inherit else "auto",
                   help="the engine of servers given by --host (default auto: told by their /metrics)")


def run(args: argparse.Namespace) -> int:
    import asyncio

    from eagle3_tui.errors import UserError
    from eagle3_tui.fleet import spec_from_cli

    hosts = list(getattr(args, "hosts", None) or [])
    spec = spec_from_cli(args.file, hosts, args.fleet_engine, args.prometheus)
    from eagle3_tui.fleet import SORT_KEYS

    if args.sort is not None and args.sort.lstrip("-") not in SORT_KEYS:
        raise UserError(f"--sort: unknown key {args.sort!r} (one of {', '.join(SORT_KEYS)})")
    interval = args.interval or (spec.interval_s if spec is not None else 5.0)
    if interval <= 0 or args.settle < 0:
        raise UserError("--interval must be positive and --settle not negative")
    return asyncio.run(_run(args, spec, interval))


async def _run(args: argparse.Namespace, spec: object, interval: float) -> int:
    import asyncio
    import time

    from eagle3_tui.errors import UserError
    from eagle3_tui.fleet import FleetSpec, make_fleet, sort_rows, to_json, to_text
    from eagle3_tui.session import SSHTunnels

    assert spec is None or isinstance(spec, FleetSpec)
    tunnels = SSHTunnels(getattr(args, "profile", None), accept_new_host_key=args.accept_new_host_key)
    fleet, close = make_fleet(spec, prometheus=args.prometheus, tunnels=tunnels)
    try:
        while True:
            rows = await fleet.refresh()
            if args.once:
                await asyncio.sleep(args.settle)
                rows = await fleet.refresh()
            if args.sort is not None:
                rows = sort_rows(rows, args.sort.lstrip("-"), descending=args.sort.startswith("-"))
            if fleet.problem is not None and not rows:
                raise UserError(fleet.problem)
            if fleet.problem is not None:
                print(f"eagle3-tui: {fleet.problem}", file=sys.stderr)
            sys.stdout.write(to_json(rows) if args.json else to_text(rows, time.time()))
            sys.stdout.flush()
            if args.once:
                if rows and all(r.status != "ok" for r in rows):
                    raise UserError(f"none of the {len(rows)} servers answered with metrics")
                return 0
            await asyncio.sleep(interval)
            if not args.json:
                print()
    finally:
        await close()
