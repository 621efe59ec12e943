"""What a report shows, as plain data: gathered from a session once (gather.py), then written as
Markdown (markdown.py) and charts (charts.py) without touching the session again, so both agree and
each is tested on data built by hand."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eagle3_tui.doctor.findings import Finding
    from eagle3_tui.eagle.accuracy import CheckReport
    from eagle3_tui.telemetry.changes import ChangeEffect
    from eagle3_tui.telemetry.ledger import LedgerRow


@dataclass(frozen=True)
class Header:
    """Who served what, as the console's status bar says it."""

    host: str
    generated_at: float
    tool_version: str
    engine: str | None = None
    release: str | None = None
    deployment: str | None = None
    state: str = "unknown"
    flags: str = "speculation off"
    wiring: str = "?"
    preset: str | None = None
    launch: str | None = None
    """The launch command, secrets redacted; None when none is known."""


@dataclass(frozen=True)
class Live:
    """The status bar's live numbers (means over `window_s` of data) and what they are held against."""

    window_s: float
    accept_len: float | None = None
    gen_tps: float | None = None
    baseline_tps: float | None = None
    speedup: float | None = None
    predicted: float | None = None
    """The check's predicted accept length for what is served now."""
    decode_lines: int = 0


@dataclass(frozen=True)
class Marker:
    """A labelled instant drawn as a vertical line: a restart (its reason) or another event of the session."""

    t: float
    label: str
    restart: bool = True


@dataclass(frozen=True)
class OverTime:
    """The accept-length and tok/s points (time, value), oldest first, and the lines drawn across them."""

    accept: tuple[tuple[float, float], ...] = ()
    tps: tuple[tuple[float, float], ...] = ()
    markers: tuple[Marker, ...] = ()
    baseline_tps: float | None = None
    predicted: float | None = None
    predicted_label: str = ""
    note: str = ""
    """What the points cover when that is not the session's whole life (a command that watched a while)."""
    cuts: tuple[float, ...] = ()
    """Every restart's instants (a change's write and its server's launch both): a line is never drawn
    across one, so a new server's numbers are never joined to the old one's."""

    @property
    def empty(self) -> bool:
        return not self.accept and not self.tps


@dataclass(frozen=True)
class PositionSeries:
    """Acceptance rate per draft position (position 1 first) from one source."""

    label: str
    rates: tuple[float, ...]


@dataclass(frozen=True)
class CheckPart:
    """The accuracy check shown, where it came from, and the boundaries served (its served column)."""

    report: CheckReport
    source: str
    served: tuple[int, ...] | None = None


@dataclass
class ReportData:
    """Everything one report shows. `problems` are what could not be read (said in the report, never fatal)."""

    header: Header
    live: Live
    over_time: OverTime = field(default_factory=OverTime)
    positions: list[PositionSeries] = field(default_factory=list)
    positions_note: str = ""
    """Why a source of per-position acceptance is missing (SGLang does not report it, ...)."""
    changes: list[ChangeEffect] = field(default_factory=list)
    ledger: list[LedgerRow] = field(default_factory=list)
    check: CheckPart | None = None
    findings: list[Finding] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
