"""`eagle3-tui check`: the standalone accuracy check, wirings side by side, locally or on the GPU host.

Without --host (or with --local / a local profile) it runs in this process; with --host it ships the
check's zip application to the host over SSH, runs it there next to the data, and streams the
results back (a `Session` connected with the profile's SSH settings runs
eagle3_tui/session/check/job.py). Paths are the host's.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from eagle3_tui.commands.sweep import format_predictions, prediction_grid
from eagle3_tui.errors import UserError

if TYPE_CHECKING:
    from eagle3_tui.eagle.accuracy import CheckReport
    from eagle3_tui.engines.served_by import ServedBy
    from eagle3_tui.profile import Profile


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    p = subparsers.add_parser(
        "check",
        parents=[common],
        help="measure the draft on its training data under several wirings",
        description=(
            "Load the draft checkpoint, check its tensors against what SGLang loads, feed it hidden "
            "states from its training data under each candidate wiring (the trainer's [:-1], SGLang's "
            "default, what the draft config means, any you name) and report top-1/top-5 accuracy, "
            "per-step acceptance and the predicted accept length side by side."
        ),
    )
    p.add_argument("--draft", metavar="DIR", help="draft model directory (config.json + safetensors)")
    p.add_argument("--data", metavar="GLOB", help="training data: speculators .pt, hidden_states/hs_*.safetensors "
                   "or SpecForge .ckpt files (a glob or a directory)")
    p.add_argument("--target-config", "--target", dest="target", metavar="FILE",
                   help="the target's config.json (or its directory): number of layers, hidden size; "
                        "its embedding/lm_head are read from safetensors beside it when present")
    p.add_argument("--wiring", action="append", default=[], metavar="NAME|IDS",
                   help="extra wiring: training, serving, config, SGLang ids like -1,2,30, "
                        "slots:0,1,2, boundaries:0,3,31, vllm:2,16,29 (repeatable)")
    p.add_argument("--data-slots", metavar="B0,B1,..", help="boundaries the data's slots hold (0 = embedding), "
                   "e.g. 0,3,31,59")
    p.add_argument("--num-layers", type=int, help="the target's number of layers (else from --target-config)")
    p.add_argument("--samples", type=int, default=20000, help="positions to measure (default 20000)")
    p.add_argument("--steps", type=int, default=3, help="chain draft steps to simulate (default 3)")
    p.add_argument("--device", default="cpu", help="cpu or cuda[:N]")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--labels", default="auto", choices=["auto", "target", "tokens"],
                   help="compare with the target's own next token (needs its lm_head) or the data's tokens")
    p.add_argument("--batch-tokens", type=int, default=16384, help="tokens per forward batch")
    p.add_argument("--threads", type=int, help="torch CPU threads")
    p.add_argument("--remote-python", metavar="PATH", help="the host's Python with torch and safetensors")
    p.add_argument("--predict", action="append", default=[], metavar="S,K,D",
                   help="predict the accept length for steps,topk,draft_tokens (repeatable; default: the "
                        "served flags and a small standard grid; 'none' for no prediction)")
    p.add_argument("--served-by", metavar="ENGINE==RELEASE",
                   help="the engine serving the draft, sglang==X or vllm==Y: its numbers lead (default: the "
                        "attached server's, else SGLang 0.5.6's loader); the other engine's are shown beside")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run)


def _profile(args: argparse.Namespace) -> Profile | None:
    if not (args.host or args.local or args.profile):
        return None
    from eagle3_tui.profile import load_profile

    overrides: dict[str, object] = {"remote_python": args.remote_python}
    if args.accept_new_host_key:
        overrides["accept_new_host_key"] = True
    return load_profile(args.host, args.profile, overrides, local=args.local or (args.host is None))


def run(args: argparse.Namespace) -> int:
    from eagle3_tui.engines.served_by import parse_served_by

    served = parse_served_by(args.served_by) if args.served_by else None
    profile = _profile(args)
    draft = args.draft or (profile.draft_path if profile else None)
    data = args.data or (profile.data_glob if profile else None)
    target = args.target or (profile.target_path if profile else None)
    from eagle3_tui.session import parse_slots

    given = parse_slots(args.data_slots)
    slots = list(given) if given is not None else None
    if slots is None and profile is not None and profile.data_slots:
        slots = list(profile.data_slots)
    if not draft:
        raise UserError("no draft given: use --draft DIR (or draft_path in the host's profile)")
    if not data:
        raise UserError("no data given: use --data GLOB (or data_glob in the host's profile)")
    if args.samples <= 0 or args.steps <= 0:
        raise UserError("--samples and --steps must be positive")
    options = dict(target=target, wirings=list(args.wiring), samples=args.samples, steps=args.steps,
                   device=args.device, dtype=args.dtype, data_slots=slots, num_layers=args.num_layers,
                   labels=args.labels, batch_tokens=args.batch_tokens, threads=args.threads,
                   predict=prediction_grid(args.predict, profile))
    show = _Progress(enabled=not args.json and sys.stderr.isatty())
    if profile is not None and not profile.local:
        import asyncio

        report = asyncio.run(_remote(profile, draft, data, options, show, served))
    else:
        from eagle3_tui.eagle.accuracy import CheckOptions, run_check

        if served is None and profile is not None:
            served = _served_locally(profile)
        with_engine = _with_engine(options, served, None)
        with_engine["served"] = _loader(with_engine.pop("served_loader", None))
        with_engine["other"] = _loader(with_engine.pop("other_loader", None))
        opts = CheckOptions(draft_dir=draft, data=data, **with_engine)
        report = run_check(opts, show)
    show.clear()
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print(format_report(report))
    return 0


async def _remote(profile: Profile, draft: str, data: str, options: dict[str, Any], show: _Progress,
                  served: ServedBy | None) -> CheckReport:
    """The check on the profile's host, through the same Session (and SSH settings) the console uses."""
    from eagle3_tui.session import Session

    session = Session(profile)
    try:
        await session.connect()
        python = profile.remote_python or session.host.python
        found, read = _served_by_session(session)
        options = _with_engine(options, served or found, read if served is None else None)
        return await session.accuracy.run(draft_dir=draft, data_glob=data, python=python, on_event=show,
                                       record=False, **options)
    finally:
        await session.close()


