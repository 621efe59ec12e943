"""What the UI renders and hears from a `Session`: read-only views and the events passed to listeners.

Plain frozen dataclasses: a view is replaced, never mutated, so a widget can compare the old and the
new snapshot. `eagle3_tui.session` re-exports every name here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from eagle3_tui.engines import EngineEvent
from eagle3_tui.errors import UserError
from eagle3_tui.sglang.logline import DecodeStats, LogEvent

AnyLogEvent = LogEvent | EngineEvent

if TYPE_CHECKING:
    from eagle3_tui.doctor.findings import Finding
    from eagle3_tui.eagle.accuracy import CheckReport
    from eagle3_tui.eagle.spec_config import SpecConfig
    from eagle3_tui.sglang.client import BenchResult


class ReadOnlyError(UserError):
    """A change was asked of a read-only session."""


class RestartFailed(UserError):
    """The relaunched server failed or missed its deadline; `session.server.log_tail` has the log."""


# ---------------------------------------------------------------- views


@dataclass(frozen=True)
class ConnView:
    kind: Literal["connecting", "connected", "reconnecting", "failed", "local"] = "connecting"
    attempt: int = 0
    next_try_s: float | None = None
    reason: str | None = None


ServerState = Literal["unknown", "starting", "ready", "failed", "stopped"]


def _engine_name(argv: Sequence[str]) -> str | None:
    from eagle3_tui.engines import engine_for_launch
    from eagle3_tui.errors import UserError

    try:
        return engine_for_launch(argv).name
    except UserError:
        return None


@dataclass(frozen=True)
class Served:
    """The fields of `ServerView` a launch command and a draft config decide."""

    speculative: bool
    algorithm: str | None
    steps: int | None
    topk: int | None
    draft_tokens: int | None
    requested_draft_tokens: int | None
    adjusted: tuple[str, ...]
    layer_ids: tuple[int, ...] | None
    boundaries: tuple[int, ...] | None
    """What prefill captures (the installed release's rule when it is known)."""
    active_preset: str | None
    decode_boundaries: tuple[int, ...] | None = None
    """What decode feeds the draft, when it differs from prefill (CUDA graphs captured before the ids)."""


@dataclass(frozen=True)
class Reported:
    """The server view's fields as `/server_info` reports them (effective values, accept length); None:
    not reported."""

    accept_len_server: float | None
    version: str | None = None
    steps: int | None = None
    topk: int | None = None
    draft_tokens: int | None = None


@dataclass(frozen=True)
class ServerView:
    state: ServerState = "unknown"
    pid: int | None = None
    pgid: int | None = None
    started_at: float | None = None
    port: int | None = None
    speculative: bool = False
    algorithm: str | None = None
    steps: int | None = None
    topk: int | None = None
    draft_tokens: int | None = None  # effective
    requested_draft_tokens: int | None = None  # what the flag says
    adjusted: tuple[str, ...] = ()
    layer_ids: tuple[int, ...] | None = None
    boundaries: tuple[int, ...] | None = None
    decode_boundaries: tuple[int, ...] | None = None  # decode's, when CUDA graphs replay other boundaries
    active_preset: str | None = None
    log_path: str | None = None
    log_tail: tuple[str, ...] = ()
    argv: tuple[str, ...] = ()
    kind: str | None = None
    accept_len_server: float | None = None
    version: str | None = None
    message: str = ""
    deployment: str | None = None  # "container 3f2a… (docker)", "systemd unit sglang", "tmux pane"; None: a plain process
    charts_from: str | None = None  # "/metrics" or "/server_info" when no log file is followed (live/httpstats.py)
    charts_note: str | None = None  # why /metrics could not be used on the last poll
    charts_offer_log: bool = False  # a restart into a log file is offered (a pane's or a pipe's server)
    engine: str | None = None  # "sglang" or "vllm": whose launch command `argv` is (engines.engine_for_launch)

    # Typed updates: each returns the new snapshot (`Views.set_server` publishes it), so a caller changes
    # exactly the fields one of these names, and mypy checks every value.

    def with_state(self, state: ServerState, message: str = "", *, log_tail: Sequence[str] | None = None) -> ServerView:
        tail = self.log_tail if log_tail is None else tuple(log_tail)
        return replace(self, state=state, message=message, log_tail=tail)

    def with_process(self, pid: int, pgid: int, started_at: float | None) -> ServerView:
        """A server process found or started."""
        return replace(self, pid=pid, pgid=pgid, started_at=started_at)

    def without_process(self) -> ServerView:
        return replace(self, pid=None, pgid=None)

    def with_launch(self, port: int | None, log_path: str | None, argv: Sequence[str]) -> ServerView:
        """The launch command the server runs (or would run), and the engine it names."""
        return replace(self, port=port, log_path=log_path, argv=tuple(argv), engine=_engine_name(argv))

    def with_kind(self, kind: str | None) -> ServerView:
        return replace(self, kind=kind)

    def with_served(self, s: Served) -> ServerView:
        """What the launch command and the draft config decide (session/host/served.py)."""
        return replace(self, speculative=s.speculative, algorithm=s.algorithm, steps=s.steps, topk=s.topk,
                       draft_tokens=s.draft_tokens, requested_draft_tokens=s.requested_draft_tokens,
                       adjusted=s.adjusted, layer_ids=s.layer_ids, boundaries=s.boundaries,
                       active_preset=s.active_preset, decode_boundaries=s.decode_boundaries)

    def with_reported(self, r: Reported) -> ServerView:
        """What /server_info says (session/live/monitor.py); a value it does not report stays as it was."""
        return replace(self, accept_len_server=r.accept_len_server,
                       version=r.version if r.version is not None else self.version,
                       steps=r.steps if r.steps is not None else self.steps,
                       topk=r.topk if r.topk is not None else self.topk,
                       draft_tokens=r.draft_tokens if r.draft_tokens is not None else self.draft_tokens)

    def with_charts(self, source: str | None, note: str | None, offer_log: bool) -> ServerView:
        """Where the charts come from when no log file is followed (session/live/httpstats.py)."""
        return replace(self, charts_from=source, charts_note=note, charts_offer_log=offer_log)

    def with_deployment(self, label: str | None) -> ServerView:
        return replace(self, deployment=label)

    # What the served fields mean, one rule each: the console's status bar, charts and Accuracy pane and
    # the report read them here.

    def spec_config(self) -> SpecConfig | None:
        """The (steps, topk, draft tokens) the server runs (the effective draft tokens); None without
        speculation or with a flag unknown."""
        from eagle3_tui.eagle.spec_config import SpecConfig

        if not self.speculative or self.steps is None or self.topk is None or self.draft_tokens is None:
            return None
        return SpecConfig(int(self.steps), int(self.topk), int(self.draft_tokens))

    def fed_boundaries(self) -> tuple[int, ...] | None:
        """The boundaries that decide the accept length: decode's where graphed decode replays others."""
        return self.decode_boundaries or self.boundaries

    def predicted(self, check: CheckReport | None) -> float | None:
        """The check's predicted accept length for the boundaries and the flags served now (the rule is
        `eagle.accuracy.predicted_accept_len`): the status bar's "check" number, the accept chart's line."""
        if check is None:
            return None
        from eagle3_tui.eagle.accuracy import predicted_accept_len

        return predicted_accept_len(check, self.fed_boundaries(), self.spec_config())

    def predicted_label(self, check: CheckReport | None) -> str | None:
        """The prediction as the accept-length charts label it (the console's and the report's): the value and
        what it is for, the served (steps/topk/draft tokens) when the check predicted them, else its own chain."""
        value = self.predicted(check)
        if value is None or check is None:
            return None
        cfg = self.spec_config()
        why = (f" ({cfg[0]}/{cfg[1]}/{cfg[2]})" if cfg is not None and check.prediction(cfg, self.fed_boundaries())
               is not None else f" (chain of {check.steps})")
        return f"check predicts {value:.2f}{why}"


# ---------------------------------------------------------------- events


@dataclass(frozen=True)
class ConnectionChanged:
    conn: ConnView


@dataclass(frozen=True)
class ServerChanged:
    server: ServerView


@dataclass(frozen=True)
class LogBatch:
    """New log lines and the events parsed from them, delivered at most ten times a second."""

    lines: list[str]
    events: list[AnyLogEvent]
    """SGLang's `LogEvent`s, or the serving engine's `EngineEvent`s (vLLM's, through the seam)."""


@dataclass(frozen=True)
class StatsUpdated:
    pass


@dataclass(frozen=True)
class HttpSample:
    """A chart point read over HTTP (no log file): `stats.line` says where from; `source` is the endpoint."""

    stats: DecodeStats
    source: str


@dataclass(frozen=True)
class FindingsChanged:
    findings: list[Finding]


@dataclass(frozen=True)
class RestartProgress:
    phase: str  # stopping, port, launching, loading, ready, failed
    message: str
    elapsed_s: float


@dataclass(frozen=True)
class CheckProgress:
    done: int
    total: int
    eta_s: float | None
    wiring: str | None


@dataclass(frozen=True)
class CheckFinished:
    report: CheckReport | None
    error: str | None


@dataclass(frozen=True)
class BenchProgress:
    done: int
    total: int


@dataclass(frozen=True)
class BenchFinished:
    result: BenchResult | None
    error: str | None


@dataclass(frozen=True)
class LedgerChanged:
    pass


@dataclass(frozen=True)
class Notice:
    message: str
    severity: Literal["information", "warning", "error"] = "information"


SessionEvent = (
    ConnectionChanged
    | ServerChanged
    | LogBatch
    | StatsUpdated
    | HttpSample
    | FindingsChanged
    | RestartProgress
    | CheckProgress
    | CheckFinished
    | BenchProgress
    | BenchFinished
    | LedgerChanged
    | Notice
)
