"""What a chart draws, computed from the session's telemetry (no plotext import here)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(slots=True)
class ChartData:
    """What one chart draws: x (seconds relative to the newest point), y, reference lines, markers."""

    xs: list[float] = field(default_factory=list)
    ys: list[float] = field(default_factory=list)
    references: list[tuple[float, str]] = field(default_factory=list)
    markers: list[tuple[float, str]] = field(default_factory=list)
    window_s: float = 300.0
