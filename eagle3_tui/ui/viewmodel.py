"""The console's view model: what each widget shows, computed from a snapshot of the session.

Pure functions over plain data (no Textual, no I/O), so they are unit-tested without a Pilot
(tests/ui/test_viewmodel.py). Widgets take the results through their reactives; the screen decides
when to recompute them. The rules that have one home elsewhere are called, never re-written here:
the predicted accept length (`eagle.accuracy.predicted_accept_len`) and the boundary format
(`eagle.wiring.format_boundaries`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from textual.markup import escape

from eagle3_tui.eagle.spec_config import SpecConfig
from eagle3_tui.eagle.wiring import format_boundaries
from eagle3_tui.telemetry import STATUS_WINDOW_S
from eagle3_tui.ui.format import accept_level, fmt_duration, fmt_ids, fmt_num

if TYPE_CHECKING:
    from eagle3_tui.doctor.findings import Finding
    from eagle3_tui.eagle.accuracy import CheckReport
    from eagle3_tui.session import ConnView, ServerView, Session
    from eagle3_tui.telemetry.metrics import MetricsSummary, Telemetry
    from eagle3_tui.telemetry.series import Bucket

# Session time window the live numbers in the status bar average over (the report's too).
SUMMARY_WINDOW_S = STATUS_WINDOW_S


@dataclass(frozen=True)
class Snapshot:
    """The session's state at one instant, as the view model reads it. The views are frozen; the
    telemetry rings are the session's own (read, never written)."""

    host: str
    conn: ConnView
    server: ServerView
    telemetry: Telemetry
    findings: tuple[Finding, ...] = ()
    check: CheckReport | None = None
    readonly: bool = False


def snapshot_of(session: Session) -> Snapshot:
    profile = session.profile
    return Snapshot(
        host=str(profile.name or profile.address or "?"),
        conn=session.conn,
        server=session.server,
        telemetry=session.telemetry,
        findings=tuple(session.findings or ()),
        check=session.check,
        readonly=bool(session.readonly),
    )


def served_config(server: ServerView) -> SpecConfig | None:
    """The (steps, topk, draft tokens) the server runs (`ServerView.spec_config`)."""
    return server.spec_config()


def fed_boundaries(server: ServerView) -> tuple[int, ...] | None:
    """The boundaries that decide the accept length (`ServerView.fed_boundaries`)."""
    return server.fed_boundaries()


def predicted(snap: Snapshot) -> float | None:
    """The check's predicted accept length for the boundaries and the flags served now (`ServerView.predicted`,
    over eagle.accuracy's one rule): the status bar's "check" number and the accept chart's reference line both."""
    return snap.server.predicted(snap.check)


def predicted_for_flags(snap: Snapshot) -> bool:
    """Whether the check predicted the served flags themselves (else its number is the chain of the
    check's own steps, and the chart says so)."""
    cfg = served_config(snap.server)
    return cfg is not None and snap.check is not None and \
        snap.check.prediction(cfg, fed_boundaries(snap.server)) is not None


# ---------------------------------------------------------------- status bar

_CONN_STYLE = {
    "connected": "$success",
    "local": "$success",
    "connecting": "$warning",
    "reconnecting": "$warning",
    "failed": "$error",
}
_SERVER_STYLE = {
    "ready": "$success",
    "starting": "$warning",
    "unknown": "$foreground-muted",
    "stopped": "$foreground-muted",
    "failed": "$error",
}
_LEVEL_VAR = {"good": "$accept-good", "warn": "$accept-warn", "bad": "$accept-bad"}


@dataclass(frozen=True)
class StatusParts:
    """The status bar's two lines, each a sequence of markup segments."""

    top: tuple[str, ...]
    bottom: tuple[str, ...]

    def markup(self) -> str:
        return " │ ".join(self.top) + "\n" + " │ ".join(self.bottom)


def conn_text(conn: ConnView) -> str:
    style = _CONN_STYLE.get(conn.kind, "$foreground")
    if conn.kind == "reconnecting":
        label = f"reconnecting {conn.attempt}, next try in {fmt_duration(conn.next_try_s)}"
    elif conn.kind == "failed":
        label = f"failed: {conn.reason or 'unknown reason'}"
    else:
        label = conn.kind
    return f"[{style}]● {escape(label)}[/]"


