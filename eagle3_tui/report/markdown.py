"""The report as GitHub-flavoured Markdown: one section per part, tables, and relative links to the PNGs
beside it, so it reads the same pasted into an issue (with the images attached) as opened from its folder.

Pure: data and the charts' file names in, text out. A part with nothing to show says why in one sentence
and what would fill it; no section is ever empty.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eagle3_tui.doctor.findings import Finding
    from eagle3_tui.report.data import CheckPart, ReportData
    from eagle3_tui.telemetry.changes import ChangeEffect

TITLE = "# eagle3-tui report"
"""The first line's start: how a folder holding an earlier report is recognised (write.py)."""

SECTIONS = ("Server", "Live: accept length and tok/s", "Per-position acceptance",
            "Applied changes: before and after", "Accuracy check: wirings side by side", "Findings", "Ledger")

_ICON = {"error": "✖ error", "warning": "▲ warning", "info": "● info"}


def esc(text: object) -> str:
    """A table cell: pipes escaped, one line."""
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def table(head: Sequence[str], rows: Sequence[Sequence[object]], right: Sequence[int] = ()) -> str:
    align = ["---:" if i in right else "---" for i in range(len(head))]
    lines = ["| " + " | ".join(esc(h) for h in head) + " |", "|" + "|".join(align) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def num(value: float | None, digits: int = 2, suffix: str = "") -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    return f"{value:.{digits}f}{suffix}"


def _plural(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _utc(t: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(t))


def render(data: ReportData, charts: Mapping[str, str]) -> str:
    """The whole report. `charts`: chart name ("over_time", "positions", "changes") -> path relative to the
    report's file, for those drawn."""
    h = data.header
    parts = [
        f"{TITLE}: {h.host}",
        f"Generated {_utc(h.generated_at)} by eagle3-tui {h.tool_version} (`eagle3-tui report`, or `r` in the "
        "console). Charts are the PNG files linked below, in `charts/` beside this file; attach them with it.",
        _server(data),
        _live(data, charts.get("over_time")),
        _positions(data, charts.get("positions")),
        _changes(data.changes, charts.get("changes"), h.host),
        _check(data.check),
        _findings(data.findings),
        _ledger(data),
    ]
    if data.problems:
        parts.append("## Not read\n\n" + "\n".join(f"- {p}" for p in data.problems))
    return "\n\n".join(parts) + "\n"


def _server(data: ReportData) -> str:
    h = data.header
    engine = " ".join(x for x in (h.engine, h.release) if x) or "unknown"
    rows: list[tuple[str, str]] = [("host", h.host), ("engine", engine), ("server", h.state),
                                   ("deployment", h.deployment or "–"), ("flags", h.flags),
                                   ("wiring (layer ids → boundaries)", h.wiring), ("preset", h.preset or "–")]
    text = f"## {SECTIONS[0]}\n\n" + table(("", ""), rows)
    if h.launch:
        text += f"\n\nLaunch command (secrets redacted):\n\n```sh\n{h.launch}\n```"
    else:
        text += "\n\nNo launch command known: no server was found and the profile names none."
    return text


def _live(data: ReportData, chart: str | None) -> str:
    lv = data.live
    head = f"## {SECTIONS[1]}\n\n"
    if lv.accept_len is None and lv.gen_tps is None:
        numbers = (f"No live numbers: no decode line in the last {lv.window_s:.0f} s of data "
                   f"({lv.decode_lines} since attaching).")
    else:
        numbers = (f"Means over the last {lv.window_s:.0f} s of data, as the console's status bar shows them "
                   f"({lv.decode_lines} decode lines since attaching):\n\n")
        rows = [("accept length", num(lv.accept_len)),
                ("check predicts", _predicted_cell(lv.predicted, data.over_time.predicted_label)),
                ("generation tok/s", num(lv.gen_tps, 1)),
                ("baseline tok/s (no speculation)", num(lv.baseline_tps, 1) if lv.baseline_tps else "– (none measured)"),
                ("speedup", num(lv.speedup, 2, "x"))]
        numbers += table(("", ""), rows, right=(1,))
    ot = data.over_time
    if chart is None:
        charted = ("No chart: the server has logged no accept length or tok/s since the console attached "
                   "(a server without traffic logs no decode line; `b` benchmarks).")
    else:
        restarts = sum(1 for m in ot.markers if m.restart)
        charted = (f"![accept length and tok/s over time]({chart})\n\n"
                   f"{len(ot.accept)} accept-length and {len(ot.tps)} tok/s points, one per decode line the server "
                   "logged.")
        if restarts:
            charted += (f" Red dashed lines: {_plural(restarts, 'restart or change', 'restarts and changes')}, "
                        "labelled with their reason.")
        if ot.note:
            charted += f" {ot.note}"
    return head + numbers + "\n\n" + charted


def _predicted_cell(value: float | None, label: str) -> str:
    """The prediction with what it is for, as the accept chart's label says it ("1.73 (chain of 1)")."""
    if value is None:
        return "– (no check)"
    prefix = "check predicts "
    return label[len(prefix):] if label.startswith(prefix) else num(value)


def _positions(data: ReportData, chart: str | None) -> str:
    head = f"## {SECTIONS[2]}\n\n"
    if not data.positions:
        return head + f"No per-position acceptance: {data.positions_note or 'no source reported it'}."
    n = max(len(s.rates) for s in data.positions)
    rows = [[str(i + 1), *(num(s.rates[i]) if i < len(s.rates) else "–" for s in data.positions)] for i in range(n)]
    text = head + "Acceptance rate per draft position: the share of drafts accepted at that position.\n\n"
    text += table(("position", *(s.label for s in data.positions)), rows, right=range(1, len(data.positions) + 1))
    if chart is not None:
        text += f"\n\n![per-position acceptance]({chart})"
    if data.positions_note:
        text += f"\n\nNot shown: {data.positions_note}."
    return text


def _changes(changes: Sequence[ChangeEffect], chart: str | None, host: str) -> str:
    head = f"## {SECTIONS[3]}\n\n"
    if not changes:
        return head + (f"No change applied: the ledger of {host} has no preset or rollback row "
                       "(`3`, `p`, `enter` in the console, or `eagle3-tui apply PRESET`).")

    def side(row: object, attr: str, digits: int) -> str:
        return "not measured" if row is None else num(getattr(row, attr), digits)

    rows = []
    for c in changes:
        rows.append([c.label, _utc(c.change.ts),
                     f"#{c.before.id}" if c.before is not None else "–",
                     side(c.before, "accept_len", 2), side(c.after, "accept_len", 2),
                     side(c.before, "tok_s", 1), side(c.after, "tok_s", 1),
                     f"#{c.after.id}" if c.after is not None else "–"])
    text = head + ("Each preset applied or rolled back, with the newest benchmark before it and the first after it "
                   "(none across another change).\n\n")
    text += table(("change", "when", "before: row", "accept before", "accept after", "tok/s before", "tok/s after",
                   "after: row"), rows, right=(3, 4, 5, 6))
    if chart is not None:
        text += f"\n\n![before and after each change]({chart})"
    if any(c.before is None or c.after is None for c in changes):
        text += "\n\nA side \"not measured\" had no benchmark between the changes around it (`b` benchmarks)."
    return text


_CHECK_ROWS = (("boundaries", "boundaries"), ("top-1", "top1"), ("top-5", "top5"), ("step accept", "step_accept"),
               ("predicted accept len", "predicted_accept_len"), ("tokens/s", "tokens_per_s"), ("positions", "positions"))


def _check_cell(w: object, attr: str) -> str:
    from eagle3_tui.eagle.wiring import format_boundaries

    value = getattr(w, attr, None)
    if attr == "boundaries":
        return format_boundaries(value)
    if value is None:
        return "–"
    if attr in ("top1", "top5"):
        return f"{100 * value:.1f}%"
    if attr == "step_accept":
        return " ".join(f"{100 * a:.0f}%" for a in value) or "–"
    if attr == "tokens_per_s":
        return f"{value:,.0f}"
    return num(value) if isinstance(value, float) else str(value)


def _check(part: CheckPart | None) -> str:
    head = f"## {SECTIONS[4]}\n\n"
    if part is None:
        return head + ("No accuracy check ran: `c` in the console, or `eagle3-tui check --draft DIR --data GLOB`, "
                       "feeds the draft its own training data under each wiring.")
    r = part.report
    served = r.served_wiring(part.served)
    text = head + (f"From {part.source}: draft `{r.draft_dir}`, data `{r.data}` ({r.positions} positions, "
                   f"{r.split} split, {_plural(r.steps, 'chain step', 'chain steps')}), numbers as {r.served_by or 'SGLang'} serves the draft.\n\n")
    cols = [w.name + (" (served)" if w is served else "") for w in r.wirings]
    rows = [[label, *(_check_cell(w, attr) for w in r.wirings)] for label, attr in _CHECK_ROWS]
    text += table(("", *cols), rows, right=range(1, len(cols) + 1))
    best = r.best()
    if best is not None:
        from eagle3_tui.eagle.wiring import format_boundaries

        text += (f"\n\nBest: {best.name} ({format_boundaries(best.boundaries)}), top-1 {_check_cell(best, 'top1')}, "
                 f"predicted accept length {num(best.predicted_accept_len)}.")
    notes = [f"{w.name}: {w.note}" for w in r.wirings if w.note] + list(r.notes)
    if notes:
        text += "\n\n" + "\n".join(f"- {n}" for n in notes)
    return text


def _findings(findings: Sequence[Finding]) -> str:
    head = f"## {SECTIONS[5]}\n\n"
    if not findings:
        return head + "No findings: nothing the doctor knows of is wrong."
    blocks = []
    for f in findings:
        lines = [f"### {_ICON.get(f.severity, f.severity)} `{f.rule_id}`: {f.title}"]
        lines += [f"- **{e.source}**: {e.detail}" for e in f.evidence]
        if f.fix:
            lines.append(f"\n**Fix:** {f.fix}")
        blocks.append("\n".join(lines))
    return head + "\n\n".join(blocks)


def _ledger(data: ReportData) -> str:
    from eagle3_tui.telemetry.ledger import to_markdown

    head = f"## {SECTIONS[6]}\n\n"
    if not data.ledger:
        return head + f"No runs recorded for {data.header.host} yet."
    return head + "Every restart, preset, benchmark and check on this host (speedup: over the newest baseline before it).\n\n" \
        + to_markdown(data.ledger).rstrip()
