"""A report's data from an attached session, read once on the session's thread (its telemetry rings are
not shared with other threads). Every number is the one the console shows, from the same function: the
status bar's means (`Telemetry.summary` over `STATUS_WINDOW_S`), the check's prediction
(`ServerView.predicted`), the ledger's speedups and renderings (telemetry/ledger.py), the before/after
rule (`telemetry.changes.change_effects`) and the doctor's findings as the Findings pane lists them.
"""

from __future__ import annotations

import math
import shlex
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from eagle3_tui import __version__
from eagle3_tui.errors import UserError
from eagle3_tui.report.data import (
    CheckPart,
    Header,
    Live,
    Marker,
    OverTime,
    PositionSeries,
    ReportData,
)
from eagle3_tui.telemetry import STATUS_WINDOW_S

if TYPE_CHECKING:
    from eagle3_tui.eagle.accuracy import CheckReport
    from eagle3_tui.session import ServerView, Session
    from eagle3_tui.telemetry.ledger import LedgerRow
    from eagle3_tui.telemetry.metrics import Telemetry

# Markers the console draws that are not restarts (a benchmark's end): drawn fainter, never called restarts.
_NOT_RESTART = ("benchmark", "baseline")
# A restart's ledger row is written when the server is ready; the console marked its launch earlier.
_SAME_RESTART_S = 600.0
_SAME_CHANGE_S = 120.0


def gather(session: Session, *, now: float | None = None, series_note: str = "") -> ReportData:
    """What the report shows for `session` now. What cannot be read (the ledger) is a problem in the report."""
    from eagle3_tui.telemetry.changes import change_effects

    now = time.time() if now is None else now
    server = session.server
    problems: list[str] = []
    try:
        rows = list(session.records.rows())
    except UserError as err:
        rows = []
        problems.append(f"the ledger could not be read: {err}")
    check = check_part(session.check, rows, server)
    predicted = server.predicted(check.report) if check is not None else None
    tele = session.telemetry
    summary = tele.summary(STATUS_WINDOW_S)
    live = Live(window_s=STATUS_WINDOW_S, accept_len=summary.accept_len, gen_tps=summary.gen_tps,
                baseline_tps=tele.baseline_tps, speedup=summary.speedup, predicted=predicted,
                decode_lines=summary.decode_lines)
    positions, note = position_series(tele, server.engine, rows, check)
    return ReportData(
        header=header(session, now),
        live=live,
        over_time=over_time(tele, rows, server, check, note=series_note),
        positions=positions,
        positions_note=note,
        changes=change_effects(rows),
        ledger=rows,
        check=check,
        findings=list(session.findings),
        problems=problems,
    )


def header(session: Session, now: float) -> Header:
    from eagle3_tui.eagle.wiring import format_boundaries
    from eagle3_tui.session import redact_argv

    s = session.server
    prof = session.profile
    wiring = f"ids {list(s.layer_ids) if s.layer_ids is not None else 'unset'} → {format_boundaries(s.boundaries)}"
    if s.decode_boundaries is not None and s.decode_boundaries != s.boundaries:
        wiring += f" (decode: {format_boundaries(s.decode_boundaries)})"
    return Header(
        host=str(prof.name or prof.address or "?"), generated_at=now, tool_version=__version__,
        engine=s.engine, release=s.version, deployment=s.deployment or ("plain process" if s.pid else None),
        state=s.state, flags=flags_text(s), wiring=wiring, preset=s.active_preset,
        launch=shlex.join(redact_argv(s.argv)) if s.argv else None,
    )


def flags_text(s: ServerView) -> str:
    """The status bar's flags, as plain text: what the server runs, the draft tokens asked beside when they differ."""
    if not s.speculative:
        return "speculation off"
    if s.engine == "vllm":
        return f"num_speculative_tokens {s.steps if s.steps is not None else '?'}"
    text = " ".join(f"{label} {'?' if v is None else v}" for label, v in
                    (("steps", s.steps), ("topk", s.topk), ("draft tokens", s.draft_tokens)))
    asked = s.requested_draft_tokens
    if asked is not None and s.draft_tokens is not None and asked != s.draft_tokens:
        text += f" (asked {asked})"
    return text


