"""What the server serves, from its launch command and the draft config: the server view's
speculative fields (effective steps/topk/draft tokens, layer ids, boundaries, the active preset).

Pure: SGLang's rules come from `sglang.launch`, the layer-id rules from `eagle.draft_config`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from eagle3_tui.eagle.draft_config import DraftConfig
from eagle3_tui.engines import Engine, Launch
from eagle3_tui.errors import UserError
from eagle3_tui.profile import Preset
from eagle3_tui.session.events import Served
from eagle3_tui.session.presets.catalog import NO_SPEC_PRESET
from eagle3_tui.sglang import launch

if TYPE_CHECKING:
    from eagle3_tui.sglang.installed import Answer

DISABLE_CUDA_GRAPH = "--disable-cuda-graph"


def parse_argv(argv: Sequence[str] | None) -> launch.LaunchArgs | None:
    """The parsed launch command, or None when there is none or it does not parse."""
    if argv is None:
        return None
    with contextlib.suppress(UserError):
        return launch.parse_launch(argv)
    return None


def layer_ids_and_boundaries(
    draft_text: str | None, num_layers: int | None
) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """The ids SGLang reads from the draft config, and the boundaries they mean for the target."""
    if draft_text is None:
        return None, None
    try:
        cfg = DraftConfig.parse(draft_text)
    except UserError:
        return None, None
    boundaries = None
    if num_layers:
        with contextlib.suppress(UserError):
            boundaries = cfg.served_boundaries(num_layers)
    return cfg.sglang_layer_ids, boundaries


def installed_boundaries(
    installed: Answer, ids: tuple[int, ...] | None, args: launch.LaunchArgs
) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """(prefill, decode when it differs) for these ids on the installed release; None when start-up fails."""
    a = installed if installed.layer_ids == ids else installed.evaluate(ids)
    if args.has_flag(DISABLE_CUDA_GRAPH):
        return (None, None) if a.fails_without_cuda_graph else (a.captures_without_cuda_graph, None)
    if a.fails or a.captures is None:
        return None, None
    return a.captures, (a.captures_cuda_graph if a.prefill_only else None)


def active_preset(presets: Sequence[Preset], ids: tuple[int, ...] | None, args: launch.LaunchArgs) -> str | None:
    """The preset the server runs: no-speculation, or the layer preset with the served ids."""
    if not args.speculative:
        return NO_SPEC_PRESET
    return next((p.name for p in presets if p.kind == "layers" and p.layer_ids == ids), None)


def served(
    args: launch.LaunchArgs,
    *,
    target_arch: str | None,
    draft_text: str | None,
    num_layers: int | None,
    presets: Sequence[Preset],
    installed: Answer | None = None,
) -> tuple[Served, launch.EffectiveSpec]:
    """The served fields for a parsed launch command (and SGLang's effective spec, for the telemetry).
    With the installed release known, its capture rule and auto-choice decide; else the generic rule."""
    auto = installed.auto_spec if installed is not None else None
    eff = launch.effective(args, target_arch=target_arch, auto=auto)
    ids, boundaries = layer_ids_and_boundaries(draft_text, num_layers)
    decode = None
    if installed is not None and (ids is not None or boundaries is not None):
        boundaries, decode = installed_boundaries(installed, ids, args)
    view = Served(
        speculative=eff.speculative,
        algorithm=eff.algorithm,
        steps=eff.steps,
        topk=eff.topk,
        draft_tokens=eff.draft_tokens,
        requested_draft_tokens=args.num_draft_tokens,
        adjusted=tuple(eff.adjusted),
        layer_ids=ids,
        boundaries=boundaries,
        active_preset=active_preset(presets, ids, args),
        decode_boundaries=decode,
    )
    return view, eff


def served_by_engine(
    engine: Engine, launch_: Launch, *, draft_text: str | None, num_layers: int | None, presets: Sequence[Preset]
) -> Served:
    """The served fields of an engine whose flags need no effective-value rules (vLLM): `num_speculative_tokens`
    drafted per step in one chain (topk 1), which SGLang's terms (`SpecConfig`, the check's predictions, the
    cost model) call steps = n and draft tokens = n + 1 (the tokens verified per step); the draft config's ids
    and boundaries by the engine's own reading (`Engine.captures`)."""
    import json

    ids: tuple[int, ...] | None = None
    boundaries: tuple[int, ...] | None = None
    if draft_text is not None and num_layers:
        with contextlib.suppress(ValueError, UserError, TypeError, AttributeError):
            cfg = json.loads(draft_text)
            if isinstance(cfg, dict):
                cap = engine.captures(cfg, num_layers)
                ids, boundaries = cap.ids, cap.boundaries
    speculative = launch_.method is not None
    steps = launch_.draft_tokens_per_step
    preset = NO_SPEC_PRESET if not speculative else next(
        (p.name for p in presets if p.kind == "layers" and p.boundaries is not None and p.boundaries == boundaries),
        None)
    verified = steps + 1 if steps is not None else None
    return Served(speculative=speculative, algorithm=launch_.method, steps=steps, topk=1 if speculative else None,
                  draft_tokens=verified, requested_draft_tokens=verified, adjusted=(), layer_ids=ids,
                  boundaries=boundaries, active_preset=preset)
