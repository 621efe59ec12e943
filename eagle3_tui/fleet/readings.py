"""One server's `/metrics` answer as the numbers a fleet row is made of (pure).

The text is read with the project's one exposition parser (`eagle3_tui.formats.promtext`), the names are each
engine's own (`sglang.promtext`, `vllm.metrics`). Only the lines of the families a row uses are handed to
the parser: a real vLLM answer is ~600 lines of histograms the row never shows, and fifty servers are read
every interval. The same `Reading` is built from a Prometheus server's answer (`promapi`), so a row is
derived one way whichever source it came from.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from eagle3_tui.formats.promtext import MetricSample, MetricsUnreadable, read_samples
from eagle3_tui.sglang import promtext as sgl
from eagle3_tui.vllm import metrics as vm

START_TIME = "process_start_time_seconds"
SGL_STEPS = "sglang:spec_num_steps"
SGL_DRAFT_TOKENS = "sglang:spec_num_draft_tokens"
SGL_GENERATION_TOKENS = "sglang:generation_tokens_total"

SGLANG_NAMES = (
    sgl.SPEC_ACCEPT_LENGTH, sgl.SPEC_ACCEPT_RATE, sgl.GEN_THROUGHPUT, sgl.NUM_RUNNING, sgl.NUM_QUEUE,
    SGL_STEPS, SGL_DRAFT_TOKENS, SGL_GENERATION_TOKENS,
)
VLLM_NAMES = (
    vm.DRAFTS, vm.DRAFT_TOKENS, vm.ACCEPTED, vm.ACCEPTED_PER_POS, vm.GENERATION_TOKENS, vm.RUNNING, vm.WAITING,
)
NAMES = {"sglang": SGLANG_NAMES, "vllm": VLLM_NAMES}
ALL_NAMES = (*SGLANG_NAMES, *VLLM_NAMES, START_TIME)
# Every other family of the engine's prefix marks an answer as the engine's even without speculation.
PREFIX = {"sglang": "sglang:", "vllm": "vllm:"}


@dataclass(frozen=True)
class Reading:
    """One read of one server. Counters are cumulative (a row takes differences); None: not exported."""

    engine: str
    accept_gauge: float | None = None
    """SGLang's `spec_accept_length` gauge (its last decode batch's)."""
    gen_throughput: float | None = None
    drafts: float | None = None
    accepted: float | None = None
    draft_tokens: float | None = None
    accepted_per_position: tuple[float, ...] = ()
    generation_tokens: float | None = None
    running: float | None = None
    waiting: float | None = None
    num_steps: int | None = None
    num_draft_tokens: int | None = None
    start_time: float | None = None
    model: str | None = None
    speculative: bool = True


def _mean(values: dict[str, float]) -> float | None:
    return sum(values.values()) / len(values) if values else None


def _int(v: float | None) -> int | None:
    return int(v) if v is not None and math.isfinite(v) else None


def reading_from_samples(engine: str, samples: list[MetricSample]) -> Reading:
    """The samples of one server (any label sets: DP ranks are averaged, vLLM's engines summed)."""
    start = [s.value for s in samples if s.name == START_TIME and math.isfinite(s.value) and s.value > 0]
    model = next((s.labels["model_name"] for s in samples if s.labels.get("model_name")), None)
    if engine == "vllm":
        c = vm.counters_from_samples(samples)
        return Reading(
            "vllm", drafts=c.drafts, accepted=c.accepted, draft_tokens=c.draft_tokens,
            accepted_per_position=c.accepted_per_position, generation_tokens=c.generation_tokens,
            running=c.running, waiting=c.waiting, num_steps=len(c.accepted_per_position) or None,
            start_time=min(start) if start else None, model=model, speculative=c.speculative,
        )

    def mean(name: str) -> float | None:
        return _mean(sgl.by_rank(samples, name))

    gen = [s.value for s in samples if s.name == SGL_GENERATION_TOKENS and math.isfinite(s.value)]
    accept = mean(sgl.SPEC_ACCEPT_LENGTH)
    return Reading(
        "sglang", accept_gauge=accept, gen_throughput=mean(sgl.GEN_THROUGHPUT),
        generation_tokens=sum(gen) if gen else None, running=mean(sgl.NUM_RUNNING), waiting=mean(sgl.NUM_QUEUE),
        num_steps=_int(mean(SGL_STEPS)), num_draft_tokens=_int(mean(SGL_DRAFT_TOKENS)),
        start_time=min(start) if start else None, model=model, speculative=accept is not None,
    )


def _wanted(lines: Iterable[str], names: tuple[str, ...]) -> list[str]:
    # a sample line starts with its name, then `{`, a space, or (for _total counters) the rest of the name
    return [ln for ln in lines if ln.startswith(names)]


def read_metrics(engine: str, text: str) -> Reading:
    """A `/metrics` body -> Reading (`engine` "auto": the engine whose names it has). MetricsUnreadable (one
    line) when it is cut short, is not Prometheus text, or has none of the engine's families (another
    service on that port, metrics turned off)."""
    if not text.strip():
        raise MetricsUnreadable("the /metrics answer is empty")
    if not text.endswith("\n"):
        last = text.rsplit("\n", 1)[-1][:60]
        raise MetricsUnreadable(f"the /metrics answer is cut short (its last line {last!r} has no end)")
    lines = text.splitlines()
    if engine == "auto":
        engine = next((e for e, p in PREFIX.items() if any(ln.startswith(p) for ln in lines)), "sglang")
    prefix = PREFIX[engine]
    if not any(ln.startswith(prefix) for ln in lines):
        first = next((ln.strip() for ln in lines if ln.strip()), "")[:60]
        raise MetricsUnreadable(f"no {prefix}* metrics in the answer (it begins {first!r})")
    keep = _wanted(lines, (*NAMES[engine], START_TIME))
    samples = read_samples("\n".join(keep) + "\n") if keep else []
    return reading_from_samples(engine, samples)


def engine_of(samples: Iterable[MetricSample]) -> str | None:
    """Which engine wrote these samples (by their names' prefix); None: neither."""
    for s in samples:
        for engine, prefix in PREFIX.items():
            if s.name.startswith(prefix):
                return engine
    return None
