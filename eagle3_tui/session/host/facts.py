"""The doctor's `Facts` from a plain snapshot of what the session knows.

`FactsSnapshot` is data only (the session fills it; a test writes one by hand), and `build_facts` is a
pure function over it: this module never sees the `Session`.
"""

from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from eagle3_tui.doctor import Facts
from eagle3_tui.eagle.accuracy import predicted_accept_len
from eagle3_tui.eagle.draft_config import DraftConfig
from eagle3_tui.eagle.spec_config import SpecConfig
from eagle3_tui.engines import get_engine
from eagle3_tui.errors import UserError
from eagle3_tui.session.events import ServerView
from eagle3_tui.session.host.probe import TargetInfo, installed_for_version
from eagle3_tui.sglang import launch

if TYPE_CHECKING:
    from eagle3_tui.eagle.accuracy import CheckReport
    from eagle3_tui.eagle.chat_template import TrainedTemplate
    from eagle3_tui.sglang.client import BenchResult
    from eagle3_tui.sglang.installed import Answer, Release
    from eagle3_tui.telemetry.drift import AcceptSlice
    from eagle3_tui.telemetry.metrics import MetricsSummary

LIVE_WINDOW_S = 120.0
"""The live numbers the doctor compares: means over the newest two minutes of the log."""


@dataclass(frozen=True)
class FactsSnapshot:
    """Everything `build_facts` reads, at one instant."""

    server: ServerView = field(default_factory=ServerView)
    target: TargetInfo = field(default_factory=TargetInfo)
    launch_argv: tuple[str, ...] | None = None
    """The launch command of the server attached to (or the profile's, when none runs)."""
    server_info: dict[str, Any] | None = None
    data_slots: tuple[int, ...] | None = None
    data_glob: str | None = None
    data_convention: str | None = None
    """Which slots the trainer fed fc, read from the data's layout (None: speculators' [:-1] is assumed)."""
    live: MetricsSummary | None = None
    """The telemetry summary over `LIVE_WINDOW_S`."""
    accept_points: int = 0
    """How many decode lines carried an accept length (0: this SGLang logs none)."""
    last_bench: BenchResult | None = None
    check: CheckReport | None = None
    log_warnings: tuple[str, ...] = ()
    measured: tuple[Any, ...] = ()
    """doctor.advice.Measured per benchmarked configuration on the served boundaries (from the ledger)."""
    per_position: tuple[float, ...] = ()
    """The newest acceptance rate per draft position (vLLM's)."""
    launch_env: dict[str, str] | None = None
    """The server's environment as its launch spec keeps it (SGLANG_*, NCCL_*, HF_*, CUDA_VISIBLE_DEVICES)."""
    trained_template: TrainedTemplate | None = None
    """The training data's chat template (its data_config.json), when the data was read."""
    baseline_batch: int | None = None
    """The newest baseline benchmark's concurrency (the ledger's)."""
    bench_format: tuple[str, str] | None = None
    """The latest benchmark's prompt format ("chat" or "raw") and where that was seen; None: none known."""
    accept_history: tuple[AcceptSlice, ...] = ()
    """Accept length and running requests in ten-minute slices over the current run (telemetry's drift)."""


def build_facts(snap: FactsSnapshot) -> Facts:
    """The snapshot as the doctor's Facts (a fact that cannot be read stays None)."""
    f = Facts()
    t = snap.target
    s = snap.server
    if t.draft_text is not None:
        with contextlib.suppress(UserError):
            f.draft_config = DraftConfig.parse(t.draft_text, source=t.draft_config_path or "draft config")
        f.draft_config_path = t.draft_config_path
    f.server_env = dict(snap.launch_env) if snap.launch_env is not None else None
    if s.engine not in (None, "sglang"):
        _engine_facts(f, snap)
    else:
        f.installed = installed_answer(snap, f.draft_config)
        f.release = installed_release(snap, f.installed)
    if snap.launch_argv is not None:
        _launch_facts(f, snap)
    f.server_args = snap.server_info
    f.target_num_layers = t.num_layers
    f.target_hidden_size = t.hidden_size
    f.target_arch = t.arch
    f.target_rope_theta = t.target_rope_theta
    f.target_config_path = t.target_config_path
    f.target_config = t.target_config
    f.target_quant_files = t.target_quant_files
    f.target_rotation_files = t.target_rotation_files
    f.checkpoint_path = t.checkpoint_path
    f.checkpoint_tensors = t.checkpoint_tensors
    f.embed_capture_supported = t.embed_capture
    f.embed_capture_evidence = t.embed_capture_source or None
    if f.installed is not None and f.embed_capture_supported is None:
        f.embed_capture_supported = f.installed.embed_capture
        f.embed_capture_evidence = f"SGLang {f.installed.version or '?'} ({f.installed.source})"
    if snap.data_slots:
        f.data_slot_boundaries = tuple(snap.data_slots)
        f.training_convention = snap.data_convention or "[:-1]"
        f.data_source = snap.data_glob or "profile data_slots"
    _live(f, snap)
    served = None
    if s.speculative and s.steps is not None and s.topk is not None and s.draft_tokens is not None:
        served = SpecConfig(s.steps, s.topk, s.draft_tokens)
    # decode's boundaries where graphed decode replays others (ids reaching prefill only): they decide it
    f.served_config = served
    f.predicted_accept_len = predicted_accept_len(snap.check, s.decode_boundaries or s.boundaries, served)
    _advice(f, snap)
    f.trained_template = snap.trained_template
    f.served_template = t.chat_template
    f.served_template_read = t.tokenizer_read
    if snap.bench_format is not None:
        f.bench_prompt_format, f.bench_source = snap.bench_format
    f.accept_history = tuple(snap.accept_history)
    bench = snap.last_bench
    if bench is not None and not bench.baseline:
        f.accept_by_set = tuple(bench.sets)
        f.published_accept_len, f.published_source = bench.published_accept_len, bench.published_source
    f.server_info_accept_len = s.accept_len_server
    f.log_warnings = tuple(snap.log_warnings)
    f.log_path = s.log_path
    return f