def check_part(current: CheckReport | None, rows: Sequence[LedgerRow], server: ServerView) -> CheckPart | None:
    """This session's check, else the newest one the ledger stores (a check row holds the whole report)."""
    from eagle3_tui.eagle.accuracy import CheckReport

    served = server.fed_boundaries()
    if current is not None:
        return CheckPart(current, "this session's check", served)
    for row in reversed(rows):
        if row.kind != "check" or not isinstance(row.results.get("wirings"), list):
            continue
        try:
            report = CheckReport.from_dict(row.results)
        except (TypeError, ValueError, KeyError, AttributeError):
            continue
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(row.ts))
        return CheckPart(report, f"the newest check in the ledger (row {row.id}, {when})", served)
    return None


def over_time(tele: Telemetry, rows: Sequence[LedgerRow], server: ServerView, check: CheckPart | None,
              *, note: str = "") -> OverTime:
    """The live rings' points, the console's markers, and the ledger's restarts inside the points' span
    (a report made by a command that just attached has no markers of its own)."""
    accept = tuple(tele.series["accept_len"])
    tps = tuple(tele.series["gen_tps"])
    times = [t for t, _ in accept] + [t for t, _ in tps]
    markers: list[Marker] = []
    cuts = [m.t for m in tele.markers if m.label not in _NOT_RESTART]
    for m in sorted(tele.markers, key=lambda m: m.t):
        # a change marks its write and then its server's launch, seconds apart: one line, at the change
        if not any(k.label == m.label and 0 <= m.t - k.t <= _SAME_CHANGE_S for k in markers):
            markers.append(Marker(m.t, m.label, m.label not in _NOT_RESTART))
    if times:
        lo, hi = min(times), max(times)
        for r in rows:
            if r.kind != "restart" or not lo <= r.ts <= hi:
                continue
            label = r.note or "restart"
            cuts.append(r.ts)
            if not any(m.label == label and 0 <= r.ts - m.t <= _SAME_RESTART_S for m in markers):
                markers.append(Marker(r.ts, label, True))
    label = (server.predicted_label(check.report) if check is not None else None) or ""
    return OverTime(accept=accept, tps=tps, markers=tuple(sorted(markers, key=lambda m: m.t)), cuts=tuple(sorted(cuts)),
                    baseline_tps=tele.baseline_tps, predicted=server.predicted(check.report) if check else None,
                    predicted_label=label, note=note)


def position_series(tele: Telemetry, engine: str | None, rows: Sequence[LedgerRow],
                    check: CheckPart | None) -> tuple[list[PositionSeries], str]:
    """Per-position acceptance from each source that has it (the engine's live report, the newest
    benchmark's requests, the check's chain on the served wiring) and a sentence on what is missing."""
    from eagle3_tui.eagle.predict import chain_positions

    out: list[PositionSeries] = []
    missing: list[str] = []
    if tele.positions_reported:
        rates = tuple(math.nan if r is None else r for r in tele.last_positions())
        out.append(PositionSeries(f"{engine or 'the engine'}, live (newest)", rates))
    elif engine in (None, "sglang"):
        missing.append("SGLang does not report it live (vLLM does)")
    else:
        missing.append("none reported live yet")
    bench = next((r for r in reversed(rows) if r.kind in ("benchmark", "sweep") and not r.is_baseline
                  and _rates(r.results.get("per_position"))), None)
    if bench is not None:
        out.append(PositionSeries(f"benchmark #{bench.id}, the requests'", _rates(bench.results["per_position"])))
    else:
        missing.append("no benchmark recorded it")
    wiring = check.report.served_wiring(check.served) if check is not None else None
    if wiring is not None and wiring.step_accept:
        out.append(PositionSeries(f"check predicts ({wiring.name})", tuple(chain_positions(wiring.step_accept))))
    elif check is None:
        missing.append("no accuracy check ran")
    else:
        missing.append("the check measured no wiring fed the boundaries served")
    return out, "; ".join(missing)


def _rates(value: object) -> tuple[float, ...]:
    if not isinstance(value, list) or not value:
        return ()
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
        return ()
    return tuple(float(v) for v in value)
