"""The engine seam: what an EAGLE-3 serving engine says and wants, as one typed interface.

The console reads SGLang and vLLM through this interface only (DESIGN.md, Engines): an `Engine` parses its
launch commands, turns its log lines and `/metrics` answers into the same typed stats, says when it is ready
or why it failed, maps its draft-config layer ids to boundaries (the console never shows bare ids), and
names its processes. Each engine's own package (`eagle3_tui.sglang`, `eagle3_tui.vllm`) stays ignorant of
the other; the adapters here translate.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from eagle3_tui.eagle.spec_config import SpecConfig

__all__ = [
    "Captures",
    "Engine",
    "EngineEvent",
    "Failed",
    "Launch",
    "LogFeed",
    "MetricsFeed",
    "Numerics",
    "Ready",
    "SpecStats",
    "Started",
]


@dataclass(frozen=True)
class Numerics:
    """What a launch command sets of the target's numerics and window, as the engine reads its own flags (the
    doctor's target-numerics and draft-context rules speak through this, whatever the engine). None: not given."""

    quantization: str | None = None
    dtype: str | None = None
    kv_cache_dtype: str | None = None
    context_length: int | None = None
    """The served context window in tokens (SGLang's --context-length, vLLM's --max-model-len; "auto" is None)."""


@dataclass(frozen=True)
class Launch:
    """A launch command as every engine has it. `native` is the engine's own parsed form (its LaunchArgs)."""

    engine: str
    argv: tuple[str, ...]
    model: str | None
    draft_model: str | None
    method: str | None
    """The speculative algorithm as the command names it (`EAGLE3`, `eagle3`), None without speculation."""
    draft_tokens_per_step: int | None
    """Tokens drafted per verification: SGLang's `--speculative-num-steps` (with topk 1), vLLM's
    `num_speculative_tokens`; the positions a per-position chart has."""
    port: int | None
    host: str | None
    native: Any = field(compare=False, repr=False)
    nodes: int = 1
    """The nodes one server spans (SGLang's --nnodes; vLLM's multi-node runs through Ray, which the
    console does not restart: one node as far as it goes)."""
    node_rank: int = 0
    dist_init: str | None = None
    """The head's address the other nodes join (SGLang's --dist-init-addr)."""
    numerics: Numerics = field(default_factory=Numerics)
    """The target's quantization, dtype, KV-cache dtype and context window as the command sets them."""


@dataclass(frozen=True)
class SpecStats:
    """Acceptance and throughput at one moment, from a log line or a `/metrics` read.

    `per_position` is empty where the engine does not report it (SGLang); `draft_acceptance_rate` is a
    fraction (accepted / drafted tokens).
    """

    engine: str
    source: str  # "log" or "metrics"
    timestamp: float | None
    mean_acceptance_length: float | None
    per_position: tuple[float, ...]
    draft_acceptance_rate: float | None
    generation_throughput: float | None
    running: int | None = None
    waiting: int | None = None


@dataclass(frozen=True)
class Ready:
    engine: str
    timestamp: float | None
    line: str


@dataclass(frozen=True)
class Failed:
    """A fatal error; `sentence` is the engine's own error in one line."""

    engine: str
    kind: str
    sentence: str
    line: str
    traceback: tuple[str, ...] = ()

    @property
    def last_line(self) -> str:
        """The line that says what went wrong (the session's run state and notices read this name)."""
        return self.sentence


@dataclass(frozen=True)
class Started:
    """The start line's flags (SGLang `server_args=...`, vLLM `non-default args: {...}`)."""

    engine: str
    args: Mapping[str, Any]
    speculative: Mapping[str, Any]
    """The speculative settings among them, in the engine's own names."""
    line: str


EngineEvent = SpecStats | Ready | Failed | Started


@dataclass(frozen=True)
class Captures:
    """Which target states a draft config makes the engine capture."""

    ids: tuple[int, ...] | None
    """The ids the engine reads from the config (None: none, it uses its default)."""
    source: str
    """Where they were read: a config key path, or "default"."""
    boundaries: tuple[int, ...]
    """What the target captures, as boundaries (ascending, each once)."""
    ignored: tuple[str, ...] = ()
    """Config keys naming ids this engine does not read."""


class LogFeed(abc.ABC):
    """A stateful log reader (a failure's traceback arrives on the lines after it)."""

    @abc.abstractmethod
    def feed(self, line: str) -> list[EngineEvent]: ...

    @abc.abstractmethod
    def flush(self) -> list[EngineEvent]: ...

    @property
    def pending(self) -> object | None:
        """The failure held for its traceback (None: none); the same object until it is flushed."""
        return None


class MetricsFeed(abc.ABC):
    """A stateful `/metrics` reader: gauges read as they are, counters over a window. A restart never raises."""

    restarts: int

    @abc.abstractmethod
    def update(self, t: float, text: str) -> SpecStats | None: ...