def server_text(server: ServerView, now: float) -> str:
    text = f"server [{_SERVER_STYLE.get(server.state, '$foreground')}]{escape(server.state)}[/]"
    if server.pid:
        text += f" pid {server.pid}"
    if server.state == "ready" and server.started_at:
        text += f" up {fmt_duration(now - server.started_at)}"
    if server.deployment:
        text += f" · {escape(server.deployment)}"
    return text


def flags_text(server: ServerView) -> str:
    if not server.speculative:
        return "speculation off"
    if server.engine == "vllm":  # its own word for the chain's length
        return f"num_speculative_tokens {fmt_num(server.steps)}"
    draft_txt = fmt_num(server.draft_tokens)
    asked = server.requested_draft_tokens
    if asked is not None and server.draft_tokens is not None and asked != server.draft_tokens:
        draft_txt = f"[$accept-warn]{server.draft_tokens} (asked {asked})[/]"
    return f"steps {fmt_num(server.steps)} topk {fmt_num(server.topk)} draft tokens {draft_txt}"


def wiring_text(server: ServerView) -> str:
    text = f"ids {escape(fmt_ids(server.layer_ids))} → {escape(format_boundaries(server.boundaries))}"
    if server.decode_boundaries is not None and server.decode_boundaries != server.boundaries:
        text += f" [$accept-warn](decode: {escape(format_boundaries(server.decode_boundaries))})[/]"
    return text


def accept_text(summary: MetricsSummary, server: ServerView, expected: float | None) -> str:
    acc = summary.accept_len
    max_len = server.steps + 1 if server.steps is not None else None
    var = _LEVEL_VAR.get(accept_level(acc, expected, max_len), "$foreground")
    text = f"accept [{var}]{fmt_num(acc)}[/]"
    if expected:
        text += f" (check {fmt_num(expected)})"
    return text


def tps_text(summary: MetricsSummary, baseline: float | None) -> str:
    text = f"{fmt_num(summary.gen_tps, 1)} tok/s"
    if baseline:
        text += f" (base {fmt_num(baseline, 1)})"
    return text


def charts_text(server: ServerView) -> str | None:
    """Where the live numbers come from when no log file is followed (None: from the log), with what
    went wrong reading /metrics and the restart into a log file that is offered."""
    if server.charts_from is None:
        return None
    text = f"charts from {server.charts_from} (no log file: {server.deployment or 'the output is not a file'})"
    if server.charts_note:
        text += f"; {server.charts_note}"
    if server.charts_offer_log:
        text += "; R restarts it into a log file"
    return text


def findings_text(findings: Sequence[Finding]) -> str | None:
    if not findings:
        return None
    errors = sum(1 for f in findings if f.severity == "error")
    warns = sum(1 for f in findings if f.severity == "warning")
    infos = len(findings) - errors - warns
    bits = []
    if errors:
        bits.append(f"[$accept-bad]{errors}✖[/]")
    if warns:
        bits.append(f"[$accept-warn]{warns}▲[/]")
    if infos:
        bits.append(f"{infos}●")
    return "findings " + " ".join(bits)


def _summary(telemetry: Telemetry) -> MetricsSummary | None:
    try:
        return telemetry.summary(SUMMARY_WINDOW_S)
    except (ValueError, ZeroDivisionError):  # a summary that cannot be computed yet is not worth a crash
        return None


def status_parts(snap: Snapshot, *, now: float, restart_note: str = "") -> StatusParts:
    """Line 1: host, connection, server, effective flags, restart, read-only.
    Line 2: ids → boundaries, preset, live accept length against the check, tok/s, findings, and where
    the numbers come from when no log file is followed."""
    server = snap.server
    top = [f"[b]{escape(snap.host)}[/b] {conn_text(snap.conn)}", server_text(server, now), flags_text(server)]
    if restart_note:
        top.append(f"[$warning]{escape(restart_note)}[/]")
    if snap.readonly:
        top.append("[reverse $warning] READONLY [/]")
    bottom = [wiring_text(server), f"preset {escape(server.active_preset or '–')}"]
    summary = _summary(snap.telemetry)
    if summary is not None:
        bottom.append(accept_text(summary, server, predicted(snap)))
        bottom.append(tps_text(summary, snap.telemetry.baseline_tps))
    found = findings_text(snap.findings)
    if found is not None:
        bottom.append(found)
    charts = charts_text(server)
    if charts is not None:
        bottom.append(f"[{'$warning' if server.charts_note else '$foreground-muted'}]{escape(charts)}[/]")
    return StatusParts(tuple(top), tuple(bottom))


