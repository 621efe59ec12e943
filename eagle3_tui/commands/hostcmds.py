"""Headless commands on an attached host: doctor, watch, bench, apply, restart, rollback, presets.

Each builds the same `Session` the console uses (one restart path, one ledger). `--readonly`
refuses every change before anything is touched.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eagle3_tui.engines import SpecStats
    from eagle3_tui.profile import Profile
    from eagle3_tui.session import ApplyPlan, Session, SessionEvent
    from eagle3_tui.sglang.client import BenchResult
    from eagle3_tui.sglang.logline import DecodeStats
    from eagle3_tui.telemetry.metrics import Telemetry

NAMES = ("doctor", "watch", "bench", "apply", "restart", "rollback", "presets")


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    def add(name: str, help_: str) -> argparse.ArgumentParser:
        p = subparsers.add_parser(name, parents=[common], help=help_, description=help_)
        p.add_argument("--port", type=int, help="the server's port, when several servers run on the host")
        p.add_argument("--pid", type=int, help="the server's pid (its main process or its group), when several "
                       "servers run on the host")
        p.set_defaults(func=run, hostcmd=name)
        return p

    p = add("doctor", "diagnose the served draft: findings with evidence and a fix")
    p.add_argument("--json", action="store_true", help="print the findings as JSON")
    p.add_argument("--data", metavar="GLOB", help="the draft's training data on the host (its first file is read "
                   "for the trained wiring; default: the profile's data_glob)")
    p.add_argument("--data-slots", metavar="B0,B1,..", help="boundaries the data's slots hold (0 = embedding), "
                   "e.g. 0,3,31,59 (default: the profile's data_slots)")

    p = add("watch", "follow the server log and print a line per decode stat (no log file: from HTTP)")
    p.add_argument("--no-ui", action="store_true", help="print lines instead of opening the console")
    p.add_argument("--count", type=int, metavar="N", help="stop after N decode lines")
    p.add_argument("--duration", type=float, metavar="S", help="stop after S seconds")

    p = add("bench", "benchmark the server through its HTTP API and record the run in the ledger")
    p.add_argument("--baseline", action="store_true", help="mark the run as the no-speculation baseline")
    p.add_argument("-n", "--num-prompts", type=int, default=16, metavar="N", help="requests to send (default 16)")
    p.add_argument("-c", "--concurrency", type=_concurrency, default=4, metavar="C",
                   help="requests in flight (default 4); `match`: as many as the server runs now (its decode "
                   "lines' #running-req, else /metrics)")
    p.add_argument("--max-tokens", type=int, default=128, metavar="M", help="tokens per request (default 128)")
    p.add_argument("--prompts", metavar="FILE", help="prompts: one per line, JSON lines or a JSON list; an "
                   "object's \"set\" (or \"category\", \"dataset\", ...) field groups the accept length by set")
    p.add_argument("--raw", action="store_true", help="send the prompts as bare text, not as chat in the served "
                   "model's chat template (a chat-trained draft accepts less on raw text)")
    p.add_argument("--json", action="store_true", help="print the result as JSON")

    p = add("apply", "apply a preset (layer ids or launch flags) and restart the server")
    p.add_argument("preset", help="preset name (see `eagle3-tui presets`)")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")

    p = add("restart", "restart the server with the same command, environment and directory")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")
    p.add_argument("--into-log", action="store_true",
                   help="a server in a tmux/screen pane or a pipe: relaunch it detached, into a log file")

    p = add("rollback", "restore the config (or launch command) from before the last preset and restart")
    p.add_argument("--yes", "-y", action="store_true", help="do not ask for confirmation")

    add("presets", "list the presets with the boundaries they mean for this target")


def _concurrency(text: str) -> int | str:
    if text.strip().lower() == "match":
        return "match"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number or `match`: {text!r}") from None


def run(args: argparse.Namespace) -> int:
    import asyncio

    from eagle3_tui.session import CHANGES_HOST, refuse_readonly

    name = args.hostcmd
    if args.readonly and name in CHANGES_HOST:
        raise refuse_readonly(name)
    if name == "watch" and not args.no_ui:
        from eagle3_tui.ui.launch import run_console

        return run_console(args)
    return asyncio.run(_run(args))


def _profile(args: argparse.Namespace) -> Profile:
    from eagle3_tui.profile import load_profile

    overrides: dict[str, Any] = {"port": args.port}
    if args.accept_new_host_key:
        overrides["accept_new_host_key"] = True
    return load_profile(args.host, args.profile, overrides, local=args.local)


async def pin_pid(session: Session, pid: int | None) -> None:
    """`--pid`: the server with that pid (its main process, or its process group) is the one this command
    acts on, pinned by its port from here on; none there is refused, naming what runs (nothing changed)."""
    from eagle3_tui.errors import UserError
    from eagle3_tui.session import discover

    if pid is None:
        return
    await session.connect()
    prof = session.profile
    found = (await discover(session.host, log_path=prof.log_path, launch_command=prof.launch_command)).servers
    match = next((s for s in found if pid in (s.pid, s.pgid)), None)
    named = "; ".join(s.label for s in found) or "none"
    if match is None:
        raise UserError(f"no SGLang or vLLM server this console recognises runs with pid {pid} on {prof.name} (servers "
                        f"found: {named}); nothing was changed")
    if prof.port is not None and prof.port != match.port:
        raise UserError(f"pid {pid} is the server on port {match.port}, not on port {prof.port} as asked; "
                        "nothing was changed")
    prof.port = match.port


def _confirm(args: argparse.Namespace, question: str) -> None:
    from eagle3_tui.errors import UserError

    if getattr(args, "yes", False):
        return
    if not sys.stdin.isatty():
        raise UserError(f"{question} needs confirmation: run it again with --yes")
    answer = input(f"{question} [y/N] ").strip().lower()
    if answer not in ("y", "yes"):
        raise UserError("cancelled")


async def _run(args: argparse.Namespace) -> int:
    from eagle3_tui.session import Session

    session = Session(_profile(args), readonly=args.readonly)
    try:
        await pin_pid(session, getattr(args, "pid", None))
        await session.attach()
        if session.recovered:
            print(f"eagle3-tui: warning: {session.recovered}", file=sys.stderr, flush=True)
        handler = {
            "doctor": _doctor,
            "watch": _watch,
            "bench": _bench,
            "apply": _apply,
            "restart": _restart,
            "rollback": _rollback,
            "presets": _presets,
        }[args.hostcmd]
        rc = await handler(session, args)
        if session.records.problem:
            print(f"eagle3-tui: warning: {session.records.problem}", file=sys.stderr)
        return rc
    finally:
        await session.close()


def _server_line(session: Session) -> str:
    s = session.server
    spec = (f"steps {s.steps} topk {s.topk} draft tokens {s.draft_tokens}" if s.speculative
            else "no speculation")
    where = f"pid {s.pid}" if s.pid else "no process"
    return f"server: {s.state} ({where}, port {s.port}); {spec}; log {s.log_path or '?'}"


async def _doctor(session: Session, args: argparse.Namespace) -> int:
    import json

    from eagle3_tui.errors import UserError

    prof = session.profile
    if session.server.pid is None and not (prof.launch_command or prof.draft_path or prof.target_path):
        # "no findings" would read as a clean bill of health; there was nothing to examine
        raise UserError(
            f"no SGLang server is running on {prof.name} and its profile names no launch command, draft "
            "or target: nothing to diagnose (start the server, or set draft_path and target_path)"
        )
    data_line = await _training_data(session, args)
    findings = await session.survey.refresh_findings()
    if args.json:
        td = session.training
        print(json.dumps({"host": session.profile.name, "server": _server_json(session),
                          "deployment": session.deployment.to_json(),
                          "training_data": None if td is None else {
                              "glob": td.glob, "slots": list(td.slots) if td.slots is not None else None,
                              "convention": td.convention, "note": td.note},
                          "findings": [f.to_dict() for f in findings]}, indent=2))
        return 0
    print(_server_line(session))
    print(data_line)
    if not findings:
        print("no findings: nothing the doctor knows of is wrong")
    for f in findings:
        print(f.to_text())
    return 0


async def _training_data(session: Session, args: argparse.Namespace) -> str:
    """The trained wiring's inputs: --data (read; bad input is an error), else the profile's (its slots as
    given; a glob without slots is read to infer them, a failure only a warning). One line saying what."""
    from eagle3_tui.errors import UserError
    from eagle3_tui.session import parse_slots, unknown_line

    prof = session.profile
    slots = parse_slots(args.data_slots)
    if args.data:
        return (await session.accuracy.use_training_data(args.data, slots if slots is not None else
                                                (prof.data_slots if args.data == prof.data_glob else None))).summary()
    if slots is not None:
        prof.data_slots = slots
    if prof.data_slots:
        return f"training data {prof.data_glob or '(no data_glob)'}: slots hold boundaries " \
               f"{', '.join(map(str, prof.data_slots))} (profile)"
    if prof.data_glob:
        try:
            return (await session.accuracy.use_training_data(prof.data_glob)).summary()
        except UserError as err:
            return f"trained wiring unknown: the profile's data_glob cannot be read ({err})"
    return unknown_line()


def _server_json(session: Session) -> dict[str, Any]:
    s = session.server
    return {"state": s.state, "pid": s.pid, "port": s.port, "speculative": s.speculative, "steps": s.steps,
            "topk": s.topk, "draft_tokens": s.draft_tokens, "requested_draft_tokens": s.requested_draft_tokens,
            "layer_ids": list(s.layer_ids) if s.layer_ids is not None else None,
            "boundaries": list(s.boundaries) if s.boundaries is not None else None,
            "log_path": s.log_path}


def format_decode(ev: DecodeStats, telemetry: Telemetry) -> str:
    """One line per decode stat (`telemetry.metrics.decode_line`, the console's HTTP lines use it too)."""
    from eagle3_tui.telemetry.metrics import decode_line

    return decode_line(ev, telemetry.num_steps)


def format_spec(ev: SpecStats) -> str:
    """One line per engine-seam stats line that carries acceptance (vLLM's `SpecDecoding metrics`)."""
    parts = [f"accept len {ev.mean_acceptance_length:.2f}"]
    if ev.per_position:
        parts.append("per position " + " / ".join(f"{r:.2f}" for r in ev.per_position))
    if ev.draft_acceptance_rate is not None:
        parts.append(f"draft accept rate {ev.draft_acceptance_rate:.1%}")
    return f"[{ev.engine}] " + ", ".join(parts)


async def _watch(session: Session, args: argparse.Namespace) -> int:
    """A line per decode stat: from the log, or, for a server with no log file (a pane, a pipe), from HTTP
    at each poll, each such line marked "(from /metrics)" or "(from /server_info)"."""
    import asyncio

    from eagle3_tui.engines import SpecStats
    from eagle3_tui.errors import UserError
    from eagle3_tui.session import HttpSample, LogBatch, Notice, no_log
    from eagle3_tui.sglang.logline import DecodeStats

    http = no_log(session.deployment, session.server.log_path)
    if http is not None and session.server.state not in ("ready", "starting"):
        raise UserError("the server's log file is unknown and no server is running: give log_path in the profile")
    print(_server_line(session), flush=True)
    if http is not None:
        print(f"no log file ({http.reason}): accept length and tok/s from HTTP, every poll", flush=True)
    done = asyncio.Event()
    seen = 0

    def line(text: str) -> None:
        nonlocal seen
        print(text, flush=True)
        seen += 1
        if args.count and seen >= args.count:
            done.set()

    def on_event(ev: SessionEvent) -> None:
        if isinstance(ev, LogBatch):
            for e in ev.events:
                if isinstance(e, DecodeStats):
                    line(format_decode(e, session.telemetry))
                elif isinstance(e, SpecStats) and e.mean_acceptance_length is not None:  # vLLM's SpecDecoding
                    line(format_spec(e))
        elif isinstance(ev, HttpSample):
            line(format_decode(ev.stats, session.telemetry))
        elif isinstance(ev, Notice) and ev.severity != "information" and http is not None:
            print(f"eagle3-tui: {ev.severity}: {ev.message}", file=sys.stderr, flush=True)

    session.add_listener(on_event)
    try:
        await asyncio.wait_for(done.wait(), timeout=args.duration)
    except asyncio.TimeoutError:
        pass
    return 0


async def _bench(session: Session, args: argparse.Namespace) -> int:
    import json

    from eagle3_tui.formats.readers import text_file
    from eagle3_tui.sglang.client import load_prompt_sets

    prompts = load_prompt_sets(text_file(args.prompts, "the prompts file")) if args.prompts else None
    concurrency = args.concurrency
    if concurrency == "match":
        concurrency, seen = await session.bench.served_concurrency()
        print(f"concurrency {concurrency}: {seen}", file=sys.stderr, flush=True)
    r = await session.bench.run(baseline=args.baseline, raw=args.raw, prompts=prompts, num_prompts=args.num_prompts,
                                concurrency=concurrency, max_tokens=args.max_tokens)
    if args.json:
        print(json.dumps(session.bench.results(r), indent=2, default=str))
        return 0
    print(_server_line(session))
    print(format_bench(r, session.telemetry.baseline_tps))
    return 0


def format_bench(r: BenchResult, baseline_tps: float | None) -> str:
    from eagle3_tui.telemetry.metrics import speedup

    def f(v: float | None, fmt: str = "{:.2f}") -> str:
        return "-" if v is None else fmt.format(v)

    lines = [
        f"{'baseline ' if r.baseline else ''}benchmark: {r.ok}/{r.num_prompts} requests ok, concurrency "
        f"{r.concurrency}, max tokens {r.max_tokens}, {r.duration_s:.1f} s",
        f"  prompts           {r.prompt_format}" + (f" ({r.chat_template})" if r.chat_template else ""),
        f"  output tok/s      {r.output_tps:.2f}",
        f"  latency p50/p90   {f(r.latency_p50_s)} s / {f(r.latency_p90_s)} s",
        f"  accept length     {f(r.accept_len)} (requests {f(r.accept_len_client)}, log {f(r.accept_len_log)}, "
        f"server {f(r.accept_len_server)})",
    ]
    if r.per_position:
        lines.append("  per position      " + " ".join(f"{v:.2f}" for v in r.per_position) + " (the requests')")
    if r.sets:
        lines.append("  per request       accept length: requests, mean, p10 / p50 / p90 (by prompt set)")
        width = max(len(x.name) for x in r.sets)
        lines += [f"    {x.name:<{width}}  {x.requests:4d}  {x.mean:.2f}  {x.p10:.2f} / {x.p50:.2f} / {x.p90:.2f}"
                  for x in r.sets]
    if r.published_accept_len is not None:
        lines.append(f"  published         {r.published_accept_len:.2f} ({r.published_source})")
    sp = speedup(r.output_tps, baseline_tps)
    if sp is not None and not r.baseline:
        lines.append(f"  vs baseline       {sp:.2f}x ({baseline_tps:.2f} tok/s)")
    if r.errors:
        lines.append(f"  errors            {r.errors}: {r.error_messages[0] if r.error_messages else ''}")
    return "\n".join(lines)


def _print_plan(plan: ApplyPlan) -> None:
    print(f"preset {plan.preset.name} ({plan.preset.kind}) -> {plan.path}")
    print(plan.diff.rstrip() if plan.diff else "(no change)")
    for w in plan.warnings:
        print(f"note: {w}")
    for p in plan.problems:
        print(f"problem: {p}")


def _progress_printer(ev: SessionEvent) -> None:
    from eagle3_tui.session import RestartProgress

    if isinstance(ev, RestartProgress):
        print(f"[{ev.elapsed_s:6.1f}s] {ev.phase}: {ev.message}", flush=True)


def _print_failure(session: Session) -> None:
    if session.server.state == "failed" and session.server.log_tail:
        print("last lines of the server log:", file=sys.stderr)
        for line in session.server.log_tail:
            print(f"  {line}", file=sys.stderr)


async def _apply(session: Session, args: argparse.Namespace) -> int:
    from eagle3_tui.errors import UserError

    plan = await session.presets.plan(args.preset)
    _print_plan(plan)
    if plan.problems:
        raise UserError(f"preset {plan.preset.name!r} cannot be applied: {plan.problems[0]}")
    return await _confirmed_restart(session, args, f"apply {plan.preset.name} and restart the server?",
                                    lambda: session.presets.apply(plan))


async def _restart(session: Session, args: argparse.Namespace) -> int:
    into_log = bool(getattr(args, "into_log", False))
    return await _confirmed_restart(session, args, "restart the server?", lambda: session.control.restart(into_log=into_log))


async def _rollback(session: Session, args: argparse.Namespace) -> int:
    return await _confirmed_restart(session, args, "roll back the last preset and restart the server?",
                                    session.presets.rollback)


async def _confirmed_restart(
    session: Session, args: argparse.Namespace, question: str, action: Callable[[], Awaitable[None]]
) -> int:
    """Every changing command: confirm, print restart progress, on failure the failure and log tail."""
    from eagle3_tui.errors import UserError

    _confirm(args, question)
    session.add_listener(_progress_printer)
    try:
        await action()
    except UserError:
        _print_failure(session)
        raise
    print(_server_line(session))
    return 0


async def _presets(session: Session, args: argparse.Namespace) -> int:
    from eagle3_tui.eagle.wiring import format_boundaries

    active = session.server.active_preset
    for p in session.presets.available():
        mark = "*" if p.name == active else " "
        if p.kind == "layers":
            ids = "key absent" if p.layer_ids is None else "ids " + ",".join(map(str, p.layer_ids))
            what = f"{ids} -> boundaries {format_boundaries(p.boundaries)}"
        else:
            what = ", ".join(f"--{k} {'(removed)' if v is None else v}" for k, v in p.flags.items())
        src = "built-in" if p.builtin else "profile"
        print(f"{mark} {p.name:18} {what}  [{src}] {p.description}")
    return 0
