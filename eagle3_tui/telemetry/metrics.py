"""Live speculative-decoding metrics derived from `Decode batch` lines (SGLang) or the engine seam's
`SpecStats` (vLLM's `SpecDecoding metrics` and `Engine 000` lines).

Definitions (research/sglang.md §1.6):
- `accept_len` (SGLang's "accept len") = tokens committed per request per verify step, the bonus
  token included: 1 + accepted draft tokens. Range [1, num_steps + 1] for topk 1.
- `accepted_per_step` = accept_len − 1: draft tokens accepted per verify step.
- `accept_rate_tool` = (accept_len − 1) / num_steps: the share of drafted chain positions that
  were accepted. This is the tool's own rate, stable across SGLang versions.
- `accept_rate_sglang` = the "accept rate" SGLang printed. Its definition changed: 0.5.3.post2 to
  0.5.5.post2 printed accepted/(fwd × (steps+1)) (bonus included), 0.5.5.post3 to 0.5.6 used
  num_draft_tokens as the denominator, 2026 versions print (len−1)/(draft−1) (bonus excluded).
  `guess_rate_definition` tells which one a log uses.
- `speedup` = gen tok/s ÷ the no-speculation baseline tok/s, when a baseline is known.
"""

from __future__ import annotations

import math
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from eagle3_tui.engines.base import SpecStats
from eagle3_tui.sglang.logline import DecodeStats
from eagle3_tui.sglang.requests import ALL, SetAccept, accept_by_set
from eagle3_tui.telemetry.drift import DriftSlices
from eagle3_tui.telemetry.series import Ring

__all__ = [
    "SERIES_NAMES",
    "Marker",
    "MetricsSummary",
    "RateGuess",
    "Telemetry",
    "accepted_per_step",
    "guess_rate_definition",
    "speedup",
    "tool_accept_rate",
]

SERIES_NAMES: tuple[str, ...] = (
    "accept_len",
    "gen_tps",
    "running_req",
    "queue_req",
    "token_usage",
    "accept_rate_sglang",
    "accept_rate_tool",
    "accepted_per_step",
)

# Names and one-line meanings of SGLang's accept-rate definitions, newest last.
RATE_DEFINITIONS: dict[str, str] = {
    "bonus-included": "accept len / num_draft_tokens (SGLang 0.5.3.post2 to 0.5.6: bonus token included)",
    "bonus-excluded": "(accept len - 1) / (num_draft_tokens - 1) (SGLang 2026: bonus token excluded)",
}


def _finite(value: object) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def accepted_per_step(accept_len: float) -> float:
    """Draft tokens accepted per verify step: accept len minus the bonus token (never below 0)."""
    return max(accept_len - 1.0, 0.0)


def tool_accept_rate(accept_len: float, num_steps: int | None) -> float | None:
    """(accept len − 1) / num_steps: the tool's own accept rate; None without a step count."""
    if not num_steps or num_steps <= 0:
        return None
    return accepted_per_step(accept_len) / num_steps


def speedup(tps: float | None, baseline_tps: float | None) -> float | None:
    """Throughput with speculation ÷ throughput without; None when either is unknown."""
    if tps is None or not baseline_tps or baseline_tps <= 0:
        return None
    return tps / baseline_tps


def decode_line(ev: DecodeStats, num_steps: int | None) -> str:
    """One decode stat as a line (`watch --no-ui`, the console's log pane for HTTP points): time, accept
    length, both accept rates, tok/s, queue, and where it came from when that is not the log."""
    t = time.strftime("%H:%M:%S", time.localtime(ev.timestamp or time.time()))
    parts = [t]
    if ev.accept_len is not None:
        parts.append(f"accept len {ev.accept_len:5.2f}")
        rate = tool_accept_rate(ev.accept_len, num_steps)
        if rate is not None:
            parts.append(f"per-draft-token {rate:5.1%}")
    if ev.accept_rate is not None:
        parts.append(f"sglang rate {ev.accept_rate:.2f}")
    if ev.gen_throughput is not None:
        parts.append(f"gen {ev.gen_throughput:7.2f} tok/s")
    parts.append(f"running {ev.running_req if ev.running_req is not None else '?'}")
    parts.append(f"queue {ev.queue_req if ev.queue_req is not None else '?'}")
    source = ev.extra.get("source") if ev.extra else None
    if source:
        parts.append(f"(from {source})")
    return "  ".join(parts)


@dataclass(frozen=True, slots=True)
class RateGuess:
    """Which SGLang accept-rate definition fits the printed (accept len, accept rate) pairs."""

    definition: str  # a key of RATE_DEFINITIONS, or "ambiguous"
    num_draft_tokens: int | None  # the denominator that fits, when one does
    samples: int
    fitting: int
    description: str