def _served_by_session(session: Any) -> tuple[ServedBy | None, Any]:
    """The engine and release the attached server runs, as discovery found it (today only SGLang: its
    version, and the draft loader read from its installed source when that was read)."""
    from eagle3_tui.engines.served_by import ServedBy

    version = getattr(session.server, "version", None)
    if not version:
        return None, None
    try:
        answer = session.installed()
    except Exception:  # the installed source is a refinement; the version alone names the release
        answer = None
    return ServedBy("sglang", str(version)), getattr(answer, "loader", None) if answer is not None else None


def _served_locally(profile: Profile) -> ServedBy | None:
    """--local: the engine of the server on this machine, through a Session as the console attaches."""
    import asyncio

    from eagle3_tui.session import Session

    async def look() -> ServedBy | None:
        session = Session(profile)
        try:
            await session.connect()
            return _served_by_session(session)[0]
        finally:
            await session.close()

    try:
        return asyncio.run(look())
    except Exception:  # no server to read: the check models the default loader and says so
        return None


def _with_engine(options: dict[str, Any], served: ServedBy | None, read: Any) -> dict[str, Any]:
    """The check's options with the serving engine's loader (and the other's) as JSON-able dicts, and,
    for vLLM, its chain (steps, 1, steps + 1) in the prediction grid."""
    from eagle3_tui.eagle.spec_config import SpecConfig
    from eagle3_tui.engines.served_by import DEFAULT_SGLANG, ServedBy, loader_for

    out = dict(options)
    if served is None:
        return out
    out["served_loader"] = loader_for(served, read).to_dict()
    if served.engine == "vllm":
        out["other_loader"] = loader_for(ServedBy("sglang", DEFAULT_SGLANG)).to_dict()
        chain = SpecConfig(out["steps"], 1, out["steps"] + 1)
        grid = list(out.get("predict") or [])
        if grid and chain not in grid:
            out["predict"] = [*grid, chain]
    return out


