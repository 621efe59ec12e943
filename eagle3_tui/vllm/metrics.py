"""vLLM's `/metrics` speculative-decoding counters, turned into acceptance over time windows.

vLLM 0.32 (`v1/spec_decode/metrics.py`, `SpecDecodingProm`) exports counters, not gauges, each labelled
`engine` and `model_name`:
`vllm:spec_decode_num_drafts_total`, `vllm:spec_decode_num_draft_tokens_total`,
`vllm:spec_decode_num_accepted_tokens_total` and `vllm:spec_decode_num_accepted_tokens_per_pos_total
{position="i"}`; beside them `vllm:generation_tokens_total` and the gauges `vllm:num_requests_running`,
`vllm:num_requests_waiting`, `vllm:kv_cache_usage_perc`. Over a window, mean acceptance length =
1 + accepted / drafts and the rate of position i = accepted at i / drafts (what the `SpecDecoding metrics`
log line prints). No metric carries the speculative config.

A counter that goes backwards means the server restarted: `SpecWindow` starts over from that snapshot and
counts the restart; nothing raises.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from eagle3_tui.formats.promtext import MetricSample, read_samples_lenient

DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
ACCEPTED_PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
GENERATION_TOKENS = "vllm:generation_tokens_total"
PROMPT_TOKENS = "vllm:prompt_tokens_total"
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
KV_CACHE_USAGE = "vllm:kv_cache_usage_perc"


@dataclass(frozen=True)
class Counters:
    """One `/metrics` read: the cumulative counters (summed over engines and models) and the load gauges."""

    drafts: float
    draft_tokens: float
    accepted: float
    accepted_per_position: tuple[float, ...]
    generation_tokens: float
    prompt_tokens: float
    running: float | None
    waiting: float | None
    kv_cache_usage: float | None
    speculative: bool
    """Whether the spec-decode counters are exported at all (a server without speculation has none)."""

    @property
    def mean_acceptance_length(self) -> float | None:
        """Since the server started: 1 + accepted / drafts (None before the first draft)."""
        return 1.0 + self.accepted / self.drafts if self.drafts > 0 else None

    @property
    def per_position(self) -> tuple[float, ...]:
        """Since the server started: the fraction of drafts whose token i was accepted."""
        if self.drafts <= 0:
            return ()
        return tuple(a / self.drafts for a in self.accepted_per_position)


def _sum(samples: list[MetricSample], name: str) -> float:
    return sum(s.value for s in samples if s.name == name and math.isfinite(s.value))


def _gauge(samples: list[MetricSample], name: str) -> float | None:
    vals = [s.value for s in samples if s.name == name and math.isfinite(s.value)]
    return sum(vals) if vals else None


def counters_from_samples(samples: list[MetricSample]) -> Counters:
    per_pos: dict[int, float] = {}
    for s in samples:
        if s.name == ACCEPTED_PER_POS and math.isfinite(s.value):
            try:
                pos = int(s.labels.get("position", ""))
            except ValueError:
                continue
            if 0 <= pos < 64:
                per_pos[pos] = per_pos.get(pos, 0.0) + s.value
    positions = tuple(per_pos.get(i, 0.0) for i in range(max(per_pos) + 1)) if per_pos else ()
    return Counters(
        drafts=_sum(samples, DRAFTS),
        draft_tokens=_sum(samples, DRAFT_TOKENS),
        accepted=_sum(samples, ACCEPTED),
        accepted_per_position=positions,
        generation_tokens=_sum(samples, GENERATION_TOKENS),
        prompt_tokens=_sum(samples, PROMPT_TOKENS),
        running=_gauge(samples, RUNNING),
        waiting=_gauge(samples, WAITING),
        kv_cache_usage=_gauge(samples, KV_CACHE_USAGE),
        speculative=any(s.name == DRAFTS for s in samples),
    )


def read_counters(text: str) -> Counters:
    """A `/metrics` body -> Counters; unreadable lines are skipped (a missing counter reads 0)."""
    return counters_from_samples(read_samples_lenient(text))


@dataclass(frozen=True)
class WindowStats:
    """Acceptance and throughput between two `/metrics` reads."""

    seconds: float
    drafts: float
    draft_tokens: float
    accepted: float
    mean_acceptance_length: float | None
    per_position: tuple[float, ...]
    draft_acceptance_rate: float | None
    generation_throughput: float | None
    """Generated tokens per second over the window."""
    running: float | None
    waiting: float | None


def window(old: Counters, new: Counters, seconds: float) -> WindowStats | None:
    """The stats between two reads; None when a counter went backwards (a restart) or no time passed."""
    deltas = (
        new.drafts - old.drafts,
        new.draft_tokens - old.draft_tokens,
        new.accepted - old.accepted,
        new.generation_tokens - old.generation_tokens,
    )
    if seconds <= 0 or any(d < 0 for d in deltas):
        return None
    if len(old.accepted_per_position) > len(new.accepted_per_position):
        return None  # positions vanished: another server (a restart with fewer speculative tokens)
    pos_old = old.accepted_per_position + (0.0,) * (len(new.accepted_per_position) - len(old.accepted_per_position))
    pos = tuple(n - o for n, o in zip(new.accepted_per_position, pos_old, strict=True))
    if any(p < 0 for p in pos):
        return None
    drafts, draft_tokens, accepted, gen = deltas
    return WindowStats(
        seconds=seconds,
        drafts=drafts,
        draft_tokens=draft_tokens,
        accepted=accepted,
        mean_acceptance_length=1.0 + accepted / drafts if drafts > 0 else None,
        per_position=tuple(p / drafts for p in pos) if drafts > 0 else (),
        draft_acceptance_rate=accepted / draft_tokens if draft_tokens > 0 else None,
        generation_throughput=gen / seconds,
        running=new.running,
        waiting=new.waiting,
    )


class SpecWindow:
    """Rolling acceptance over the last `span` seconds of `/metrics` reads.

    `add(t, counters)` keeps the reads of the span and answers the stats from the oldest kept read to this
    one. A counter below the previous read's means vLLM restarted: the history is dropped, `restarts` goes
    up, and the next window starts at this read.
    """

    def __init__(self, span: float = 30.0) -> None:
        self.span = span
        self.restarts = 0
        self._reads: deque[tuple[float, Counters]] = deque()

    def add(self, t: float, counters: Counters) -> WindowStats | None:
        if self._reads:
            last_t, last = self._reads[-1]
            if t < last_t or window(last, counters, max(t - last_t, 1e-9)) is None:
                self.restarts += 1
                self._reads.clear()
        self._reads.append((t, counters))
        while len(self._reads) > 2 and t - self._reads[1][0] >= self.span:
            self._reads.popleft()
        if len(self._reads) < 2:
            return None
        t0, first = self._reads[0]
        return window(first, counters, t - t0)