def restart_note(phase: str, message: str, elapsed_s: float) -> str:
    """What the status bar and the config pane say while a restart runs; empty once it ended."""
    if phase in ("ready", "failed", "done"):
        return ""
    return f"restart: {phase} {message} ({elapsed_s:.0f}s)"


# ---------------------------------------------------------------- charts and strips


@dataclass(slots=True)
class ChartData:
    """What one chart draws: x (seconds relative to the newest point), y, reference lines, markers."""

    xs: list[float] = field(default_factory=list)
    ys: list[float] = field(default_factory=list)
    references: list[tuple[float, str]] = field(default_factory=list)
    markers: list[tuple[float, str]] = field(default_factory=list)
    window_s: float = 300.0
    raw: tuple[list[tuple[float, float]], int, float] | None = None
    """The ring's window (points, bucket count, t_end) still to be cut into `xs`, `ys`
    (`series(defer=True)`); None once `resolve` has run, or when there was nothing to copy."""

    def resolve(self) -> ChartData:
        """Cut `raw` into the buckets `xs`, `ys` (any thread: it reads only the copy) and return self."""
        if self.raw is not None:
            pts, points, t_end = self.raw
            self.raw = None
            from eagle3_tui.telemetry.series import buckets

            self._fill(buckets(pts, points, t_end - self.window_s, t_end), t_end)
        return self

    def _fill(self, bs: list[Bucket], t_end: float) -> None:
        for b in bs:
            self.xs.append(b.t - t_end)
            self.ys.append(b.mean)

    def runs(self) -> list[tuple[list[float], list[float]]]:
        """The points cut where nothing was reported for a while (an idle server, a restart): a line drawn
        across such a gap would show values nobody measured (`telemetry.series.gap_s`, the report's rule too)."""
        from eagle3_tui.telemetry.series import gap_s, split_runs

        return [(self.xs[i:j], self.ys[i:j]) for i, j in split_runs(self.xs, gap_s(self.window_s))]


def series(
    telemetry: Telemetry, name: str, *, t_end: float, window_s: float, points: int, defer: bool = False
) -> ChartData:
    """Mean of each time bucket of one ring over the window ending at `t_end`, with the markers.

    `defer`: take the window's points only (a bisection and a copy, on the thread that owns the rings)
    and leave the bucketing, a Python loop over them, to `ChartData.resolve` on another thread."""
    data = ChartData(window_s=window_s)
    ring = telemetry.series.get(name)
    if ring is not None and len(ring):
        if defer:
            data.raw = (ring.window(t_end - window_s, t_end), points, t_end)
        else:
            data._fill(ring.downsample(points, t_end - window_s, t_end), t_end)
    data.markers.extend((m.t - t_end, m.label) for m in list(telemetry.markers))
    return data


def accept_series(snap: Snapshot, *, t_end: float, window_s: float, points: int, defer: bool = False) -> ChartData:
    """Accept length, with the check's prediction for the served boundaries as a reference line."""
    data = series(snap.telemetry, "accept_len", t_end=t_end, window_s=window_s, points=points, defer=defer)
    expected = predicted(snap)
    label = snap.server.predicted_label(snap.check)
    if expected and label:
        data.references.append((float(expected), label))
    return data


def tps_series(snap: Snapshot, *, t_end: float, window_s: float, points: int, defer: bool = False) -> ChartData:
    """Generation tok/s, with the no-speculation baseline as a reference line."""
    data = series(snap.telemetry, "gen_tps", t_end=t_end, window_s=window_s, points=points, defer=defer)
    base = snap.telemetry.baseline_tps
    if base:
        data.references.append((float(base), f"baseline {base:.1f}"))
    return data


@dataclass(frozen=True)
class StripView:
    """One sparkline strip: the bucket maxima over the window and the newest value as text."""

    values: tuple[float, ...] = ()
    last: str = "–"


# (strip id, ring name, how the newest value is written)
STRIPS: tuple[tuple[str, str, Callable[[float], str]], ...] = (
    ("strip-running", "running_req", lambda v: f"{v:.0f}"),
    ("strip-usage", "token_usage", lambda v: f"{v:.2f}"),
)


def strip_view(
    telemetry: Telemetry, name: str, fmt: Callable[[float], str], *, t_end: float, window_s: float, width: int
) -> StripView:
    ring = telemetry.series.get(name)
    if ring is None or not len(ring):
        return StripView()
    buckets = ring.downsample(max(width, 20), t_end - window_s, t_end)
    last = ring.last()
    return StripView(tuple(b.hi for b in buckets), fmt(last[1]) if last is not None else "–")