def _fits(length: float, rate: float, d: int, definition: str) -> bool:
    # Both numbers were printed with 2 decimals: allow their rounding error.
    if definition == "bonus-included":
        return abs(rate - length / d) <= 0.0051 + 0.0051 / d
    if d < 2:
        return False
    return abs(rate - (length - 1.0) / (d - 1)) <= 0.0051 + 0.0051 / (d - 1)


def guess_rate_definition(
    pairs: Iterable[tuple[float, float]], num_draft_tokens: int | None = None, max_draft: int = 64
) -> RateGuess | None:
    """The definition (and denominator) that explains most printed pairs; None without pairs.

    With a known `num_draft_tokens` only that denominator is tried. A constant accept len fits
    both definitions with different denominators: that is reported as "ambiguous".
    """
    samples = [(a, r) for a, r in pairs if math.isfinite(a) and math.isfinite(r) and a >= 1.0]
    if not samples:
        return None
    ds = [num_draft_tokens] if num_draft_tokens else list(range(1, max_draft + 1))
    best: list[tuple[int, str, int]] = []
    for definition in RATE_DEFINITIONS:
        for d in ds:
            n = sum(1 for a, r in samples if _fits(a, r, d, definition))
            best.append((n, definition, d))
    best.sort(key=lambda x: -x[0])
    top_n, top_def, top_d = best[0]
    if top_n == 0 or top_n < 0.8 * len(samples):
        return RateGuess("unknown", None, len(samples), top_n, "no known definition fits the printed rates")
    rivals = [b for b in best[1:] if b[0] == top_n and b[1] != top_def]
    if rivals:
        alt = rivals[0]
        text = (
            f"ambiguous: {RATE_DEFINITIONS[top_def]} with draft tokens {top_d}, or "
            f"{RATE_DEFINITIONS[alt[1]]} with draft tokens {alt[2]}"
        )
        return RateGuess("ambiguous", None, len(samples), top_n, text)
    return RateGuess(top_def, top_d, len(samples), top_n, f"{RATE_DEFINITIONS[top_def]}, draft tokens {top_d}")


@dataclass(frozen=True, slots=True)
class Marker:
    """A labelled instant on the charts: a restart, a config change, a benchmark."""

    t: float
    label: str


@dataclass(frozen=True, slots=True)
class MetricsSummary:
    """Means over the last `window_s` seconds (of data time) and the newest values."""

    window_s: float
    decode_lines: int  # decode lines ingested since the start (or the last reset)
    window_lines: int  # decode lines inside the window
    last_t: float | None
    means: dict[str, float | None]
    last: dict[str, float | None]
    num_steps: int | None
    baseline_tps: float | None
    speedup: float | None  # mean gen tok/s in the window ÷ baseline
    peaks: dict[str, float | None] = field(default_factory=dict)
    """The largest value of each series in the window (the running requests a batch reached)."""

    @property
    def accept_len(self) -> float | None:
        return self.means.get("accept_len")

    @property
    def gen_tps(self) -> float | None:
        return self.means.get("gen_tps")


