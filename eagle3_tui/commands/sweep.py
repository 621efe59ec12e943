"""`eagle3-tui sweep`: serve each (steps, topk, draft tokens) of a grid in turn, benchmark each briefly,
record each in the ledger with its predicted accept length, and restore the starting launch command
(session/sweep.py). Also the prediction grid and table `check` uses.

    eagle3-tui sweep --host H [--grid 3,1,4 --grid 3,4,8 ...] [--best N] [--yes]

Ctrl-C stops after restoring the start. Without a check report with predictions in this run the
order is the grid's; `--check` runs the check first (with the grid as `--predict`) to order it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eagle3_tui.eagle.accuracy import CheckReport
    from eagle3_tui.eagle.spec_config import SpecConfig
    from eagle3_tui.profile import Profile
    from eagle3_tui.session import Session, SweepResult, SweepStep



def parse_grid(texts: Sequence[str]) -> list[SpecConfig]:
    """`S,K,D` strings (SGLang's topk-1 rule applied) -> configs; UserError on a bad one."""
    from eagle3_tui.eagle.spec_config import SpecConfig
    from eagle3_tui.errors import UserError

    out: list[SpecConfig] = []
    for t in texts:
        try:
            c = SpecConfig.parse(t)
        except ValueError as err:
            raise UserError(f"--predict/--grid: {err}") from None
        if c not in out:
            out.append(c)
    return out


def prediction_grid(texts: Sequence[str], profile: Profile | None) -> list[SpecConfig]:
    """`check --predict`: the given configs; `none` for none; by default the console's grid
    (`session.check_grid`) for the profile's launch command, its flag presets and its ledger."""
    if any(t.strip().lower() == "none" for t in texts):
        return []
    if texts:
        return parse_grid(texts)
    from eagle3_tui.session import builtin_presets, check_grid, ledger_configs, served_config
    from eagle3_tui.sglang import launch
    from eagle3_tui.telemetry.ledger import Ledger

    if profile is None:
        return check_grid(None)
    argv = profile.launch_command
    current = launch.parse_launch(argv) if argv else None
    presets = [*builtin_presets(data_slots=profile.data_slots, current=current), *profile.presets]
    try:
        seen = ledger_configs(r.config for r in Ledger().rows(host=profile.name))
    except Exception:  # an unreadable ledger: the check runs all the same, as in the console
        seen = []
    return check_grid(served_config(argv), [p.flags for p in presets if p.kind == "flags"], seen)


def format_predictions(report: CheckReport, served: SpecConfig | None = None) -> list[str]:
    """The check's predictions as a small table per wiring (the served flags marked with *)."""
    rows = report.prediction_list()
    if not rows:
        return []
    lines = ["", "predicted accept length (steps/topk/draft tokens):"]
    for wiring in dict.fromkeys(r.wiring for r in rows):
        cells = []
        for r in (r for r in rows if r.wiring == wiring):
            mark = "*" if served == r.config else ""
            val = "-" if r.accept_len is None else f"{r.accept_len:.2f}"
            cells.append(f"{r.config}{mark} {val}")
        lines.append(f"  {wiring}: " + ", ".join(cells))
    return lines


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    p = subparsers.add_parser(
        "sweep", parents=[common],
        help="serve each steps/topk/draft-tokens config in turn, benchmark it, record it, restore the start",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    p.add_argument("--port", type=int, help="the server's port, when several servers run on the host")
    p.add_argument("--pid", type=int, help="the server's pid (its main process or its group), when several "
                   "servers run on the host")
    p.add_argument("--grid", action="append", default=[], metavar="S,K,D",
                   help="a configuration to serve (repeatable; default: the standard grid)")
    p.add_argument("--best", type=int, metavar="N", help="serve only the N predicted best")
    p.add_argument("--check", action="store_true",
                   help="run the accuracy check first (predicting the grid) to serve the predicted best first")
    p.add_argument("-n", "--num-prompts", type=int, default=8, help="prompts per benchmark (default 8)")
    p.add_argument("-c", "--concurrency", type=_concurrency, default=4,
                   help="concurrent requests (default 4); `match`: as many as the server runs now")
    p.add_argument("--max-tokens", type=int, default=64, help="tokens per request (default 64)")
    p.add_argument("--raw", action="store_true", help="send the prompts as bare text, not as chat in the served "
                   "model's chat template")
    p.add_argument("--yes", action="store_true", help="do not ask before the restarts")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=run)


def _concurrency(text: str) -> int | str:
    from eagle3_tui.commands.hostcmds import _concurrency as parse

    return parse(text)


def run(args: argparse.Namespace) -> int:
    import asyncio

    from eagle3_tui.session import refuse_readonly

    if args.readonly:
        raise refuse_readonly("sweep")
    return asyncio.run(_run(args))


async def _run(args: argparse.Namespace) -> int:
    from eagle3_tui.commands.hostcmds import _confirm, _profile, pin_pid
    from eagle3_tui.eagle.spec_config import STANDARD_GRID
    from eagle3_tui.session import Session, Sweep

    grid = parse_grid(args.grid) if args.grid else list(STANDARD_GRID)
    session = Session(_profile(args), readonly=args.readonly)
    try:
        await pin_pid(session, args.pid)
        await session.attach()
        report = await _maybe_check(session, grid) if args.check else session.check
        _confirm(args, f"serve {min(len(grid), args.best or len(grid))} configurations in turn "
                       "(a restart each) and restore the start?")
        concurrency = args.concurrency
        if concurrency == "match":  # read before the first restart: the load is the deployment's, not the sweep's
            concurrency, seen = await session.bench.served_concurrency()
            print(f"concurrency {concurrency}: {seen}", file=sys.stderr, flush=True)
        bench = {"num_prompts": args.num_prompts, "concurrency": concurrency, "max_tokens": args.max_tokens,
                 "raw": args.raw}
        sweep = Sweep(session, grid, bench=bench, report=report, limit=args.best,
                      on_progress=None if args.json else _printer())
        result = await sweep.run()
    finally:
        await session.close()
    _print(result, args.json)
    return 0 if result.restored and not result.restore_error else 1


async def _maybe_check(session: Session, grid: list[SpecConfig]) -> Any:
    try:
        return await session.accuracy.run(predict=grid)
    except Exception as err:  # the sweep still runs, in grid order
        print(f"eagle3-tui: the check did not run ({err}); serving in grid order", file=sys.stderr)
        return None


def _printer() -> Any:
    def show(done: int, total: int, step: SweepStep | None, eta: float | None) -> None:
        if step is None:
            return
        print(f"[{done}/{total}] {_step_line(step)}" + (f"  (eta {eta:.0f} s)" if eta else ""), flush=True)

    return show


def _step_line(step: SweepStep) -> str:
    s, k, d = step.config
    pred = "-" if step.predicted is None else f"{step.predicted:.2f}"
    if step.error:
        return f"steps {s} topk {k} draft {d}: failed: {step.error.splitlines()[0]}"
    acc = "-" if step.accept_len is None else f"{step.accept_len:.2f}"
    tps = "-" if step.tok_s is None else f"{step.tok_s:.1f}"
    return f"steps {s} topk {k} draft {d}: accept len {acc} (predicted {pred}), {tps} tok/s"


def _print(result: SweepResult, as_json: bool) -> None:
    if as_json:
        import json

        print(json.dumps({"steps": [s.to_dict() for s in result.steps], "restored": result.restored,
                          "stopped": result.stopped, "restore_error": result.restore_error,
                          "start_argv": result.start_argv}, indent=2))
        return
    if result.restore_error:
        print(f"the starting launch command was NOT restored: {result.restore_error}", file=sys.stderr)
    else:
        print("restored the starting launch command" if result.restored else "start not restored")
