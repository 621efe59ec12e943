"""vLLM behind the engine seam: thin adapters over `eagle3_tui.vllm`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eagle3_tui.eagle import draft_config
from eagle3_tui.eagle.spec_config import SpecConfig
from eagle3_tui.engines.base import (
    Captures,
    Engine,
    EngineEvent,
    Failed,
    Launch,
    LogFeed,
    MetricsFeed,
    Numerics,
    Ready,
    SpecStats,
    Started,
)
from eagle3_tui.vllm import capture, logline, metrics, procs
from eagle3_tui.vllm import launch as vl

NAME = "vllm"


def _numerics(args: vl.LaunchArgs) -> Numerics:
    return Numerics(quantization=args.flag_value("--quantization", "-q"), dtype=args.flag_value("--dtype"),
                    kv_cache_dtype=args.flag_value("--kv-cache-dtype"), context_length=args.max_model_len)


def _launch(args: vl.LaunchArgs) -> Launch:
    return Launch(
        engine=NAME,
        argv=args.argv,
        model=args.model,
        draft_model=args.draft_model,
        method=args.method,
        draft_tokens_per_step=args.num_speculative_tokens,
        port=args.port,
        host=args.host,
        native=args,
        numerics=_numerics(args),
    )


def _event(ev: logline.LogEvent) -> EngineEvent | None:
    if isinstance(ev, logline.SpecDecodingStats):
        return SpecStats(NAME, "log", ev.timestamp, ev.mean_acceptance_length, ev.per_position,
                         ev.draft_acceptance_rate, None)
    if isinstance(ev, logline.EngineStats):
        return SpecStats(NAME, "log", ev.timestamp, None, (), None, ev.generation_throughput, ev.running, ev.waiting)
    if isinstance(ev, logline.ServerReady):
        return Ready(NAME, ev.prefix.timestamp, ev.line)
    if isinstance(ev, logline.Failure):
        return Failed(NAME, ev.kind, ev.sentence, ev.line, ev.traceback)
    if isinstance(ev, logline.StartArgs) and ev.args is not None:
        return Started(NAME, ev.args, ev.speculative_config or {}, ev.line)
    return None


class _Log(LogFeed):
    def __init__(self) -> None:
        self._reader = logline.LogReader()

    def feed(self, line: str) -> list[EngineEvent]:
        return [e for e in (_event(ev) for ev in self._reader.feed(line)) if e is not None]

    def flush(self) -> list[EngineEvent]:
        return [e for e in (_event(ev) for ev in self._reader.flush()) if e is not None]

    @property
    def pending(self) -> object | None:
        return self._reader.pending


class _Metrics(MetricsFeed):
    """vLLM exports counters: acceptance is a difference over the window (`vllm.metrics.SpecWindow`)."""

    def __init__(self, span: float) -> None:
        self._window = metrics.SpecWindow(span)

    @property
    def restarts(self) -> int:  # type: ignore[override]
        return self._window.restarts

    def update(self, t: float, text: str) -> SpecStats | None:
        w = self._window.add(t, metrics.read_counters(text))
        if w is None or w.drafts <= 0:
            return None
        return SpecStats(
            NAME, "metrics", t, w.mean_acceptance_length, w.per_position, w.draft_acceptance_rate,
            w.generation_throughput,
            int(w.running) if w.running is not None else None, int(w.waiting) if w.waiting is not None else None,
        )


class VLLMEngine(Engine):
    name = NAME
    label = "vLLM"
    running_metric = metrics.RUNNING
    context_flag = "--max-model-len"
    eager_flag = "--enforce-eager"
    prefix_cache_off_flag = "--no-enable-prefix-caching"
    package = "vllm"
    id_convention = "vllm"
    ids_key = capture.TOP_LEVEL
    process_titles = procs.process_titles()
    default_port = 8000
    info_path = "/version"
    reports_per_position = True
    chain_only = True

    def is_launch(self, argv: Sequence[str]) -> bool:
        return vl.is_launch_command(argv)

    def parse_launch(self, argv: Sequence[str]) -> Launch:
        return _launch(vl.parse_launch(argv))

    def from_native(self, native: Any) -> Launch:
        return _launch(native)

    def flags_text(self, cfg: SpecConfig) -> str:
        return f"num_speculative_tokens {cfg.steps} in --speculative-config"

    def with_draft_tokens(self, launch: Launch, n: int) -> Launch:
        return _launch(vl.with_flags(launch.native, num_speculative_tokens=n))

    def with_draft_model(self, launch: Launch, path: str | None) -> Launch:
        return _launch(vl.with_flags(launch.native, draft_model=path))

    def without_speculation(self, launch: Launch) -> Launch:
        return _launch(vl.with_flags(launch.native, speculative_config=None))

    def log_feed(self) -> LogFeed:
        return _Log()

    def metrics_feed(self, span: float = 30.0) -> MetricsFeed:
        return _Metrics(span)

    def captures(self, draft_config: Mapping[str, Any], num_layers: int) -> Captures:
        aux = capture.aux_layers(draft_config, num_layers)
        ids = aux.ids if aux.source != capture.DEFAULT else None
        return Captures(ids, aux.source, aux.boundaries, aux.ignored)

    def default_boundaries(self, num_layers: int) -> tuple[int, ...]:
        return capture.ids_to_boundaries(capture.default_ids(num_layers))

    def ids_to_boundaries(self, ids: Sequence[int]) -> tuple[int, ...]:
        return capture.ids_to_boundaries(ids)

    def boundaries_to_ids(self, boundaries: Sequence[int]) -> tuple[int, ...]:
        return capture.boundaries_to_ids(boundaries)

    def uncaptured(self, boundaries: Sequence[int], num_layers: int) -> tuple[int, ...]:
        return capture.uncaptured(boundaries, num_layers)

    def config_with_boundaries(self, text: str, boundaries: Sequence[int] | None) -> str:
        # the top-level key: vLLM reads it before eagle_config's, and speculators writes it
        ids = None if boundaries is None else capture.boundaries_to_ids(boundaries)
        return draft_config.set_top_level_layer_ids(text, ids)
