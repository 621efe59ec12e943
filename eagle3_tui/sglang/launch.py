"""SGLang launch commands: typed view, SGLang's effective speculative values, exact round trip.

A launch command is kept as its original tokens; the typed fields are read from them. Nothing is
ever re-serialised from the typed fields, so `render(parse_launch(argv)) == argv` always holds and
`with_flags` changes only the tokens of the flags it is asked to change. Both `--flag value` and
`--flag=value` are understood (and kept in the form they were written). Flags this module does
not know are kept verbatim, in order, in `LaunchArgs.extra`.

`sglang serve MODEL ...` takes the model positionally (the first token after `serve` that is not a
flag, as SGLang's `_normalize_positional_model_path` does). `--config x.yaml` names a YAML file whose
keys SGLang turns into flags placed before the command line's (CLI > config > defaults,
`ConfigArgumentMerger`, 0.5.6+); `merge_config` gives the typed view of both without touching argv.

`effective` applies SGLang's own adjustment rules (research/sglang.md §2.2-2.3): with
`--speculative-eagle-topk 1` the number of draft tokens is forced to `num_steps + 1` (with the
warning SGLang logs), and the auto-choice runs only when steps, topk and draft tokens are all unset.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from eagle3_tui.errors import UserError
from eagle3_tui.formats.launch_config import config_tokens, read_config_mapping

# Typed field -> the spellings SGLang accepts (canonical first). `--speculative-algo` and
# `--speculative-draft` are argparse abbreviations seen in many real commands.
FLAG_SPELLINGS: dict[str, tuple[str, ...]] = {
    "model_path": ("--model-path", "--model"),
    "draft_model_path": (
        "--speculative-draft-model-path",
        "--speculative-draft-model",
        "--speculative-draft",
    ),
    "algorithm": ("--speculative-algorithm", "--speculative-algo"),
    "num_steps": ("--speculative-num-steps",),
    "eagle_topk": ("--speculative-eagle-topk",),
    "num_draft_tokens": ("--speculative-num-draft-tokens",),
    "port": ("--port",),
    "host": ("--host",),
    "tp_size": ("--tp-size", "--tp", "--tensor-parallel-size"),
    "dp_size": ("--dp-size", "--dp", "--data-parallel-size"),
    "decode_log_interval": ("--decode-log-interval",),
    "config_path": ("--config",),
}
INT_FIELDS = frozenset(
    {"num_steps", "eagle_topk", "num_draft_tokens", "port", "tp_size", "dp_size", "decode_log_interval"}
)
# Short names accepted by `with_flags` for the launch-flag presets.
SHORT_NAMES = {"steps": "num_steps", "topk": "eagle_topk", "draft_tokens": "num_draft_tokens"}

_SPELLING_TO_FIELD = {s: name for name, spellings in FLAG_SPELLINGS.items() for s in spellings}


KIND_LAUNCH_SERVER = "sglang.launch_server"
KIND_SERVE = "sglang serve"
KIND_SIM = "eagle3_tui.sim.server"

EAGLE_FAMILY = ("EAGLE", "EAGLE3", "STANDALONE")
TOPK1_WARNING = (
    "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"
)
# auto_choose_speculative_params (server_args.py, 0.5.6): target architectures that get (3, 1, 4).
_AUTO_314_ARCHS = frozenset(
    {
        "DeepseekV32ForCausalLM",
        "DeepseekV3ForCausalLM",
        "DeepseekV2ForCausalLM",
        "GptOssForCausalLM",
        "Glm4MoeForCausalLM",
        "BailingMoeForCausalLM",
        "BailingMoeV2ForCausalLM",
        "MistralLarge3ForCausalLM",
        "PixtralForConditionalGeneration",
    }
)
_AUTO_548_ARCHS = frozenset({"LlamaForCausalLM", "Grok1ForCausalLM", "Grok1VForCausalLM"})


@dataclass(frozen=True)
class LaunchArgs:
    """A parsed launch command. `argv` is the source of truth; the rest is read from it."""

    argv: tuple[str, ...]
    kind: str
    program: tuple[str, ...]
    model_path: str | None = None
    draft_model_path: str | None = None
    algorithm: str | None = None
    num_steps: int | None = None
    eagle_topk: int | None = None
    num_draft_tokens: int | None = None
    port: int | None = None
    host: str | None = None
    tp_size: int | None = None
    dp_size: int | None = None
    decode_log_interval: int | None = None
    config_path: str | None = None
    """`--config x.yaml`; its flags are in `config_argv` once `merge_config` has read the file."""
    extra: tuple[str, ...] = ()
    positional_model: bool = False
    """The model was given positionally (`sglang serve MODEL`)."""
    config_argv: tuple[str, ...] = ()
    """The flags SGLang derives from the --config file (they come before argv's; argv wins)."""

    @property
    def speculative(self) -> bool:
        return self.algorithm is not None

    @property
    def _all_flags(self) -> tuple[str, ...]:
        return (*self.config_argv, *self.argv[len(self.program) :])

    def has_flag(self, flag: str) -> bool:
        """Whether `flag` (e.g. `--disable-cuda-graph`) appears, in either form, on the command line or in --config."""
        return any(tok == flag or tok.startswith(flag + "=") for tok in self._all_flags)

    def nodes(self) -> tuple[int, int, str | None]:
        """(--nnodes, --node-rank, --dist-init-addr); (1, 0, None) for one node."""

        def number(flag: str, default: int) -> int:
            raw = self.flag_value(flag)
            return int(raw) if raw is not None and raw.isdigit() else default

        return max(1, number("--nnodes", 1)), number("--node-rank", 0), self.flag_value("--dist-init-addr")

    def flag_value(self, flag: str) -> str | None:
        """The value of the last occurrence of any flag, known or not (None if absent or bare); argv beats --config."""
        toks = self._all_flags
        value: str | None = None
        for i, tok in enumerate(toks):
            if tok.startswith(flag + "="):
                value = tok[len(flag) + 1 :]
            elif tok == flag:
                nxt = toks[i + 1] if i + 1 < len(toks) else None
                value = nxt if nxt is not None and not _looks_like_flag(nxt) else None
        return value


@dataclass(frozen=True)
class EffectiveSpec:
    """The speculative values the server really runs with, and why they differ from the flags."""

    algorithm: str | None
    steps: int | None
    topk: int | None
    draft_tokens: int | None
    adjusted: list[str] = field(default_factory=list)
    auto_chosen: bool = False
    error: str | None = None

    @property
    def speculative(self) -> bool:
        return self.algorithm is not None


def _looks_like_flag(tok: str) -> bool:
    """`--x`/`-x` is a flag; `-1` or `-0.5` is a (negative number) value."""
    if not tok.startswith("-") or tok == "-":
        return False
    return not (len(tok) > 1 and (tok[1].isdigit() or tok[1] == "."))


def _find_program(argv: Sequence[str]) -> tuple[int, str] | None:
    """Index just past the program part (`python -m sglang.launch_server`) and its kind."""
    for i, tok in enumerate(argv):
        prev = argv[i - 1] if i > 0 else ""
        if prev == "-m" and tok == "sglang.launch_server":
            return i + 1, KIND_LAUNCH_SERVER
        if prev == "-m" and tok == "eagle3_tui.sim.server":
            return i + 1, KIND_SIM
        if tok.replace("\\", "/").endswith("sglang/launch_server.py"):
            return i + 1, KIND_LAUNCH_SERVER
        if tok == "serve" and os.path.basename(prev) == "sglang":
            return i + 1, KIND_SERVE
    return None


def is_launch_command(argv: Sequence[str]) -> bool:
    """Whether argv starts an SGLang server (or the sim server that imitates one)."""
    return _find_program(list(argv)) is not None


def _parse_int(flag: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise UserError(f"launch command: {flag} wants a whole number, not {raw!r}") from None


def parse_launch(argv: Sequence[str], *, positional: bool | None = None) -> LaunchArgs:
    """Read a launch command; raises UserError when it is not one or a known flag is malformed.

    `positional` forces whether `sglang serve`'s first token is the model (None: it is when it is not a
    flag); `with_flags` keeps the original's answer, so removing a flag never turns a stray value into a model.
    """
    tokens = tuple(str(t) for t in argv)
    found = _find_program(tokens)
    if found is None:
        shown = " ".join(tokens[:4]) + (" ..." if len(tokens) > 4 else "")
        raise UserError(
            f"not an SGLang launch command: {shown!r} (expected `python -m sglang.launch_server ...`, "
            "`sglang serve ...` or `python -m eagle3_tui.sim.server ...`)"
        )
    start, kind = found
    values: dict[str, object] = {}
    extra: list[str] = []
    i = start
    if positional is None:
        positional = kind == KIND_SERVE and i < len(tokens) and not tokens[i].startswith("-")
    if positional:
        values["model_path"] = tokens[i]
        i += 1
    while i < len(tokens):
        tok = tokens[i]
        name, _, inline = tok.partition("=")
        fld = _SPELLING_TO_FIELD.get(name) if tok.startswith("--") else None
        if fld is None:
            extra.append(tok)
            i += 1
            continue
        if "=" in tok:
            raw = inline
            i += 1
        else:
            if i + 1 >= len(tokens) or _looks_like_flag(tokens[i + 1]):
                raise UserError(f"launch command: {name} needs a value")
            raw = tokens[i + 1]
            i += 2
        values[fld] = _parse_int(name, raw) if fld in INT_FIELDS else raw
    values["positional_model"] = positional
    return LaunchArgs(argv=tokens, kind=kind, program=tokens[:start], extra=tuple(extra), **values)  # type: ignore[arg-type]


def render(args: LaunchArgs) -> list[str]:
    """The argv to run: the exact tokens that were parsed (after any `with_flags` edits)."""
    return list(args.argv)


def with_flags(args: LaunchArgs, **changes: object) -> LaunchArgs:
    """A copy with some typed flags changed (None removes the flag); everything else untouched.

    Keys are field names (`num_steps`, `port`, ...) or the preset short names `steps`, `topk`,
    `draft_tokens`. An existing flag keeps its spelling, form and position; a new one is appended
    as `--canonical-name value`.
    """
    tokens = list(args.argv)
    start = len(args.program)
    for key, value in changes.items():
        fld = SHORT_NAMES.get(key, key)
        if fld not in FLAG_SPELLINGS:
            raise UserError(f"cannot change launch flag {key!r}: not one of {sorted(FLAG_SPELLINGS)}")
        if fld == "model_path" and args.positional_model and value is not None:
            tokens[start] = str(value)
            continue
        if value is not None and fld in INT_FIELDS and (isinstance(value, bool) or not isinstance(value, int)):
            raise UserError(f"launch flag {FLAG_SPELLINGS[fld][0]} wants a whole number, not {value!r}")
        spellings = FLAG_SPELLINGS[fld]
        out: list[str] = tokens[:start]
        seen = False
        i = start
        while i < len(tokens):
            tok = tokens[i]
            name, eq, _ = tok.partition("=")
            if tok.startswith("--") and name in spellings:
                has_sep_value = not eq and i + 1 < len(tokens) and not _looks_like_flag(tokens[i + 1])
                if value is not None:
                    seen = True
                    out.extend([f"{name}={value}"] if eq else [name, str(value)])
                i += 2 if has_sep_value else 1
                continue
            out.append(tok)
            i += 1
        if value is not None and not seen:
            out.extend([spellings[0], str(value)])
        tokens = out
    return with_config_argv(parse_launch(tokens, positional=args.positional_model), args.config_argv)


def merge_config(args: LaunchArgs, text: str) -> LaunchArgs:
    """The launch as SGLang sees it with the --config file's text merged in (argv itself unchanged)."""
    data = read_config_mapping(text, args.config_path or "--config", "SGLang")
    return with_config_argv(args, tuple(config_tokens(data)))


def with_config_argv(args: LaunchArgs, config_argv: Sequence[str]) -> LaunchArgs:
    """`args` with typed fields from config flags + argv (argv wins), argv and `extra` untouched."""
    cfg = tuple(config_argv)
    if not cfg:
        return replace(args, config_argv=())
    rest = list(args.argv[len(args.program) :])
    if args.positional_model and rest:
        rest = ["--model-path", rest[0], *rest[1:]]
    rest = _drop_flag(rest, "--config")
    view = parse_launch([*args.program, *cfg, *rest], positional=False)
    typed = {name: getattr(view, name) for name in FLAG_SPELLINGS if name != "config_path"}
    return replace(args, config_argv=cfg, **typed)


def _drop_flag(tokens: list[str], flag: str) -> list[str]:
    out: list[str] = []
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok == flag:
            i += 2
            continue
        if not tok.startswith(flag + "="):
            out.append(tok)
        i += 1
    return out


def auto_choice(algorithm: str, target_arch: str | None) -> tuple[int, int, int]:
    """SGLang's `auto_choose_speculative_params` (0.5.6): (num_steps, topk, num_draft_tokens)."""
    if algorithm == "STANDALONE":
        return (3, 1, 4)
    if target_arch in _AUTO_314_ARCHS:
        return (3, 1, 4)
    return (5, 4, 8)


def effective(
    args: LaunchArgs,
    *,
    target_arch: str | None = None,
    auto: tuple[int, int, int] | None = None,
) -> EffectiveSpec:
    """What SGLang does with the speculative flags (`_handle_speculative_decoding`).

    `target_arch` is the target model's `architectures[0]`; it only matters for the auto-choice.
    `auto` is the installed release's own choice for that target (`sglang.installed`), when known;
    without it the 0.5.6 table of `auto_choice` is used.
    """
    algo = args.algorithm.upper() if args.algorithm is not None else None
    steps, topk, draft = args.num_steps, args.eagle_topk, args.num_draft_tokens
    notes: list[str] = []
    if algo is None:
        if any(v is not None for v in (steps, topk, draft)):
            notes.append("speculative flags are ignored without --speculative-algorithm")
        return EffectiveSpec(None, None, None, None, notes)
    if algo == "NEXTN":
        algo = "EAGLE"
        notes.append("NEXTN is run as EAGLE")
    if algo not in EAGLE_FAMILY:
        return EffectiveSpec(algo, steps, topk, draft, notes)
    chosen = False
    if steps is None:
        if topk is not None or draft is not None:
            return EffectiveSpec(
                algo,
                steps,
                topk,
                draft,
                notes,
                error=(
                    "SGLang refuses to start: --speculative-eagle-topk or --speculative-num-draft-tokens "
                    "without --speculative-num-steps trips its auto-choice assert"
                ),
            )
        steps, topk, draft = auto if auto is not None and algo != "STANDALONE" else auto_choice(algo, target_arch)
        chosen = True
        arch = target_arch or "an unknown target architecture"
        notes.append(f"auto-chosen for {arch}: steps {steps}, topk {topk}, draft tokens {draft}")
        if auto is None and algo != "STANDALONE" and target_arch not in _AUTO_314_ARCHS | _AUTO_548_ARCHS:
            notes.append("SGLang 0.5.8 and later auto-choose steps 3, topk 1, draft tokens 4 for this architecture")
    else:
        unset = [flag for flag, v in (("--speculative-eagle-topk", topk), ("--speculative-num-draft-tokens", draft))
                 if v is None and not (flag.endswith("draft-tokens") and topk == 1)]
        if unset:
            notes.append(
                f"{' and '.join(unset)} not set: SGLang auto-chooses only when steps, topk and draft tokens "
                "are all unset, so these stay unset (older builds may refuse to start)"
            )
    if topk == 1 and draft != steps + 1:
        notes.append(TOPK1_WARNING)
        draft = steps + 1
    return EffectiveSpec(algo, steps, topk, draft, notes, auto_chosen=chosen)
