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

# The format itself is engine-neutral (eagle3_tui.formats.promtext); these names stay importable from here.
from eagle3_tui.formats.promtext import MetricSample, MetricsUnreadable, read_samples, read_samples_lenient

__all__ = ["MetricSample", "MetricsUnreadable", "by_rank", "read_samples", "read_samples_lenient"]

GEN_THROUGHPUT = "sglang:gen_throughput"
SPEC_ACCEPT_LENGTH = "sglang:spec_accept_length"
SPEC_ACCEPT_RATE = "sglang:spec_accept_rate"
NUM_RUNNING = "sglang:num_running_reqs"
NUM_QUEUE = "sglang:num_queue_reqs"
TOKEN_USAGE = "sglang:token_usage"


def by_rank(samples: list[MetricSample], name: str) -> dict[str, float]:
    """`name`'s value per DP rank ("" without a dp_rank label): the mean over the rank's other label sets
    (TP/PP ranks report the same batch); NaN and infinite values are left out."""
    groups: dict[str, list[float]] = {}
    for s in samples:
        if s.name == name and math.isfinite(s.value):
            groups.setdefault(s.labels.get("dp_rank", ""), []).append(s.value)
    return {rank: sum(vals) / len(vals) for rank, vals in groups.items()}