class Engine(abc.ABC):
    """One serving engine. Stateless: the feeds it makes hold the state."""

    name: str
    label: str
    """The engine's name as its users write it, for sentences."""
    id_convention: str
    """The layer-id convention of `eagle3_tui.eagle.wiring` this engine's draft configs use."""
    ids_key: str
    """Where this engine reads a draft config's layer ids (the key a preset writes)."""
    process_titles: tuple[str, ...]
    """Title stems the engine's renamed children show in `ps` (match with startswith)."""
    reports_per_position: bool
    chain_only: bool
    """Drafts a chain only (steps = draft tokens - 1, topk 1): the configurations a sweep may serve."""
    default_port: int
    """The port a launch command without --port serves on."""
    info_path: str
    """What the console polls while attached: SGLang's `/server_info`, vLLM's `/version`."""
    running_metric: str
    """The `/metrics` gauge of the requests running now."""
    context_flag: str
    """The flag that sets the served context window (a fix's words: `--context-length`, `--max-model-len`)."""
    eager_flag: str
    """The flag that turns CUDA graphs off (`--disable-cuda-graph`, `--enforce-eager`): a bug isolated by comparing."""
    prefix_cache_off_flag: str
    """The flag that turns prefix caching off (`--disable-radix-cache`, `--no-enable-prefix-caching`)."""
    package: str
    """The package an operator installs to change release (`pip install PACKAGE==X`)."""

    @abc.abstractmethod
    def is_launch(self, argv: Sequence[str]) -> bool: ...

    @abc.abstractmethod
    def parse_launch(self, argv: Sequence[str]) -> Launch:
        """UserError with one sentence when argv is not this engine's launch or a flag is malformed."""

    @abc.abstractmethod
    def from_native(self, native: Any) -> Launch:
        """The seam's view of this engine's own parsed launch (its LaunchArgs, --config flags included)."""

    def serves(self, cfg: SpecConfig) -> bool:
        """Whether this engine can serve `cfg` (in SGLang's terms): a chain-only engine serves steps/1/steps+1."""
        return not self.chain_only or (cfg.topk == 1 and cfg.draft_tokens == cfg.steps + 1)

    @abc.abstractmethod
    def flags_text(self, cfg: SpecConfig) -> str:
        """The launch flags that serve `cfg`, as an operator types them (a fix's words)."""

    @abc.abstractmethod
    def with_draft_tokens(self, launch: Launch, n: int) -> Launch:
        """The launch with `n` tokens drafted per step (the preset), every other token unchanged."""

    @abc.abstractmethod
    def with_draft_model(self, launch: Launch, path: str | None) -> Launch:
        """The launch with another draft model (the preset), every other token unchanged."""

    @abc.abstractmethod
    def without_speculation(self, launch: Launch) -> Launch:
        """The launch serving the target alone (a baseline), every other token unchanged."""

    @abc.abstractmethod
    def log_feed(self) -> LogFeed: ...

    @abc.abstractmethod
    def metrics_feed(self, span: float = 30.0) -> MetricsFeed: ...

    @abc.abstractmethod
    def captures(self, draft_config: Mapping[str, Any], num_layers: int) -> Captures: ...

    @abc.abstractmethod
    def default_boundaries(self, num_layers: int) -> tuple[int, ...]: ...

    @abc.abstractmethod
    def ids_to_boundaries(self, ids: Sequence[int]) -> tuple[int, ...]: ...

    @abc.abstractmethod
    def boundaries_to_ids(self, boundaries: Sequence[int]) -> tuple[int, ...]: ...

    @abc.abstractmethod
    def uncaptured(self, boundaries: Sequence[int], num_layers: int) -> tuple[int, ...]:
        """Boundaries this engine's target never captures."""

    @abc.abstractmethod
    def config_with_boundaries(self, text: str, boundaries: Sequence[int] | None) -> str:
        """The draft config.json text that makes this engine capture `boundaries` (None: its default), with
        only the ids' text changed (a rewiring the operator confirms as a one-line diff)."""

    def release(self, info: Mapping[str, Any]) -> str | None:
        """The engine's release from the `info_path` answer."""
        v = info.get("version")
        return v if isinstance(v, str) and v else None

    def captured_boundaries(self, draft_config: Mapping[str, Any], num_layers: int) -> tuple[int, ...]:
        return self.captures(draft_config, num_layers).boundaries

    def failure_sentence(self, failures: Sequence[Any]) -> str:
        """The root cause among a start's failures (Failed events or the engine's own), in one line."""
        sentences = [f.sentence if isinstance(f, Failed) else self._sentence(f) for f in failures]
        for s in sentences:  # the first that is not a pointer to another ("See root cause above")
            if "root cause" not in s:
                return s
        return sentences[-1] if sentences else f"{self.name} stopped without saying why"

    def _sentence(self, failure: Any) -> str:
        return str(getattr(failure, "sentence", None) or getattr(failure, "last_line", None) or failure)
