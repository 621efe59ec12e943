"""Presets for an engine other than SGLang (vLLM), in that engine's own terms, through the engine seam.

SGLang's presets (presets.py) carry SGLang's ids and are checked with its release table. Here a layer
preset is its boundaries: the draft config.json gets the ids the engine reads (`Engine.config_with_boundaries`:
for vLLM the top-level `eagle_aux_hidden_state_layer_ids`, which are the boundaries themselves), and a flag
preset changes the engine's speculative settings (`Engine.with_draft_tokens`, `Engine.with_draft_model`;
`speculative_config: None` serves without speculation). Both plans end in the same `ApplyPlan` the one
apply, restart and rollback path takes. Pure.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import replace

from eagle3_tui.eagle import wiring
from eagle3_tui.eagle.draft_config import json_diff
from eagle3_tui.engines import Engine, Launch
from eagle3_tui.errors import UserError
from eagle3_tui.profile import Preset
from eagle3_tui.session.presets.catalog import (
    LAUNCH_COMMAND_PATH,
    NO_SPEC_PRESET,
    TRAIN_PRESET,
    ApplyPlan,
    launch_diff,
    sha256_text,
)

NUM_TOKENS_KEY = "num_speculative_tokens"
DRAFT_KEY = "draft_model"
SPEC_CONFIG_KEY = "speculative_config"


def default_preset_name(engine: Engine) -> str:
    return f"{engine.name}-default"


def builtin_presets(engine: Engine, *, data_slots: Sequence[int] | None, current: Launch | None) -> list[Preset]:
    """`<engine>-default` (no ids: the engine's own default), `train-[:-1]` (the data's first slots),
    `no-speculation`, and `draft-tokens=N` for one token fewer and one more than served."""
    out = [Preset(default_preset_name(engine), "layers", None, builtin=True,
                  description=f"no layer-id key: {engine.name} captures its default wiring")]
    if data_slots and len(data_slots) >= 2:
        bounds = tuple(data_slots[:-1])
        out.append(Preset(TRAIN_PRESET, "layers", engine.boundaries_to_ids(bounds), builtin=True,
                          description=f"what the trainer fed fc: the data's first slots [:-1] = "
                          f"{wiring.format_boundaries(bounds)}"))
    out.append(Preset(NO_SPEC_PRESET, "flags", flags={SPEC_CONFIG_KEY: None}, builtin=True,
                      description="the server without speculation, for a baseline benchmark"))
    n = current.draft_tokens_per_step if current is not None else None
    if n is not None:
        for k in (n - 1, n + 1):
            if k >= 1:
                out.append(Preset(f"draft-tokens={k}", "flags", flags={NUM_TOKENS_KEY: k}, builtin=True,
                                  description=f"{k} tokens drafted per step (serving {n})"))
    return out


def with_boundaries(engine: Engine, p: Preset, num_layers: int | None) -> Preset:
    """A layer preset with what its ids make this engine capture on the target."""
    if p.kind != "layers" or num_layers is None:
        return p
    b = engine.default_boundaries(num_layers) if p.layer_ids is None else engine.ids_to_boundaries(p.layer_ids)
    return replace(p, boundaries=b)


def plan_layers(
    engine: Engine, preset: Preset, *, path: str, before: str, num_layers: int | None, fc_num_aux: int | None
) -> ApplyPlan:
    """The draft config with the ids that make the engine capture the preset's boundaries; checked: every
    boundary reachable on the target, as many states as the draft's fc takes (after the engine's
    de-duplication)."""
    try:
        cfg = json.loads(before)
    except ValueError as err:
        raise UserError(f"{path} is not valid JSON ({err})") from None
    if not isinstance(cfg, dict):
        raise UserError(f"{path} is not a JSON object")
    ids = preset.layer_ids
    target = None if ids is None else engine.ids_to_boundaries(ids)
    after = engine.config_with_boundaries(before, target)
    problems: list[str] = []
    warnings: list[str] = []
    if num_layers is None:
        warnings.append("the target's number of layers is unknown, so the boundaries were not checked")
    else:
        got = engine.captures(json.loads(after), num_layers)
        never = engine.uncaptured(got.boundaries, num_layers)
        if never:
            problems.append(f"{engine.name} never captures boundaries {wiring.format_boundaries(never)} on a "
                            f"{num_layers}-layer target")
        if fc_num_aux is not None and len(got.boundaries) != fc_num_aux:
            problems.append(f"{engine.name} would capture {len(got.boundaries)} hidden states "
                            f"({wiring.format_boundaries(got.boundaries)}, repeated ids count once), but the "
                            f"draft's fc takes {fc_num_aux}")
        warnings.append(f"the draft will receive boundaries {wiring.format_boundaries(got.boundaries)}")
        if got.ignored:
            warnings.append(f"{engine.name} ignores {', '.join(got.ignored)} in this config")
    return ApplyPlan(preset, path, before, after, json_diff(before, after, path=path), problems, warnings,
                     sha256_text(before))


def plan_flags(engine: Engine, preset: Preset, *, argv: Sequence[str]) -> ApplyPlan:
    """The launch command with the preset's speculative settings, through the engine's own rewriting."""
    launch = engine.parse_launch(argv)
    for key, value in preset.flags.items():
        name = str(key).lstrip("-").replace("-", "_")
        if name == NUM_TOKENS_KEY:
            if isinstance(value, str) and value.isdigit():
                value = int(value)
            if not isinstance(value, int) or isinstance(value, bool):
                raise UserError(f"preset {preset.name!r}: {NUM_TOKENS_KEY} wants a whole number, not {value!r}")
            launch = engine.with_draft_tokens(launch, value)
        elif name in (DRAFT_KEY, "draft_model_path"):
            launch = engine.with_draft_model(launch, None if value is None else str(value))
        elif name == SPEC_CONFIG_KEY and value is None:
            launch = engine.without_speculation(launch)
        else:
            raise UserError(f"preset {preset.name!r}: {engine.name} presets change {NUM_TOKENS_KEY}, "
                            f"{DRAFT_KEY} or {SPEC_CONFIG_KEY} (None), not {key!r}")
    after_argv = list(launch.argv)
    warnings: list[str] = []
    if launch.method is None:
        warnings.append("the server will run without speculation")
    else:
        warnings.append(f"{launch.draft_tokens_per_step} tokens drafted per step")
    before = shlex.join(argv) + "\n"
    after = shlex.join(after_argv) + "\n"
    return ApplyPlan(preset, LAUNCH_COMMAND_PATH, before, after, launch_diff(argv, after_argv), [], warnings,
                     sha256_text(before))