WINDOWS: tuple[float, ...] = (60.0, 300.0, 900.0, 3600.0, 6 * 3600.0)


def step_window(current: float, step: int) -> float:
    """The next wider (step > 0) or narrower chart window; an unknown window counts as 5 minutes."""
    try:
        i = WINDOWS.index(current)
    except ValueError:
        i = 1
    return WINDOWS[max(0, min(len(WINDOWS) - 1, i + step))]


POSITIONS_NOT_REPORTED = "per-position acceptance: SGLang does not report it (vLLM does)"


def requests_line(telemetry: Telemetry) -> str:
    """Per-request accept length over the requests the server logged as they finished, else why there is none."""
    r = telemetry.request_summary()
    if r is None:
        return POSITIONS_NOT_REPORTED + "; a server run with --log-requests shows each request's"
    shown = f"last {r.requests:,} of {telemetry.requests_seen:,}" if telemetry.requests_seen > r.requests else f"{r.requests:,}"
    noun = "request" if telemetry.requests_seen == 1 else "requests"
    return (f"per-request accept length ({shown} {noun} the server logged): mean {r.mean:.2f} · "
            f"p10 {r.p10:.2f} · p50 {r.p50:.2f} · p90 {r.p90:.2f}")


def positions_line(telemetry: Telemetry, engine: str | None, width: int = 8) -> str:
    """The per-position acceptance pane: each draft position's newest rate as a bar (vLLM's SpecDecoding
    line), or, on SGLang, which reports one mean per step and no rate per position, the accept length of each
    request the server logged (`--log-requests`) on the traffic it really serves."""
    if not telemetry.positions_reported:
        if engine in (None, "sglang"):
            return requests_line(telemetry)
        return "per-position acceptance: none reported yet"
    cells = []
    for i, rate in enumerate(telemetry.last_positions(), 1):
        if rate is None:
            cells.append(f"{i} -")
            continue
        full = round(rate * width)
        cells.append(f"{i} {'█' * full}{'·' * (width - full)} {rate:.2f}")
    return "per-position acceptance  " + "  ".join(cells)


def window_label(window_s: float) -> str:
    text = f"{window_s / 3600:.0f} h" if window_s >= 3600 else f"{window_s / 60:.0f} min"
    return f"window {text} (-/+)"


# ---------------------------------------------------------------- predictions grid


@dataclass(frozen=True)
class PredictionRow:
    """One row of the Accuracy pane's predictions table."""

    wiring: str
    boundaries: str
    config: SpecConfig
    accept_len: float | None
    served_wiring: bool = False
    """The row's wiring feeds the boundaries served now."""
    served_flags: bool = False
    """The row is for the served wiring and the served (steps, topk, draft tokens)."""


def prediction_rows(
    report: CheckReport | None, served: Sequence[int] | None, served_cfg: SpecConfig | None
) -> list[PredictionRow]:
    """The check's `predictions` (the best wiring's grid and the served one's when it differs) as
    table rows, grouped by wiring in the report's order, with the served configuration marked."""
    if report is None:
        return []
    want = tuple(served) if served is not None else None
    out: list[PredictionRow] = []
    for p in report.prediction_list():
        on_served = want is not None and p.boundaries == want
        out.append(PredictionRow(
            wiring=p.wiring,
            boundaries=format_boundaries(p.boundaries) if p.boundaries is not None else "?",
            config=p.config,
            accept_len=p.accept_len,
            served_wiring=on_served,
            served_flags=on_served and p.config == served_cfg,
        ))
    order = list(dict.fromkeys(r.wiring for r in out))
    return sorted(out, key=lambda r: order.index(r.wiring))  # stable: the grid's order within a wiring


def check_grid(
    server: ServerView, flag_presets: Sequence[Mapping[str, object]] = (), seen: Sequence[SpecConfig] = ()
) -> list[SpecConfig]:
    """What the console's check predicts: the session's one grid (`check_grid`, as `eagle3-tui check`)
    for the flags served now."""
    from eagle3_tui.session import check_grid as grid

    return grid(served_config(server), flag_presets, seen)


def ledger_configs(configs: Iterable[Mapping[str, object]]) -> list[SpecConfig]:
    """The (steps, topk, draft tokens) of ledger rows' config snapshots, in order, once each."""
    from eagle3_tui.session import ledger_configs as configs_of

    return configs_of(configs)


