"""Presets: the built-in ones, what they mean for the attached target, and the plan to apply one.

A plan is computed before anything changes: the new draft config text (or launch command), the
diff, the problems that block it and the warnings that do not. Pure functions over texts and facts.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from eagle3_tui.eagle import wiring
from eagle3_tui.eagle.draft_config import DraftConfig, json_diff, set_layer_ids, validate_layer_ids
from eagle3_tui.eagle.spec_config import SpecConfig, prediction_grid
from eagle3_tui.errors import UserError
from eagle3_tui.profile import Preset
from eagle3_tui.sglang import launch

if TYPE_CHECKING:
    from eagle3_tui.sglang.installed import Answer

DEFAULT_PRESET = "sglang-default"
TRAIN_PRESET = "train-[:-1]"
NO_SPEC_PRESET = "no-speculation"
NO_GRAPH_PRESET = "disable-cuda-graph"
DISABLE_CUDA_GRAPH = "--disable-cuda-graph"
LAUNCH_COMMAND_PATH = "launch command"

_SPEC_FLAGS = (
    "speculative-algorithm",
    "speculative-draft-model-path",
    "speculative-num-steps",
    "speculative-eagle-topk",
    "speculative-num-draft-tokens",
)


@dataclass(frozen=True)
class ApplyPlan:
    """What applying `preset` would change. `problems` block it; `warnings` are shown."""

    preset: Preset
    path: str
    before: str
    after: str
    diff: str
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    before_sha256: str = ""

    @property
    def kind(self) -> str:
        return self.preset.kind

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def changes(self) -> bool:
        return self.before != self.after


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def ids_for(boundaries: Sequence[int], installed: Answer | None) -> tuple[int, ...]:
    """The draft-config ids that make the installed release capture `boundaries` (its own shift rule);
    the generic +1 rule when the release is unknown or no id list does (the plan then says why)."""
    if installed is not None:
        got = installed.ids_for(boundaries)
        if got is not None:
            return got
    return wiring.boundaries_to_sglang_ids(boundaries)


def builtin_presets(
    *, data_slots: Sequence[int] | None, current: launch.LaunchArgs | None = None, installed: Answer | None = None
) -> list[Preset]:
    """`sglang-default` (key absent), `train-[:-1]` (needs the data's slot boundaries, written as the
    installed release needs them), `no-speculation` (for baselines), `disable-cuda-graph` where graphed
    decode would replay other boundaries than prefill, and, when topk 1 overrides the draft tokens,
    `steps=draft-1`."""
    out = [
        Preset(DEFAULT_PRESET, "layers", None, builtin=True,
               description="no layer-id key: SGLang captures its default boundaries 2, N/2, N-3"),
    ]
    train_ids: tuple[int, ...] | None = None
    if data_slots and len(data_slots) >= 2:
        bounds = tuple(data_slots[:-1])
        train_ids = ids_for(bounds, installed)
        out.append(
            Preset(TRAIN_PRESET, "layers", train_ids, builtin=True,
                   description=f"what the trainer fed fc: the data's first slots [:-1] = {wiring.format_boundaries(bounds)}")
        )
    out.append(
        Preset(NO_SPEC_PRESET, "flags", flags=dict.fromkeys(_SPEC_FLAGS), builtin=True,
               description="the server without speculation, for a baseline benchmark")
    )
    if installed is not None and current is not None and not current.has_flag(DISABLE_CUDA_GRAPH):
        if installed.prefill_only or (train_ids is not None and installed.evaluate(train_ids).prefill_only):
            out.append(
                # keyed without dashes, as every flag preset is (the Config pane and `presets` add them)
                Preset(NO_GRAPH_PRESET, "flags", flags={DISABLE_CUDA_GRAPH.removeprefix("--"): True}, builtin=True,
                       description=f"SGLang {installed.version or '?'} captures the decode CUDA graphs before the "
                       "draft's ids: without graphs every step gets the ids (or upgrade to 0.5.11+)")
            )
    if current is not None and current.eagle_topk == 1 and current.num_steps and current.num_draft_tokens:
        if current.num_draft_tokens != current.num_steps + 1:
            steps = current.num_draft_tokens - 1
            out.append(
                Preset(f"steps={steps}", "flags", flags={"speculative-num-steps": steps}, builtin=True,
                       description=f"topk 1 forces draft tokens = steps + 1: steps {steps} gives the "
                       f"{current.num_draft_tokens} draft tokens asked for")
            )
    return out


def all_presets(
    builtins: Sequence[Preset], user: Sequence[Preset], num_layers: int | None, installed: Answer | None = None
) -> list[Preset]:
    """Built-ins then the profile's (a user preset with a built-in's name replaces it), with boundaries."""
    by_name: dict[str, Preset] = {p.name: p for p in builtins}
    for p in user:
        by_name[p.name] = p
    return [with_boundaries(p, num_layers, installed) for p in by_name.values()]


def with_boundaries(p: Preset, num_layers: int | None, installed: Answer | None = None) -> Preset:
    """The boundaries prefill captures for the preset's ids: the installed release's rule when known
    (nothing when it fails), else the generic +1 rule."""
    if p.kind != "layers" or num_layers is None:
        return p
    if installed is not None and installed.num_layers == num_layers:
        got = installed.evaluate(p.layer_ids)
        return replace(p, boundaries=got.captures if got.fails is None else None)
    return replace(p, boundaries=wiring.sglang_ids_to_boundaries(p.layer_ids, num_layers))


def find_preset(presets: Sequence[Preset], name: str) -> Preset:
    for p in presets:
        if p.name == name:
            return p
    raise UserError(f"no preset named {name!r} (have: {', '.join(p.name for p in presets)})")


def plan_layers(
    preset: Preset,
    *,
    path: str,
    before: str,
    num_layers: int | None,
    embed_capture: bool | None,
    fc_num_aux: int | None,
    installed: Answer | None = None,
) -> ApplyPlan:
    """The draft config with the preset's ids, validated: ids in range, fc width, -1 only with the patch;
    with the installed release known, its own answer (start-up failures, what prefill and decode get)."""
    cfg = DraftConfig.parse(before, source=path)
    after = set_layer_ids(before, preset.layer_ids)
    ids = preset.layer_ids
    if installed is not None and num_layers is not None and installed.num_layers == num_layers:
        problems, notes = _installed_checks(installed, ids, fc_num_aux)
        if cfg.top_level_layer_ids is not None:
            notes.append("the config also has a top-level eagle_aux_hidden_state_layer_ids, which SGLang ignores")
        return ApplyPlan(preset, path, before, after, json_diff(before, after, path=path), problems, notes,
                         sha256_text(before))
    problems = validate_layer_ids(ids, num_layers, embed_capture=embed_capture, num_aux=fc_num_aux)
    warnings: list[str] = []
    if ids is None and fc_num_aux is not None and fc_num_aux != 3:
        problems.append(f"SGLang's default captures 3 hidden states, but the draft's fc takes {fc_num_aux}")
    if num_layers is None:
        warnings.append("the target's number of layers is unknown, so the ids' range was not checked")
    if ids is not None and -1 in ids and embed_capture is None:
        warnings.append("could not tell whether the server's model file has the embed-capture patch that -1 needs")
    if cfg.top_level_layer_ids is not None:
        warnings.append("the config also has a top-level eagle_aux_hidden_state_layer_ids, which SGLang ignores")
    if num_layers is not None:
        b = wiring.sglang_ids_to_boundaries(ids, num_layers)
        warnings.append(f"the draft will receive boundaries {wiring.format_boundaries(b)}")
    return ApplyPlan(preset, path, before, after, json_diff(before, after, path=path), problems, warnings,
                     sha256_text(before))


def _installed_checks(
    installed: Answer, ids: tuple[int, ...] | None, fc_num_aux: int | None
) -> tuple[list[str], list[str]]:
    """(problems, warnings) for these ids on the installed release, in its own words."""
    a = installed.evaluate(ids)
    problems = validate_layer_ids(ids, None, num_aux=fc_num_aux)
    warnings: list[str] = []
    if a.fails is not None:
        problems.append(f"SGLang {a.version or '?'} ({a.source}): {a.fails}")
        return problems, warnings
    got = a.captures or ()
    if ids is None and fc_num_aux is not None and fc_num_aux != len(got):
        problems.append(f"SGLang's default captures {len(got)} hidden states, but the draft's fc takes {fc_num_aux}")
    warnings.append(f"the draft will receive boundaries {wiring.format_boundaries(got)} "
                    f"(SGLang {a.version or '?'}, {a.source})")
    if a.prefill_only:
        warnings.append(f"only prefill gets them: decode under CUDA graphs replays "
                        f"{wiring.format_boundaries(a.captures_cuda_graph)} ({DISABLE_CUDA_GRAPH} or SGLang >= 0.5.11)")
    return problems, warnings


def set_flags(argv: Sequence[str], flags: Mapping[str, object]) -> list[str]:
    """argv with flags changed: typed SGLang flags through launch.with_flags, any other flag generically.

    Keys are flag names with or without dashes; None removes a flag, True makes it a bare flag.
    """
    args = launch.parse_launch(argv)
    typed: dict[str, object] = {}
    generic: dict[str, object] = {}
    for key, value in flags.items():
        name = "--" + str(key).lstrip("-")
        fld = launch.SHORT_NAMES.get(str(key)) or next(
            (f for f, spellings in launch.FLAG_SPELLINGS.items() if name in spellings), None
        )
        if fld is not None and value is not True:
            if value is not None and fld in launch.INT_FIELDS and isinstance(value, str):
                try:
                    value = int(value)
                except ValueError:
                    raise UserError(f"launch flag {name} wants a whole number, not {value!r}") from None
            typed[fld] = value
        else:
            generic[name] = value
    if typed:
        args = launch.with_flags(args, **typed)
    tokens = launch.render(args)
    start = len(args.program)
    for name, value in generic.items():
        tokens = _set_generic(tokens, start, name, value)
    return tokens


def _is_flag(tok: str) -> bool:
    return tok.startswith("--") or (tok.startswith("-") and len(tok) > 1 and not (tok[1].isdigit() or tok[1] == "."))


def _set_generic(tokens: list[str], start: int, name: str, value: object) -> list[str]:
    out = tokens[:start]
    seen = False
    i = start
    while i < len(tokens):
        tok = tokens[i]
        if tok == name or tok.startswith(name + "="):
            has_value = tok == name and i + 1 < len(tokens) and not _is_flag(tokens[i + 1])
            if value is not None and value is not False and not seen:
                seen = True
                if value is True:
                    out.append(name)
                elif "=" in tok:
                    out.append(f"{name}={value}")
                else:
                    out.extend([name, str(value)])
            i += 2 if has_value else 1
            continue
        out.append(tok)
        i += 1
    if not seen and value is not None and value is not False:
        out.extend([name] if value is True else [name, str(value)])
    return out


def plan_flags(preset: Preset, *, argv: Sequence[str], target_arch: str | None = None) -> ApplyPlan:
    """The launch command with the preset's flags, checked with SGLang's own rules."""
    before_args = launch.parse_launch(argv)
    after_argv = set_flags(argv, preset.flags)
    after_args = launch.parse_launch(after_argv)
    eff = launch.effective(after_args, target_arch=target_arch)
    problems: list[str] = []
    warnings: list[str] = []
    if eff.error:
        problems.append(eff.error)
    warnings.extend(eff.adjusted)
    if eff.speculative:
        warnings.append(f"effective: steps {eff.steps}, topk {eff.topk}, draft tokens {eff.draft_tokens}")
    elif before_args.speculative:
        warnings.append("the server will run without speculation")
    before = shlex.join(argv) + "\n"
    after = shlex.join(after_argv) + "\n"
    return ApplyPlan(preset, LAUNCH_COMMAND_PATH, before, after, launch_diff(argv, after_argv), problems, warnings,
                     sha256_text(before))


def launch_diff(argv: Sequence[str], after_argv: Sequence[str]) -> str:
    """A launch command's change as a unified diff, one flag (with its value) per line."""
    import difflib

    return "".join(
        difflib.unified_diff(_one_per_line(argv), _one_per_line(after_argv), "launch command (before)",
                             "launch command (after)", n=1)
    )