def _loader(d: dict[str, Any] | None) -> Any:
    if d is None:
        return None
    from eagle3_tui.eagle.trainers import ServedLoader

    return ServedLoader.from_dict(d)


class _Progress:
    """One rewritten stderr line while the check runs (only on a terminal)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.shown = False

    def __call__(self, event: Mapping[str, Any]) -> None:
        if not self.enabled:
            return
        kind = event.get("event")
        if kind == "progress":
            eta = event.get("eta_s")
            text = f"checking {event.get('wiring')}: {event.get('done')}/{event.get('total')} positions"
            if eta is not None:
                text += f", about {eta:.0f} s left"
        elif kind == "data":
            text = f"read {event.get('files')} {event.get('layout')} files, {event.get('positions')} positions"
        else:
            return
        sys.stderr.write("\r\x1b[2K" + text)
        sys.stderr.flush()
        self.shown = True

    def clear(self) -> None:
        if self.shown:
            sys.stderr.write("\r\x1b[2K")
            sys.stderr.flush()


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _beside(other: Mapping[str, Any] | None) -> str:
    if not other or other.get("top1") is None:
        return "-"
    acc = other.get("predicted_accept_len")
    return f"{_pct(other['top1'])} {acc:.2f}" if isinstance(acc, (int, float)) else _pct(other["top1"])


def _hint(report: CheckReport) -> str:
    """For an SGLang headline that drops what the draft was trained with: the release that applies it
    (from the release table), or that none does."""
    if report.engine != "sglang" or not report.dropped or not report.served_by.startswith("SGLang "):
        return ""
    from eagle3_tui.engines.served_by import ServedBy, upgrade_hint

    return upgrade_hint(report.dropped, ServedBy("sglang", report.served_by.split(" ", 1)[1]))


def vllm_chain(report: CheckReport) -> tuple[str, list[float]] | None:
    """(wiring, predicted per-position acceptance) of vLLM's chain (num_speculative_tokens = the check's
    steps, topk 1) on the served wiring (the draft config's, else the best): the prediction grid's depth
    rates for (steps, 1, steps + 1) when predicted, else the chain's per-step rates, multiplied out."""
    from eagle3_tui.eagle.predict import chain_positions

    w = report.served_wiring(None) or report.best()
    if w is None or not w.step_accept:
        return None
    want = (report.steps, 1, report.steps + 1)
    rates = list(w.step_accept)
    for row in report.predictions:
        if (row.get("boundaries") == w.boundaries and (row.get("steps"), row.get("topk"), row.get("draft_tokens")) == want
                and row.get("depth_accept")):
            rates = [float(a) for a in row["depth_accept"]]
    return w.name, chain_positions(rates)


def format_vllm_chain(report: CheckReport, measured: Sequence[float] | None = None) -> list[str]:
    """vLLM's chain, predicted per position (and vLLM's measured rates beside, when known); only when vLLM
    serves: accept length = 1 + sum_i prod_{j<=i} a_j."""
    if report.engine != "vllm":
        return []
    got = vllm_chain(report)
    if got is None:
        return []
    name, per = got
    lines = [f"vLLM chain ({report.steps} speculative tokens, topk 1) on {name}: per-position acceptance "
             f"{' '.join(f'{a:.2f}' for a in per)}, mean acceptance length {1 + sum(per):.2f}"]
    if measured:
        lines.append(f"  measured by vLLM: {' '.join(f'{a:.2f}' for a in measured)}, "
                     f"mean acceptance length {1 + sum(measured):.2f}")
    return lines


def format_report(report: CheckReport) -> str:
    """The side-by-side table, the norm probe, the checkpoint findings and notes, as plain text."""
    from eagle3_tui.eagle.checkpoint import CheckpointIssue, summarize
    from eagle3_tui.eagle.wiring import format_boundaries

    lines: list[str] = []
    lines.append(f"draft {report.draft_dir}")
    lines.append(f"data  {report.data}: {report.layout}, {report.files_read} of {report.files_total} files, "
                 f"{report.positions} positions, labels: {report.label_source or '-'}, "
                 f"{report.steps} chain steps, {report.device} {report.dtype}, {report.split} split")
    lines.append(f"numbers as {report.served_by or 'SGLang 0.5.6'} serves this draft"
                 + (f"; beside: {report.other_by}'s top-1 and accept len" if report.other_by else ""))
    lines.append("")
    beside = f"{report.other_by or 'other'}: top-1, len"
    head = ["wiring", "boundaries", "slots", "top-1", "top-5", "accept per step", "accept len", beside, "tok/s"]
    rows = [head]
    for w in report.wirings:
        b = format_boundaries(w.boundaries)
        if w.top1 is None:
            rows.append([w.name, b, ",".join(map(str, w.slots)) or "-", "-", "-", "-", "-", "-", "-"])
            continue
        rows.append([
            w.name, b, ",".join(map(str, w.slots)), _pct(w.top1), _pct(w.top5),
            " ".join(f"{a:.2f}" for a in w.step_accept),
            f"{w.predicted_accept_len:.2f}" if w.predicted_accept_len is not None else "-",
            _beside(w.other),
            f"{w.tokens_per_s:,.0f}" if w.tokens_per_s else "-",
        ])
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    right = {3, 4, 6, 7, 8}
    for k, r in enumerate(rows):
        cells = [c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(r)]
        lines.append("  ".join(cells).rstrip())
        if k == 0:
            lines.append("  ".join("-" * w for w in widths))
    for w in report.wirings:
        if w.note:
            lines.append(f"  {w.name}: {w.note}")
    trained = [w for w in report.wirings if w.top1 is not None and w.trainer.get("acc") and not w.note]
    if trained:  # the trainer's own metric, as it defines it, beside the served numbers above
        lines.append(f"in the trainer's terms: {trained[0].trainer.get('definition')}")
        for w in trained:
            lines.append(f"  {w.name}: acc per step {' '.join(_pct(a) for a in w.trainer['acc'])}"
                         + (f", cond {' '.join(_pct(a) for a in w.trainer['cond_acc'])}" if w.trainer.get("cond_acc") else ""))
    best = report.best()
    if best is not None:
        lines.append(f"best: {best.name} ({format_boundaries(best.boundaries)}), top-1 {_pct(best.top1)}, "
                     f"predicted accept length {best.predicted_accept_len:.2f} as {report.served_by or 'served'}")
    hint = _hint(report)
    if hint:
        lines.append(hint)
    lines.extend(format_vllm_chain(report))
    lines.extend(format_predictions(report))
    if report.probe:
        lines.append("")
        lines.append("hidden-state slots (mean L2 norm):")
        for p in report.probe:
            tag = "  <- looks like the embedding output" if p.get("embed_like") else ""
            cos = f", cos with target embedding {p['embed_cosine']:.3f}" if p.get("embed_cosine") is not None else ""
            b = f" (boundary {p['boundary']})" if p.get("boundary") is not None else ""
            lines.append(f"  slot {p['slot']}{b}: {p['mean_norm']:.2f}{cos}{tag}")
    issues = [CheckpointIssue(f["kind"], f["tensor"], f["message"]) for f in report.findings]
    lines.append("")
    if issues:
        lines.append("checkpoint findings:")
        lines.extend(f"  - {s}" for s in summarize(issues))
    else:
        lines.append("checkpoint: every tensor matches what SGLang's llama_eagle3 loads")
    if report.notes:
        lines.append("")
        lines.extend(f"note: {n}" for n in report.notes)
    return "\n".join(lines)