def _launch_facts(f: Facts, snap: FactsSnapshot) -> None:
    """The launch command through its engine's own parser (the seam's `Launch`: numerics and context window in
    that engine's flags); SGLang's parsed form also as `launch`, which the SGLang-only rules read."""
    assert snap.launch_argv is not None
    s = snap.server
    with contextlib.suppress(UserError):
        f.served_launch = get_engine(f.engine).parse_launch(snap.launch_argv)
    if isinstance(getattr(f.served_launch, "native", None), launch.LaunchArgs):
        f.launch = f.served_launch.native  # type: ignore[union-attr]
        auto = f.installed.auto_spec if f.installed is not None else None
        with contextlib.suppress(UserError):
            f.effective = launch.effective(f.launch, target_arch=snap.target.arch, auto=auto)
    f.launch_source = f"process {s.pid}" if s.pid else "launch command (profile)"


def _engine_facts(f: Facts, snap: FactsSnapshot) -> None:
    """What the doctor reads of another engine than SGLang (vLLM): its name, release and device, what it
    captures (the session's reading through `Engine.captures`), its per-position acceptance."""
    s = snap.server
    f.engine = s.engine or "sglang"
    f.engine_release = s.version
    env = snap.launch_env or {}
    cpu = (s.version or "").endswith("+cpu") or any(k.startswith("VLLM_CPU_") for k in env)
    f.engine_device = "cpu" if cpu else None
    f.served_boundaries = s.boundaries
    f.live_per_position = tuple(snap.per_position)


def installed_answer(snap: FactsSnapshot, draft: DraftConfig | None) -> Answer | None:
    """The installed SGLang's answer for the draft config's ids: read from the server's source, else the
    version table for `/server_info`'s version ("assumed from version X" in its evidence)."""
    base = base_installed(snap.target, snap.server.version, snap.server_info)
    if base is None:
        return None
    ids = draft.sglang_layer_ids if draft is not None else None
    return base if base.layer_ids == ids else base.evaluate(ids)


def installed_release(snap: FactsSnapshot, answer: Answer | None) -> Release | None:
    """The installed release without a target: the answer's, else the version table for the server's version
    (the flag and speculative-path rules need no architecture)."""
    if answer is not None and answer.release is not None:
        return answer.release
    if not snap.target.installed_fallback:
        return None
    reported = (snap.server_info or {}).get("version")
    version = snap.server.version or (reported if isinstance(reported, str) else None)
    return _table_release(version) if version else None


@functools.lru_cache(maxsize=16)
def _table_release(version: str) -> Release:
    from eagle3_tui.sglang.installed import read_release

    return read_release(None, version=version)


def base_installed(t: TargetInfo, version: str | None, server_info: dict[str, Any] | None) -> Answer | None:
    """The installed answer with no id key: the server's source read, else the table for its version."""
    if t.installed is not None or not t.installed_fallback:
        return t.installed
    info = server_info or {}
    reported = info.get("version")
    return _table_answer(version or (reported if isinstance(reported, str) else None), t.arch, t.num_layers)


@functools.lru_cache(maxsize=16)
def _table_answer(version: str | None, arch: str | None, num_layers: int | None) -> Answer | None:
    return installed_for_version(version, arch, num_layers)


def _advice(f: Facts, snap: FactsSnapshot) -> None:
    """What doctor/advice.py reads: the check's grid and per-step acceptance on the served wiring, and
    the measured configurations."""
    f.measured_configs = tuple(snap.measured)
    live = snap.live
    if live is not None and live.last.get("accept_len") and live.last.get("accept_rate_sglang") is not None:
        from eagle3_tui.telemetry.metrics import RATE_DEFINITIONS, guess_rate_definition

        pair = (float(live.last["accept_len"] or 0.0), float(live.last["accept_rate_sglang"] or 0.0))
        guess = guess_rate_definition([pair], num_draft_tokens=snap.server.draft_tokens)
        if guess is not None and guess.definition in RATE_DEFINITIONS:
            f.accept_rate_definition = RATE_DEFINITIONS[guess.definition]
    rep = snap.check
    if rep is None:
        return
    b = snap.server.decode_boundaries or snap.server.boundaries
    hit = rep.served_wiring(b)
    if hit is None:
        return
    f.step_accept = tuple(hit.step_accept)
    f.predictions = tuple(rep.served_predictions(b))


def _live(f: Facts, snap: FactsSnapshot) -> None:
    """Live accept length and tok/s: the log's, a speculative benchmark's tok/s over them."""
    live = snap.live
    if live is not None:
        f.live_accept_len = live.accept_len
        f.live_gen_tps = live.gen_tps
        f.baseline_tps = live.baseline_tps
        f.log_decode_lines = live.decode_lines
        if live.decode_lines:
            f.log_has_accept_stats = snap.accept_points > 0
    if live is not None:
        f.running_reqs_mean = live.means.get("running_req")
        f.running_reqs_peak = live.peaks.get("running_req")
    f.baseline_batch = snap.baseline_batch
    bench = snap.last_bench
    if bench is not None:
        f.bench_concurrency = bench.concurrency
    if bench is not None and not bench.baseline and snap.server.speculative:
        f.live_gen_tps = bench.output_tps
        f.live_source = "benchmark"
        if bench.accept_len is not None and f.live_accept_len is None:
            f.live_accept_len = bench.accept_len
