"""SGLang behind the engine seam: thin adapters over `eagle3_tui.sglang` and `eagle3_tui.eagle.wiring`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from eagle3_tui.eagle import draft_config, wiring
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
from eagle3_tui.sglang import launch as sl
from eagle3_tui.sglang import logline, promtext

NAME = "sglang"
# SGLang's children rename themselves `sglang::NAME` (srt/managers/scheduler.py, detokenizer_manager.py,
# data_parallel_controller.py, multi_tokenizer_mixin.py; 0.4.9-0.5.23); session/host/discovery.py reads them.
PROCESS_TITLES = (
    "sglang::scheduler",
    "sglang::detokenizer",
    "sglang::data_parallel_controller",
    "sglang::tokenizer_worker",
)


def _numerics(args: sl.LaunchArgs) -> Numerics:
    ctx = args.flag_value("--context-length")
    return Numerics(quantization=args.flag_value("--quantization"), dtype=args.flag_value("--dtype"),
                    kv_cache_dtype=args.flag_value("--kv-cache-dtype"),
                    context_length=int(ctx) if ctx is not None and ctx.isdigit() else None)


def _launch(args: sl.LaunchArgs) -> Launch:
    nodes, rank, head = args.nodes()
    return Launch(
        engine=NAME,
        argv=args.argv,
        model=args.model_path,
        draft_model=args.draft_model_path,
        method=args.algorithm,
        draft_tokens_per_step=args.num_steps,
        port=args.port,
        host=args.host,
        native=args,
        nodes=nodes,
        node_rank=rank,
        dist_init=head,
        numerics=_numerics(args),
    )


def _event(ev: logline.LogEvent) -> EngineEvent | None:
    if isinstance(ev, logline.DecodeStats):
        if ev.accept_len is None and ev.gen_throughput is None:
            return None
        return SpecStats(NAME, "log", ev.timestamp, ev.accept_len, (), ev.accept_rate, ev.gen_throughput,
                         ev.running_req, ev.queue_req)
    if isinstance(ev, logline.ServerReady):
        return Ready(NAME, ev.timestamp, ev.line)
    if isinstance(ev, logline.Failure):
        return Failed(NAME, ev.kind, ev.last_line, ev.line, ev.traceback)
    if isinstance(ev, logline.ServerArgs):
        spec = {k: v for k, v in ev.args.items() if k.startswith("speculative_")}
        return Started(NAME, dict(ev.args), spec, ev.line)
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


def _mean(values: dict[str, float]) -> float | None:
    return sum(values.values()) / len(values) if values else None


class _Metrics(MetricsFeed):
    """SGLang exports gauges (the scheduler's last stat line): each read stands alone, nothing to window."""

    def __init__(self) -> None:
        self.restarts = 0

    def update(self, t: float, text: str) -> SpecStats | None:
        samples = promtext.read_samples_lenient(text)
        accept = _mean(promtext.by_rank(samples, promtext.SPEC_ACCEPT_LENGTH))
        if accept is None:
            return None
        running = _mean(promtext.by_rank(samples, promtext.NUM_RUNNING))
        queue = _mean(promtext.by_rank(samples, promtext.NUM_QUEUE))
        return SpecStats(
            NAME, "metrics", t, accept, (), _mean(promtext.by_rank(samples, promtext.SPEC_ACCEPT_RATE)),
            _mean(promtext.by_rank(samples, promtext.GEN_THROUGHPUT)),
            int(running) if running is not None else None, int(queue) if queue is not None else None,
        )


class SGLangEngine(Engine):
    name = NAME
    label = "SGLang"
    running_metric = promtext.NUM_RUNNING
    context_flag = "--context-length"
    eager_flag = "--disable-cuda-graph"
    prefix_cache_off_flag = "--disable-radix-cache"
    package = "sglang"
    id_convention = "sglang"
    ids_key = "eagle_config.eagle_aux_hidden_state_layer_ids"
    process_titles = PROCESS_TITLES
    default_port = 30000
    info_path = "/server_info"
    reports_per_position = False
    chain_only = False

    def is_launch(self, argv: Sequence[str]) -> bool:
        return sl.is_launch_command(argv)

    def parse_launch(self, argv: Sequence[str]) -> Launch:
        return _launch(sl.parse_launch(argv))

    def from_native(self, native: Any) -> Launch:
        return _launch(native)

    def flags_text(self, cfg: SpecConfig) -> str:
        return (f"--speculative-num-steps {cfg.steps} --speculative-eagle-topk {cfg.topk} "
                f"--speculative-num-draft-tokens {cfg.draft_tokens}")

    def with_draft_tokens(self, launch: Launch, n: int) -> Launch:
        args: sl.LaunchArgs = launch.native
        changes: dict[str, object] = {"num_steps": n}
        if args.eagle_topk in (None, 1) and args.num_draft_tokens is not None:
            changes["num_draft_tokens"] = n + 1  # SGLang forces steps + 1 with topk 1 anyway
        return _launch(sl.with_flags(args, **changes))

    def with_draft_model(self, launch: Launch, path: str | None) -> Launch:
        return _launch(sl.with_flags(launch.native, draft_model_path=path))

    def without_speculation(self, launch: Launch) -> Launch:
        return _launch(sl.with_flags(launch.native, algorithm=None, draft_model_path=None, num_steps=None,
                                     eagle_topk=None, num_draft_tokens=None))

    def log_feed(self) -> LogFeed:
        return _Log()

    def metrics_feed(self, span: float = 30.0) -> MetricsFeed:
        return _Metrics()

    def captures(self, draft_config: Mapping[str, Any], num_layers: int) -> Captures:
        ids, read = wiring.config_layer_ids(dict(draft_config))
        if ids is not None and read:
            return Captures(ids, self.ids_key, wiring.sglang_ids_to_boundaries(ids, num_layers))
        ignored = ("eagle_aux_hidden_state_layer_ids",) if ids is not None else ()
        return Captures(None, "default", wiring.sglang_default_boundaries(num_layers), ignored)

    def default_boundaries(self, num_layers: int) -> tuple[int, ...]:
        return wiring.sglang_default_boundaries(num_layers)

    def ids_to_boundaries(self, ids: Sequence[int]) -> tuple[int, ...]:
        return tuple(sorted(set(wiring.ids_to_boundaries("sglang", ids))))

    def boundaries_to_ids(self, boundaries: Sequence[int]) -> tuple[int, ...]:
        return wiring.boundaries_to_sglang_ids(boundaries)

    def uncaptured(self, boundaries: Sequence[int], num_layers: int) -> tuple[int, ...]:
        return wiring.sglang_uncaptured(boundaries, num_layers)

    def config_with_boundaries(self, text: str, boundaries: Sequence[int] | None) -> str:
        ids = None if boundaries is None else wiring.boundaries_to_sglang_ids(boundaries)
        return draft_config.set_layer_ids(text, ids)
