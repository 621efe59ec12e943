"""The Prometheus text format (what `/metrics` answers on SGLang and vLLM), read with prometheus_client's parser.

Engine-neutral: each engine's package names its own metrics (`sglang.promtext`, `vllm.metrics`) over these.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from eagle3_tui.errors import UserError

__all__ = ["MetricSample", "MetricsUnreadable", "read_samples", "read_samples_lenient"]


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
