"""`eagle3-tui replay LOG...`: what an SGLang server log says, run by run, without a host.

Reads plain or gzip-compressed logs (detected by their magic bytes), or `-` for stdin, splits each
into server runs and prints per run: time span, decode lines, accept len and gen tok/s (mean,
p10, median, p90), which accept-rate definition the SGLang build printed, the tool's own accept
rate, warnings and failures. `--json` prints the same as one JSON document.
"""

from __future__ import annotations

import argparse
from typing import IO, TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    from eagle3_tui.sglang.scan import ByteSource
    from eagle3_tui.telemetry.runs import Dist, RunSummary


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    p = subparsers.add_parser(
        "replay",
        parents=[common],
        help="summarise SGLang server logs run by run (plain, .gz or - for stdin)",
        description=(
            "Summarise SGLang server logs: per server run, the time span, decode lines, accept len "
            "and gen tok/s (mean, p10, median, p90), the accept-rate definition the SGLang build "
            "printed, warnings and failures."
        ),
    )
    p.add_argument("logs", nargs="*", metavar="LOG", help="a log file (plain or gzip), or - for stdin")
    p.add_argument("--json", action="store_true", help="print one JSON document instead of text")
    p.add_argument("--requests", action="store_true",
                   help="also the accept length of each request the server logged finishing (it runs with "
                   "--log-requests): requests, mean, p10 / p50 / p90 over the live traffic (files only)")
    p.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=None,
        metavar="N",
        help="worker processes for big plain files (default: the idle CPUs, at most 8; 1: none)",
    )
    p.add_argument(
        "--sample",
        action="store_true",
        help="replay the bundled sample log (a baseline run and three EAGLE-3 runs, one crashing)",
    )
    p.set_defaults(func=run)


def _open(path: str) -> tuple[ByteSource, IO[bytes] | None]:
    """The byte stream to read (gunzipped when it starts with the gzip magic) and what to close."""
    import io
    import sys

    from eagle3_tui.errors import UserError

    if path == "-":
        raw: IO[bytes] = sys.stdin.buffer
        owned = None
    else:
        try:
            raw = open(path, "rb")
        except FileNotFoundError:
            raise UserError(f"{path}: no such file") from None
        except IsADirectoryError:
            raise UserError(f"{path}: is a directory, not a log file") from None
        except OSError as err:
            raise UserError(f"{path}: cannot be read ({err.strerror or err})") from None
        owned = raw
    buffered = raw if isinstance(raw, io.BufferedReader) else io.BufferedReader(cast("io.RawIOBase", raw))
    if buffered.peek(2)[:2] == b"\x1f\x8b":
        import gzip

        return gzip.GzipFile(fileobj=buffered, mode="rb"), owned
    return buffered, owned


def sample_log_path() -> str:
    """The bundled sample log (package data)."""
    from pathlib import Path

    return str(Path(__file__).resolve().parent.parent / "samples" / "sglang-eagle3.log")


def replay_path(path: str, jobs: int | None = None) -> tuple[int, list[RunSummary], str]:
    """(bytes read, runs, the scanner that read it) of one log; `UserError` when it cannot be read
    or is not a log.

    A big plain file is read by `jobs` worker processes (sglang.scan.parallel); the result is the same.
    """
    import io
    import os
    import zlib

    from eagle3_tui.errors import UserError
    from eagle3_tui.sglang.scan import scan
    from eagle3_tui.telemetry.runs import RunSplitter

    name = "stdin" if path == "-" else path
    stream, owned = _open(path)
    splitter = RunSplitter()
    try:
        if owned is not None and isinstance(stream, io.BufferedReader) and jobs != 1 and os.path.isfile(path):
            from eagle3_tui.sglang.scan.parallel import scan_path

            result = scan_path(path, splitter, jobs=jobs)  # in this process below min_parallel_bytes()
        else:
            result = scan(stream, splitter)
    except (zlib.error, EOFError) as err:
        raise UserError(f"{name}: broken gzip data ({err})") from None
    except OSError as err:
        if type(err).__name__ == "BadGzipFile":
            raise UserError(f"{name}: broken gzip data ({err})") from None
        raise UserError(f"{name}: read failed ({err.strerror or err})") from None
    finally:
        if owned is not None:
            owned.close()
    if result.bytes_read == 0:
        raise UserError(f"{name} is empty, not an SGLang server log")
    if not result.recognized:
        raise UserError(f"{name} does not look like an SGLang server log (no SGLang log line in it)")
    return result.bytes_read, splitter.finish(), result.engine


def _clock(t: float | None, day: bool = True) -> str:
    import time

    if t is None:
        return "?"
    frac = t % 1.0
    text = time.strftime("%Y-%m-%d %H:%M:%S" if day else "%H:%M:%S", time.gmtime(t))
    return text + (f".{round(frac * 1000):03d}" if frac >= 0.0005 else "")


def _duration(s: float | None) -> str:
    if s is None:
        return "?"
    s = max(s, 0.0)
    h, rem = divmod(round(s), 3600)
    m, sec = divmod(rem, 60)
    if h:
        return f"{h}h {m:02d}m {sec:02d}s"
    if m:
        return f"{m}m {sec:02d}s"
    return f"{s:.1f}s" if s < 10 else f"{sec}s"