def sweep_grid(report: CheckReport | None, served: Sequence[int] | None,
               served_cfg: SpecConfig | None) -> list[SpecConfig]:
    """What the console's sweep serves: the served flags and the configurations the check predicted
    (on the served wiring when it was predicted), else the served flags and the standard grid."""
    from eagle3_tui.eagle.spec_config import STANDARD_GRID

    rows = prediction_rows(report, served, served_cfg)
    mine = [r.config for r in rows if r.served_wiring] or [r.config for r in rows]
    out: list[SpecConfig] = [served_cfg] if served_cfg is not None else []
    for cfg in mine or list(STANDARD_GRID):
        if cfg not in out:
            out.append(cfg)
    return out


# ---------------------------------------------------------------- jobs and notices


@dataclass(frozen=True)
class JobProgress:
    """A running job's progress bar and the line over it (markup); `total` None is an indeterminate bar."""

    text: str
    done: int = 0
    total: int | None = None


CHECK_STARTING = JobProgress("starting the check on the host…")


def check_progress(done: int, total: int, eta_s: float | None, wiring: str | None) -> JobProgress:
    what = f" · {escape(wiring)}" if wiring else ""
    return JobProgress(f"checking {done}/{total}{what} · ETA {fmt_duration(eta_s)} · esc cancels", done, max(total, 1))


def bench_progress(done: int, total: int, label: str) -> JobProgress:
    return JobProgress(f"{escape(label)}: {done}/{total} requests", done, max(total, 1))


def cfg_text(cfg: Sequence[int]) -> str:
    return str(SpecConfig(*cfg))


class SweepStepView(Protocol):
    """What the progress line reads from a finished sweep step (the session's `SweepStep`)."""

    @property
    def config(self) -> SpecConfig: ...
    @property
    def predicted(self) -> float | None: ...
    @property
    def accept_len(self) -> float | None: ...
    @property
    def tok_s(self) -> float | None: ...
    @property
    def error(self) -> str | None: ...


def sweep_progress(
    done: int, total: int, last: SweepStepView | None, eta_s: float | None, upcoming: SpecConfig | None,
    *, stopping: bool = False,
) -> JobProgress:
    """The sweep's line over its bar: where it is, the last step's outcome, what is served next, ETA."""
    bits = [f"sweep {done}/{total}"]
    if last is not None:
        what = cfg_text(last.config)
        if last.error:
            bits.append(f"{what} [$accept-bad]failed[/]: {escape(last.error.splitlines()[0])}")
        else:
            bits.append(f"{what} accept {fmt_num(last.accept_len)} (predicted {fmt_num(last.predicted)}),"
                        f" {fmt_num(last.tok_s, 1)} tok/s")
    if upcoming is not None:
        bits.append(f"serving {cfg_text(upcoming)}…")
    elif done >= total or stopping:
        bits.append("restoring the start…")
    if eta_s is not None and done < total and not stopping:
        bits.append(f"ETA {fmt_duration(eta_s)}")
    if not stopping and done < total:
        bits.append("esc stops after this step and restores")
    return JobProgress(" · ".join(bits), done, max(total, 1))


class SweepOutcome(Protocol):
    """What the toast reads from a sweep's result (the session's `SweepResult`)."""

    restored: bool
    stopped: bool
    restore_error: str | None

    @property
    def steps(self) -> Sequence[SweepStepView]: ...


def sweep_summary(result: SweepOutcome) -> tuple[str, bool]:
    """(toast text, whether it is bad news): how many configurations ran, and whether the start is back."""
    ran = len(result.steps)
    failed = sum(1 for s in result.steps if s.error)
    text = f"sweep {'stopped after' if result.stopped else 'done:'} {ran} configuration{'' if ran == 1 else 's'}"
    if failed:
        text += f" ({failed} failed to serve)"
    if result.restore_error:
        return f"{text}; the starting launch command was NOT restored: {result.restore_error}", True
    return f"{text}; {'start restored' if result.restored else 'start NOT restored'}", not result.restored



class BenchOutcome(Protocol):
    """What the toast reads from a benchmark result (the session's `BenchResult`)."""

    baseline: bool
    output_tps: float

    @property
    def accept_len(self) -> float | None: ...


def bench_summary(result: BenchOutcome) -> str:
    """The toast after a benchmark: kind, tok/s and accept length."""
    kind = "baseline" if result.baseline else "benchmark"
    return f"{kind}: {fmt_num(result.output_tps, 1)} tok/s, accept len {fmt_num(result.accept_len)}"
