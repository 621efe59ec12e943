"""SGLang's `/metrics` text (the Prometheus exposition format), read with prometheus_client's own parser.

The names are SGLang's, as its scheduler registers them (read from the released wheels):
`sglang:gen_throughput`, `sglang:spec_accept_length`, `sglang:spec_accept_rate`, `sglang:num_running_reqs`,
`sglang:num_queue_reqs`, `sglang:token_usage` are gauges of `SchedulerMetricsCollector` in
`sglang/srt/metrics/collector.py` (0.4.9, 0.5.6; 0.4.9 has no `spec_accept_rate`) and in
`sglang/srt/observability/metrics_collector.py` (0.5.12, 0.5.17, 0.5.20, 0.5.23), each labelled `model_name`,
`engine_type`, `tp_rank`, `pp_rank` (0.5.12+ add `moe_ep_rank`) and `dp_rank` when the server runs
data-parallel ranks (0.5.6 `managers/scheduler_metrics_mixin.py`, 0.5.12+ `observability/scheduler_metrics_mixin.py`).
Every DP rank's scheduler sets its own gauges.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from eagle3_tui.errors import UserError

GEN_THROUGHPUT = "sglang:gen_throughput"
SPEC_ACCEPT_LENGTH = "sglang:spec_accept_length"
SPEC_ACCEPT_RATE = "sglang:spec_accept_rate"
NUM_RUNNING = "sglang:num_running_reqs"
NUM_QUEUE = "sglang:num_queue_reqs"
TOKEN_USAGE = "sglang:token_usage"


class MetricsUnreadable(UserError):
    """A /metrics answer that is not Prometheus text (an HTML error page, a proxy's answer, a cut body)."""


@dataclass(frozen=True)
class MetricSample:
    name: str
    labels: dict[str, str]
    value: float


def _samples(text: str) -> list[MetricSample]:
    return [MetricSample(s.name, dict(s.labels), float(s.value))
            for fam in text_string_to_metric_families(text) for s in fam.samples]


def read_samples(text: str) -> list[MetricSample]:
    """Every sample of `text`; one sentence (MetricsUnreadable) when prometheus_client cannot read it."""
    try:
        return _samples(text)
    except (ValueError, TypeError, IndexError, KeyError) as err:
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")[:60]
        raise MetricsUnreadable(f"the answer is not Prometheus text ({err}; it begins {first!r})") from None


def read_samples_lenient(text: str) -> list[MetricSample]:
    """Every sample that can be read: the whole text, else line by line (a bad line is skipped)."""
    try:
        return _samples(text)
    except (ValueError, TypeError, IndexError, KeyError):
        pass
    out: list[MetricSample] = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            try:
                out += _samples(line + "\n")
            except (ValueError, TypeError, IndexError, KeyError):
                continue
    return out


def by_rank(samples: list[MetricSample], name: str) -> dict[str, float]:
    """`name`'s value per DP rank ("" without a dp_rank label): the mean over the rank's other label sets
    (TP/PP ranks report the same batch); NaN and infinite values are left out."""
    groups: dict[str, list[float]] = {}
    for s in samples:
        if s.name == name and math.isfinite(s.value):
            groups.setdefault(s.labels.get("dp_rank", ""), []).append(s.value)
    return {rank: sum(vals) / len(vals) for rank, vals in groups.items()}