def _one_per_line(argv: Sequence[str]) -> list[str]:
    """A launch command as one line per flag (with its value), so a diff shows the changed flags."""
    lines: list[str] = []
    for tok in argv:
        if lines and not _is_flag(tok) and _is_flag(lines[-1].split(" ", 1)[0]) and " " not in lines[-1]:
            lines[-1] = lines[-1] + " " + shlex.quote(tok)
        else:
            lines.append(shlex.quote(tok))
    return [line + "\n" for line in lines]


_GRID_FLAGS = ("speculative-num-steps", "speculative-eagle-topk", "speculative-num-draft-tokens")


def _count(value: object) -> int | None:
    """A flag preset's count (an int, or digits as a profile may write it); None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    return int(value) if isinstance(value, str) and value.strip().isdigit() else None


def ledger_configs(configs: Iterable[Mapping[str, object]]) -> list[SpecConfig]:
    """The (steps, topk, draft tokens) of ledger rows' config snapshots, in order, once each."""
    out: list[SpecConfig] = []
    for c in configs:
        s, k, d = (_count(c.get(key)) for key in ("steps", "topk", "draft_tokens"))
        if s is not None and k is not None and d is not None and (s, k, d) not in out:
            out.append(SpecConfig(s, k, d))
    return out


def check_grid(served: SpecConfig | None, flag_presets: Iterable[Mapping[str, object]] = (),
               seen: Iterable[Sequence[int]] = ()) -> list[SpecConfig]:
    """What a check predicts when not told, in the console and in `eagle3-tui check` alike: the served
    flags, the flags each flag preset would serve (so applying one moves the prediction), those the
    ledger saw on this host (so rolling back does), then the standard grid; as SGLang would run them,
    configurations it refuses left out (eagle.spec_config.prediction_grid)."""
    wanted: list[tuple[int, ...]] = []
    if served is not None:
        for flags in flag_presets:
            picked = [_count(flags.get(k)) for k in _GRID_FLAGS]
            if all(v is None for v in picked):
                continue  # no speculative count in it (or one removed: no speculation)
            wanted.append(tuple(v if v is not None else served[i] for i, v in enumerate(picked)))
    wanted += [tuple(c) for c in seen]
    return prediction_grid(served, wanted)
