"""`eagle3-tui ledger`: print the run ledger (config, accept length, tok/s, speedup vs baseline).

Reading only: a missing default ledger prints "no runs yet"; a `--db` that does not exist is an
error (a typo must not look like an empty history).
"""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser) -> None:
    p = subparsers.add_parser(
        "ledger",
        parents=[common],
        help="print the run ledger: config, accept length, tok/s, speedup vs baseline",
        description=(
            "Print every recorded restart, preset, benchmark and check. With --host, only that host's "
            "runs. --markdown and --csv give tables to paste in a report."
        ),
    )
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--markdown", action="store_true", help="a markdown table")
    fmt.add_argument("--csv", action="store_true", help="CSV, with the full config and results as JSON")
    p.add_argument("--db", metavar="FILE", help="the ledger file (default: the user data dir's ledger.sqlite3)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from eagle3_tui.errors import UserError
    from eagle3_tui.telemetry.ledger import Ledger, to_csv, to_markdown, to_text

    if args.db is not None and not Path(args.db).expanduser().exists():
        raise UserError(f"no ledger at {args.db}")
    ledger = Ledger(args.db)
    host = args.host if args.host else ("localhost" if getattr(args, "local", False) else None)
    rows = ledger.rows(host=host)
    if args.csv:
        sys.stdout.write(to_csv(rows))
    elif args.markdown:
        sys.stdout.write(to_markdown(rows))
    elif not rows:
        where = f" for {host}" if host else ""
        print(f"no runs recorded{where} yet (ledger: {ledger.path})")
    else:
        sys.stdout.write(to_text(rows))
    return 0