def _dist(d: Dist | None, digits: int) -> str:
    if d is None:
        return "none printed"
    f = f"{{:.{digits}f}}"
    return (
        f"mean {f.format(d.mean)}  p10 {f.format(d.p10)}  median {f.format(d.p50)}  "
        f"p90 {f.format(d.p90)}  (min {f.format(d.lo)}, max {f.format(d.hi)}, n {d.n:,})"
    )


def format_run(r: RunSummary) -> list[str]:
    """The text block replay prints for one run."""
    started = {"server-args": "server start", "ready": "second readiness line", "log-start": "before the log"}
    head = f"run {r.index}  {_clock(r.start)} → {_clock(r.end, day=False)}  ({_duration(r.span_s)})"
    head += f"  began: {started.get(r.started_by, r.started_by)}"
    head += f", ready {_clock(r.ready_at, day=False)}" if r.ready_at is not None else ", never ready"
    out = [head]
    if r.spec is not None:
        s = r.spec
        if s.get("algorithm"):
            out.append(
                f"  speculation   {s.get('algorithm')}  steps {s.get('num_steps')}  "
                f"topk {s.get('topk')}  draft tokens {s.get('num_draft_tokens')}"
            )
        else:
            out.append("  speculation   off")
    out.append(f"  decode lines  {r.decode_lines:,}")
    out.append(f"  accept len    {_dist(r.accept_len, 2)}")
    out.append(f"  gen tok/s     {_dist(r.gen_tps, 1)}")
    if r.rate_guess is not None:
        out.append(f"  SGLang rate   {r.rate_guess.description} ({r.rate_guess.fitting}/{r.rate_guess.samples} lines fit)")
    elif r.accept_len is not None:
        out.append("  SGLang rate   not printed by this SGLang build")
    if r.accept_rate_tool is not None:
        out.append(
            f"  tool rate     {r.accept_rate_tool:.3f} = (accept len - 1) / num_steps, "
            f"num_steps {r.num_steps} ({r.num_steps_source})"
        )
    for message, count in r.warnings:
        out.append(f"  warning       {count}× {message}")
    if r.failures_total > len(r.failures):
        out.append(f"  failures      {r.failures_total} (the last {len(r.failures)} shown)")
    for f in r.failures:
        out.append(f"  failure       {_clock(f.timestamp, day=False)} {f.kind}: {f.last_line}")
    return out


def _to_json(r: RunSummary) -> dict[str, object]:
    d = r.to_dict()
    d["start_clock"] = _clock(r.start) if r.start is not None else None
    d["end_clock"] = _clock(r.end) if r.end is not None else None
    return d


def logged_requests_of(path: str) -> list[float]:
    """Each request's accept length from a log's `--log-requests` finish lines (a second read of the file)."""
    from eagle3_tui.errors import UserError
    from eagle3_tui.sglang.requests import logged_requests

    if path == "-":
        raise UserError("--requests reads the log a second time: give a file, not stdin")
    stream, owned = _open(path)
    try:
        return logged_requests(cast(Any, stream))
    finally:
        if owned is not None:
            owned.close()


def _requests_json(accepts: list[float]) -> dict[str, object]:
    from eagle3_tui.sglang.requests import accept_by_set

    return accept_by_set([("live", v) for v in accepts])[0].to_dict() if accepts else {"requests": 0}


def format_requests(accepts: list[float]) -> str:
    from eagle3_tui.sglang.requests import accept_by_set

    if not accepts:
        return ("  per request: no finished request with spec fields in the log (the server runs without "
                "--log-requests, or without speculation)")
    (s,) = accept_by_set([("live", v) for v in accepts])
    return (f"  per request: {s.requests} finished, accept length mean {s.mean:.2f}, p10 / p50 / p90 "
            f"{s.p10:.2f} / {s.p50:.2f} / {s.p90:.2f} (--log-requests)")


def run(args: argparse.Namespace) -> int:
    import json
    import sys

    from eagle3_tui.errors import UserError

    paths = list(args.logs) + ([sample_log_path()] if args.sample else [])
    if not paths:
        raise UserError("replay needs a LOG file, - for stdin, or --sample")
    docs: list[tuple[str, int, list[RunSummary], str]] = []
    errors: list[str] = []
    requests: dict[str, list[float]] = {}
    for path in paths:
        try:
            size, runs, scanner = replay_path(path, args.jobs)
        except UserError as err:
            errors.append(str(err))
            continue
        docs.append((path, size, runs, scanner))
        if args.requests:
            try:
                requests[path] = logged_requests_of(path)
            except UserError as err:
                errors.append(str(err))
    if args.json:
        out = {
            "logs": [
                {"path": p, "bytes": n, "scanner": sc, "runs": [_to_json(r) for r in rs],
                 **({"requests": _requests_json(requests[p])} if p in requests else {})} for p, n, rs, sc in docs
            ],
            "errors": errors,
        }
        if docs or not errors:
            json.dump(out, sys.stdout, indent=1)
            sys.stdout.write("\n")
    else:
        for i, (path, size, runs, scanner) in enumerate(docs):
            if i:
                print()
            name = "stdin" if path == "-" else path
            slow = "; regex scanner: the compiled one is not built here" if scanner != "native" else ""
            print(f"{name}  ({size:,} bytes, {len(runs)} run{'s' if len(runs) != 1 else ''}{slow})")
            for r in runs:
                print("\n".join(format_run(r)))
            if path in requests:
                print(format_requests(requests[path]))
    for message in errors:
        print(f"eagle3-tui: {message}", file=sys.stderr)
    return 2 if errors else 0