class Telemetry:
    """One ring per metric, fed with `DecodeStats`; plus chart markers. Bounded memory."""

    def __init__(self, capacity: int = 4096, max_markers: int = 256) -> None:
        self.capacity = capacity
        self.series: dict[str, Ring] = {name: Ring(capacity) for name in SERIES_NAMES}
        self.markers: deque[Marker] = deque(maxlen=max_markers)
        self.num_steps: int | None = None
        self.baseline_tps: float | None = None
        self.decode_lines = 0
        self.run_since: float | None = None
        """When the server now running was launched (`new_run`): the summary's means start there."""
        self.positions: list[Ring] = []
        """Acceptance rate per draft position (position 1 first), where the engine reports it (vLLM)."""
        self.positions_reported = False
        """Whether any stats carried per-position rates (SGLang's never do)."""
        self.requests: deque[float] = deque(maxlen=1000)
        """The accept length of each request the server logged as it finished (`--log-requests`), newest last."""
        self.requests_seen = 0
        self.drift = DriftSlices()
        """Accept length and running requests in ten-minute slices over the current run (the drift rule's)."""

    def ingest(self, event: DecodeStats, t: float | None = None) -> None:
        """File one decode line under time `t` (default: its timestamp, else the wall clock)."""
        if t is None:
            t = event.timestamp if event.timestamp is not None else time.time()
        self.decode_lines += 1
        s = self.series
        if event.accept_len is not None:
            s["accept_len"].append(t, event.accept_len)
            s["accepted_per_step"].append(t, accepted_per_step(event.accept_len))
            rate = tool_accept_rate(event.accept_len, self.num_steps)
            if rate is not None:
                s["accept_rate_tool"].append(t, rate)
        if event.accept_rate is not None:
            s["accept_rate_sglang"].append(t, event.accept_rate)
        if event.gen_throughput is not None:
            s["gen_tps"].append(t, event.gen_throughput)
        if event.running_req is not None:
            s["running_req"].append(t, float(event.running_req))
        if event.queue_req is not None:
            s["queue_req"].append(t, float(event.queue_req))
        if event.token_usage is not None:
            s["token_usage"].append(t, event.token_usage)
        self.drift.add(t, event.accept_len, float(event.running_req) if event.running_req is not None else None)

    def ingest_spec(self, event: SpecStats, t: float | None = None) -> None:
        """File one engine-seam stats event (vLLM's SpecDecoding or Engine line) under time `t`.

        Values that are not finite numbers are dropped, never filed: a malformed line must not put a NaN
        or a string into a chart."""
        if t is None:
            t = event.timestamp if event.timestamp is not None else time.time()
        length = _finite(event.mean_acceptance_length)
        tps = _finite(event.generation_throughput)
        rates = [_finite(r) for r in event.per_position]
        if length is None and tps is None and not any(r is not None for r in rates):
            return
        self.decode_lines += 1
        s = self.series
        if length is not None and length >= 1.0:
            s["accept_len"].append(t, length)
            s["accepted_per_step"].append(t, accepted_per_step(length))
            rate = tool_accept_rate(length, self.num_steps)
            if rate is not None:
                s["accept_rate_tool"].append(t, rate)
        if tps is not None:
            s["gen_tps"].append(t, tps)
        if event.running is not None:
            s["running_req"].append(t, float(event.running))
        if event.waiting is not None:
            s["queue_req"].append(t, float(event.waiting))
        self.drift.add(t, length if length is not None and length >= 1.0 else None,
                       float(event.running) if event.running is not None else None)
        if rates:
            self.positions_reported = True
            while len(self.positions) < len(rates):
                self.positions.append(Ring(self.capacity))
            for ring, r in zip(self.positions, rates, strict=False):
                if r is not None and 0.0 <= r <= 1.0:
                    ring.append(t, r)

    def ingest_requests(self, values: Iterable[float]) -> None:
        """Per-request accept lengths from the log; what is not a finite number >= 1 is dropped."""
        for v in values:
            f = _finite(v)
            if f is not None and f >= 1.0:
                self.requests.append(f)
                self.requests_seen += 1

    def request_summary(self) -> SetAccept | None:
        """The logged requests kept (the newest thousand): count, mean, p10/p50/p90; None before the first."""
        return accept_by_set([(ALL, v) for v in self.requests])[0] if self.requests else None

    def last_positions(self) -> tuple[float | None, ...]:
        """The newest rate of each draft position (None where none was filed)."""
        out: list[float | None] = []
        for ring in self.positions:
            newest = ring.last()
            out.append(newest[1] if newest else None)
        return tuple(out)

    def mark(self, t: float, label: str) -> None:
        """Add a chart marker (the oldest goes when there are `max_markers`)."""
        self.markers.append(Marker(float(t), label))

    def new_run(self, t: float) -> None:
        """A server was launched at `t`: the summary's means begin there, so for a minute after a restart
        the status bar and the doctor do not average the old server's numbers into the new one's (the
        points stay for the charts)."""
        self.run_since = float(t)
        self.drift.clear()

    def reset(self) -> None:
        """Forget all points and markers (settings stay)."""
        for ring in self.series.values():
            ring.clear()
        self.positions = []
        self.positions_reported = False
        self.markers.clear()
        self.decode_lines = 0
        self.run_since = None
        self.drift.clear()

    def last_time(self) -> float | None:
        newest = [r.last()[0] for r in self.series.values() if len(r)]  # type: ignore[index]
        return max(newest) if newest else None

    def summary(self, window_s: float = 60.0) -> MetricsSummary:
        """Means over the newest `window_s` seconds of data, none before `run_since`, and the last value of
        every series."""
        last_t = self.last_time()
        since = -math.inf if self.run_since is None else self.run_since
        means: dict[str, float | None] = {}
        last: dict[str, float | None] = {}
        peaks: dict[str, float | None] = {}
        window_lines = 0
        for name, ring in self.series.items():
            newest = ring.last()
            last[name] = newest[1] if newest else None
            if last_t is None or not len(ring):
                means[name] = None
                continue
            vals = [v for _, v in ring.window(max(last_t - window_s, since), None)]
            means[name] = sum(vals) / len(vals) if vals else None
            peaks[name] = max(vals) if vals else None
            if name == "gen_tps":
                window_lines = max(window_lines, len(vals))
            elif name == "accept_len":
                window_lines = max(window_lines, len(vals))
        return MetricsSummary(
            window_s=window_s,
            decode_lines=self.decode_lines,
            window_lines=window_lines,
            last_t=last_t,
            means=means,
            last=last,
            num_steps=self.num_steps,
            baseline_tps=self.baseline_tps,
            speedup=speedup(means.get("gen_tps"), self.baseline_tps),
            peaks=peaks,
        )
