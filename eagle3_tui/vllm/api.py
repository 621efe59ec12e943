"""vLLM's HTTP answers the console reads, as typed values: `/version`, `/v1/models`, and the per-request
speculative-decoding metrics of a completion.

With `--per-request-spec-decode-metrics summary|detailed` (vLLM 0.32, `entrypoints/generate/base/protocol.py`
`SpeculativeDecodingMetrics`), each `/v1/completions` and `/v1/chat/completions` answer carries
`metrics.speculative_decoding`: `acceptance_histogram[j]` counts the verify steps that accepted exactly j draft
tokens (length num_spec_tokens + 1), `mean_acceptance_length` includes the bonus token, and the `detailed`
level adds `per_step_accepted` / `per_step_drafted`. Only single-sequence requests have it (null for n > 1).
`/health` answers 200 with an empty body once the engine is up; no answer carries the speculative config.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["RequestSpec", "request_spec", "served_models", "version"]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _float(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _ints(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, list) and all(_int(v) is not None for v in value):
        return tuple(value)
    return None


@dataclass(frozen=True)
class RequestSpec:
    """One request's speculative decoding, as vLLM reported it."""

    mean_acceptance_length: float
    draft_acceptance_rate: float | None
    histogram: tuple[int, ...]
    num_spec_steps: int
    num_accepted: int
    num_draft_tokens: int | None
    num_spec_tokens: int | None
    per_step_accepted: tuple[int, ...] | None = None

    @property
    def per_position(self) -> tuple[float, ...]:
        """The fraction of verify steps whose draft token i was accepted (a step that accepted j tokens
        accepted positions 0..j-1): what the log line's `Per-position acceptance rate` says server-wide."""
        steps = sum(self.histogram)
        if steps <= 0:
            return ()
        return tuple(sum(self.histogram[j] for j in range(i + 1, len(self.histogram))) / steps
                     for i in range(len(self.histogram) - 1))


def request_spec(response: Mapping[str, Any]) -> RequestSpec | None:
    """`metrics.speculative_decoding` of a completion answer; None when absent (flag off, n > 1) or malformed."""
    metrics = response.get("metrics")
    spec = metrics.get("speculative_decoding") if isinstance(metrics, Mapping) else None
    if not isinstance(spec, Mapping):
        return None
    mean = _float(spec.get("mean_acceptance_length"))
    hist = _ints(spec.get("acceptance_histogram"))
    if mean is None or hist is None:
        return None
    steps = _int(spec.get("num_spec_steps"))
    accepted = _int(spec.get("num_accepted_draft_tokens"))
    return RequestSpec(
        mean_acceptance_length=mean,
        draft_acceptance_rate=_float(spec.get("draft_acceptance_rate")),
        histogram=hist,
        num_spec_steps=steps if steps is not None else sum(hist),
        num_accepted=accepted if accepted is not None else sum(j * c for j, c in enumerate(hist)),
        num_draft_tokens=_int(spec.get("num_draft_tokens")),
        num_spec_tokens=_int(spec.get("num_spec_tokens")),
        per_step_accepted=_ints(spec.get("per_step_accepted")),
    )


def served_models(answer: Mapping[str, Any]) -> tuple[str, ...]:
    """The model ids of a `/v1/models` answer (the names requests must use)."""
    data = answer.get("data")
    if not isinstance(data, list):
        return ()
    return tuple(str(m["id"]) for m in data if isinstance(m, Mapping) and isinstance(m.get("id"), str))


def version(answer: Mapping[str, Any]) -> str | None:
    """`/version`'s `{"version": "0.32.0"}`."""
    v = answer.get("version")
    return v if isinstance(v, str) and v else None
