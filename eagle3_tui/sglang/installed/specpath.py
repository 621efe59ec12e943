"""The speculative path of one release beyond layer capture, read from its source.

What each part is read from (and what it decides):

* `srt/environ.py` `class Envs`: every declared `SGLANG_*` switch and its default, so the switches a
  server runs with can be judged against the release that reads them (`SGLANG_ENABLE_SPEC_V2` is
  declared `EnvBool(False)` in 0.5.5-0.5.10 and `EnvBool(True)` from 0.5.11; from 0.5.13 spec v2 is
  the only path and the switch only picks the overlap-scheduled or the synchronous worker).
* `server_args.py` / `arg_groups/speculative_hook.py`: what spec v2 does with topk > 1. 0.5.4 (where the switch
  is the launch flag `--enable-beta-spec`, `if not self.enable_beta_spec: self.disable_overlap_schedule = True`)
  and 0.5.5-0.5.6 do not
  check it: the switch keeps the overlap scheduler on for EAGLE3 (`if not envs.SGLANG_ENABLE_SPEC_V2.get():
  self.disable_overlap_schedule = True` is the only branch) and `spec_info._create_eagle_worker` builds
  `EAGLEWorkerV2`, which drafts a tree into chain-shaped buffers: the first decode dies on a tensor size
  mismatch (sglang issues #13352, #14077). 0.5.7-0.5.10 `raise ValueError("Spec v2 currently only supports
  topk = 1 ...")` when the switch is on; 0.5.11-0.5.12 fall back to spec v1 (`spec_v1_reason = "spec v2
  currently only supports topk = 1"`, overlap scheduler off); from 0.5.13 spec v2 drafts trees.
* `speculative/eagle_draft_extend_cuda_graph_runner.py`: the draft-extend CUDA graph's input buffer.
  Up to 0.4.9 it is `hidden_size * 3` of the *draft*, so a draft whose `target_hidden_size` differs
  from its `hidden_size` fails while the graphs are captured (sglang issue #7011, fixed by PR #8163 in
  0.4.10, which sizes it from `target_hidden_size`).
* `eplb/expert_distribution.py`: whether the recorder's forward-pass boundary is skipped while a CUDA
  graph is captured. It is not in any release read (0.4.9-0.5.23), so `--enable-expert-distribution-metrics`
  with `--speculative-num-steps` >= 2 crash-loops at start-up while the draft graphs are captured
  (sglang issue #32105).
* the `if model_arch in [...]` branch that sets `speculative_draft_model_path = model_path`: targets
  whose own checkpoint (the MTP / NextN layer) is the draft when no draft path is given.
* `configs/model_config.py` `_derive_context_length`: a `--context-length` beyond what a model's config
  derives (`max_position_embeddings` x its RoPE scaling factor) raises ValueError unless
  `SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN` is set (0.5.1+; 0.4.4-0.5.0 defaulted it to true). The draft
  worker sets `server_args.context_length` to the target's context (`eagle_worker.py`), so a draft whose
  config says 2048 positions stops the server. Allowed, 0.5.3+ also stretches the draft's
  `max_position_embeddings` ("Overriding the draft model's max_position_embeddings", PR #10787); before,
  positions past it read outside the draft's RoPE cache (illegal memory access, issue #10713).
* the EAGLE-3 draft classes the release loads (`EntryClass` of `llama_eagle3.py` and, from 0.5.12,
  `kimi_k25_eagle3.py`'s MLA draft `Eagle3DeepseekV2ForCausalLM`).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from eagle3_tui.sglang.installed.notes import Note
from eagle3_tui.sglang.installed.source import Modules

ENVIRON = "sglang.srt.environ"
SERVER_ARGS = "sglang.srt.server_args"
SPEC_HOOK = "sglang.srt.arg_groups.speculative_hook"
EXTEND_GRAPH = "sglang.srt.speculative.eagle_draft_extend_cuda_graph_runner"
EXPERT_RECORDER = ("sglang.srt.eplb.expert_distribution", "sglang.srt.managers.expert_distribution")
DRAFT_MODULES = ("sglang.srt.models.llama_eagle3", "sglang.srt.models.kimi_k25_eagle3")
EAGLE_UTILS = "sglang.srt.speculative.eagle_utils"
MODEL_CONFIG = "sglang.srt.configs.model_config"
OVERWRITE_ENV = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
# what a --context-length beyond a model's own derived context does
CONTEXT_REFUSED = "refused"  # ValueError at start-up unless OVERWRITE_ENV is set
CONTEXT_OVERRIDDEN = "overridden"  # a warning; the length is used (OVERWRITE_ENV defaults to true)
SIMULATE = "SGLANG_SIMULATE_ACC_LEN"
OLD_SIMULATE = "SIMULATE_ACC_LEN"

SPEC_V2_ENV = "SGLANG_ENABLE_SPEC_V2"
BETA_SPEC_FLAG = "--enable-beta-spec"  # 0.5.4's switch: a launch flag
# spec v2 as the release has it
V2_OPT_IN = "opt-in"  # the switch exists, off by default
V2_DEFAULT = "default"  # the switch exists, on by default
V2_ONLY = "only"  # no switch: spec v2 is the only path
# what spec v2 does with topk > 1
TOPK_REFUSED = "refused"  # ValueError at start-up
TOPK_FALLS_BACK = "falls-back"  # spec v1, overlap scheduler off
TOPK_UNCHECKED = "unchecked"  # not checked: the spec v2 worker runs the tree and dies on a tensor size error
# the draft-extend CUDA graph's input width
WIDTH_TARGET = "target"
WIDTH_DRAFT = "draft"

_ENV_FIELD = re.compile(r"^\s+(SGLANG_[A-Z0-9_]+)\s*=\s*(Env\w+)\((.*)\)\s*$", re.M)


@dataclass(frozen=True)
class SpecPath:
    env: tuple[tuple[str, str, str], ...]
    """(name, type, default text) of every switch `class Envs` declares; () when environ.py was not read."""
    spec_v2: str | None
    spec_v2_topk: str | None
    extend_graph_width: str | None
    expert_recorder_capture_safe: bool | None
    draft_path_from_target: frozenset[str]
    draft_classes: tuple[str, ...]
    context_check: str | None = None
    """What a context length beyond a model's derived one does (the draft gets the target's): refused or
    overridden."""
    draft_window_stretched: bool | None = None
    """Whether an allowed longer context also stretches the draft's max_position_embeddings (its RoPE cache;
    0.5.3+, sglang PR #10787); before, positions past it read outside the cache (illegal memory access)."""
    draft_defaults_to_target: bool | None = None
    """Whether the draft worker's model config falls back to the target's path when no draft path is given
    (`configs/model_config.py` `from_server_args`: `model_path=model_path or server_args.model_path`, 0.5.4 to
    0.5.7 at least); None: model_config.py not read."""
    simulate_env: str | None = None
    """The variable that makes the verifier accept a simulated length (`SIMULATE_ACC_LEN` up to 0.5.2,
    `SGLANG_SIMULATE_ACC_LEN` after); None when neither was seen."""
    notes: tuple[Note, ...] = field(default=(), compare=False)
    spec_v2_flag: str | None = None
    """The launch flag that turns spec v2 on where no environment switch does (0.5.4: `--enable-beta-spec`)."""

    def to_dict(self) -> dict[str, object]:
        return {"spec_v2": self.spec_v2, "spec_v2_topk_gt_1": self.spec_v2_topk,
                "draft_extend_graph_width": self.extend_graph_width,
                "expert_recorder_capture_safe": self.expert_recorder_capture_safe,
                "draft_classes": list(self.draft_classes), "draft_path_from_target": sorted(self.draft_path_from_target),
                "context_beyond_window": self.context_check, "draft_window_stretched": self.draft_window_stretched,
                "draft_defaults_to_target": self.draft_defaults_to_target, "simulate_env": self.simulate_env,
                "spec_v2_flag": self.spec_v2_flag, "declared_switches": len(self.env)}

    def summary(self) -> str:
        """One line for a person."""
        v2 = {V2_OPT_IN: "opt-in (" + SPEC_V2_ENV + ")", V2_DEFAULT: "on by default", V2_ONLY: "the only path"}
        parts = [f"spec v2 {v2.get(self.spec_v2 or '', 'absent')}"]
        if self.spec_v2_topk:
            parts.append("topk > 1 " + {TOPK_REFUSED: "refused", TOPK_FALLS_BACK: "falls back to spec v1",
                                        TOPK_UNCHECKED: "unchecked (crashes on the first decode)"}[self.spec_v2_topk])
        if self.extend_graph_width:
            parts.append(f"draft-extend graph sized from the {self.extend_graph_width}")
        if self.context_check:
            allowed = ("; allowed, the draft's window is stretched" if self.draft_window_stretched
                       else "; allowed, the draft's window is not stretched")
            parts.append(("a target context past the draft's window is refused unless " + OVERWRITE_ENV
                          if self.context_check == CONTEXT_REFUSED else
                          "a target context past the draft's window is allowed by default") + allowed)
        parts.append(f"EAGLE-3 drafts: {', '.join(self.draft_classes) or 'none'}")
        return "; ".join(parts)

    def env_default(self, name: str) -> tuple[str, str] | None:
        """(type, default text) of a declared switch, or None."""
        for n, kind, default in self.env:
            if n == name:
                return kind, default
        return None

    def spec_v2_on(self, env: dict[str, str] | None) -> bool | None:
        """Whether a server with this environment drafts through spec v2 (before the topk rule)."""
        if self.spec_v2 is None:
            return False
        if self.spec_v2 == V2_ONLY:
            return True
        value = (env or {}).get(SPEC_V2_ENV)
        if value is None:
            return self.spec_v2 == V2_DEFAULT
        return parse_bool(value)


def parse_bool(value: str) -> bool | None:
    """SGLang's `EnvBool.parse` (None where it raises)."""
    v = value.strip().lower()
    if v in ("true", "1", "yes", "y"):
        return True
    if v in ("false", "0", "no", "n"):
        return False
    return None


def read_spec_path(mods: Modules) -> SpecPath | None:
    """None when neither server_args.py nor the spec hook can be read (the table stands in)."""
    args_text = mods.text(SERVER_ARGS)
    if args_text is None:
        return None
    hook_text = mods.text(SPEC_HOOK) or ""
    text = args_text + "\n" + hook_text
    notes: list[Note] = []
    env_text = mods.text(ENVIRON)
    env = tuple((m.group(1), m.group(2), m.group(3).strip()) for m in _ENV_FIELD.finditer(env_text or ""))
    v2 = _spec_v2(env, text)
    env_path = Modules.path_of(ENVIRON)
    if v2 in (V2_OPT_IN, V2_DEFAULT):
        notes.append(Note(env_path, f"{SPEC_V2_ENV} is declared {'on' if v2 == V2_DEFAULT else 'off'} by default"))
    elif v2 == V2_ONLY:
        notes.append(Note(Modules.path_of(SPEC_HOOK), "spec v2 is the only speculative path (the switch, where "
                                                      "declared, picks the overlap or the synchronous worker)"))
    flag = BETA_SPEC_FLAG if _BETA_KEEPS_OVERLAP.search(text) else None
    if flag is not None:
        notes.append(Note(Modules.path_of(SERVER_ARGS), f"{flag} keeps the overlap scheduler on: the spec v2 worker "
                                                        "(EAGLEWorkerV2) drafts"))
    topk = _topk_rule(text, v2 or (V2_OPT_IN if flag else None))
    where = Modules.path_of(SPEC_HOOK) if hook_text and "spec v2" in hook_text.lower() else Modules.path_of(SERVER_ARGS)
    if topk == TOPK_REFUSED:
        notes.append(Note(where, "spec v2 with --speculative-eagle-topk > 1 raises ValueError at start-up"))
    elif topk == TOPK_FALLS_BACK:
        notes.append(Note(where, "spec v2 with --speculative-eagle-topk > 1 falls back to spec v1 "
                                 "(overlap scheduler off)"))
    elif topk == TOPK_UNCHECKED:
        notes.append(Note(where, "spec v2 keeps the overlap scheduler on for EAGLE3 whatever the topk: no topk "
                                 "check, the chain-only EAGLEWorkerV2 drafts the tree"))
    width = _extend_width(mods.text(EXTEND_GRAPH))
    if width is not None:
        notes.append(Note(Modules.path_of(EXTEND_GRAPH), "the draft-extend CUDA graph's input is sized from "
                          + ("the draft's target_hidden_size" if width == WIDTH_TARGET
                             else "the draft's hidden_size x 3")))
    safe = _recorder_safe(mods)
    from_target = _draft_path_from_target(text)
    classes = _draft_classes(mods)
    simulate = SIMULATE if any(n == SIMULATE for n, _, _ in env) else None
    if simulate is None and f'os.environ.get("{OLD_SIMULATE}")' in (mods.text(EAGLE_UTILS) or ""):
        simulate = OLD_SIMULATE
    if simulate is not None:
        notes.append(Note(env_path if simulate == SIMULATE else Modules.path_of(EAGLE_UTILS),
                          f"{simulate} > 0 makes the verifier accept a simulated length, not the draft's own"))
    model_config = mods.text(MODEL_CONFIG)
    context = _context_check(model_config)
    stretched = None if model_config is None else "Overriding the draft model's max_position_embeddings" in model_config
    if context is not None:
        notes.append(Note(Modules.path_of(MODEL_CONFIG), "a context length beyond a model's derived one (the draft "
                          "runs with the target's) "
                          + ("raises ValueError unless " + OVERWRITE_ENV + " is set" if context == CONTEXT_REFUSED
                             else "is used with a warning (" + OVERWRITE_ENV + " defaults to true)")))
    if stretched is not None:
        notes.append(Note(Modules.path_of(MODEL_CONFIG), "an allowed longer context "
                          + ("stretches the draft's max_position_embeddings (its RoPE cache) to it" if stretched
                             else "leaves the draft's max_position_embeddings (its RoPE cache) as it is")))
    defaults = None if model_config is None else bool(_DRAFT_DEFAULTS.search(model_config))
    if defaults:
        notes.append(Note(Modules.path_of(MODEL_CONFIG), "without a draft path the draft worker's model config is "
                                                         "built from the target's path (model_path or "
                                                         "server_args.model_path): the target is loaded as the draft"))
    return SpecPath(env, v2, topk, width, safe, from_target, classes, context, stretched, defaults, simulate,
                    tuple(notes), flag)


_DRAFT_DEFAULTS = re.compile(r"model_path\s*=\s*model_path or server_args\.model_path")


def _context_check(text: str | None) -> str | None:
    if not text or "is greater than the derived context_length" not in text:
        return None
    if re.search(OVERWRITE_ENV + r'",\s*default="True"', text):
        return CONTEXT_OVERRIDDEN
    return CONTEXT_REFUSED


def _spec_v2(env: tuple[tuple[str, str, str], ...], text: str) -> str | None:
    # From 0.5.13 the switch only picks the overlap-scheduled or the synchronous spec v2 worker.
    if re.search(r"spec v2 is used", text, re.I):
        return V2_ONLY
    for name, _, default in env:
        if name == SPEC_V2_ENV:
            return V2_DEFAULT if default.strip() == "True" else V2_OPT_IN
    return None


_REFUSE = re.compile(r"raise ValueError\(\s*\"Spec v2 currently only supports topk = 1")
# 0.5.5-0.5.6: the switch's only effect in server_args is to not turn the overlap scheduler off
_BETA_KEEPS_OVERLAP = re.compile(r"if not self\.enable_beta_spec:\s*\n\s*self\.disable_overlap_schedule = True")
_V2_KEEPS_OVERLAP = re.compile(r"if not envs\.SGLANG_ENABLE_SPEC_V2\.get\(\):\s*\n\s*self\.disable_overlap_schedule = True")
_FALLBACK = re.compile(r"spec_v1_reason\s*=\s*\"spec v2 currently only supports topk = 1\"")


def _topk_rule(text: str, v2: str | None) -> str | None:
    if _REFUSE.search(text):
        return TOPK_REFUSED
    if _FALLBACK.search(text):
        return TOPK_FALLS_BACK
    if v2 in (V2_OPT_IN, V2_DEFAULT) and (_V2_KEEPS_OVERLAP.search(text) or _BETA_KEEPS_OVERLAP.search(text)):
        return TOPK_UNCHECKED
    return None


def _extend_width(text: str | None) -> str | None:
    if text is None:
        return None
    if "target_hidden_size" in text or "hidden_size_for" in text or "_hidden_size = (" in text:
        return WIDTH_TARGET
    if re.search(r"model_config\.hidden_size \* 3", text):
        return WIDTH_DRAFT
    return None


def _recorder_safe(mods: Modules) -> bool | None:
    """Whether the recorder's pass start skips CUDA-graph capture itself (None: no recorder read)."""
    for module in EXPERT_RECORDER:
        fns = mods.defs(module, "_on_forward_pass_start")
        if fns:
            body = fns[-1].segment()
            return "capturing" in body or "capture_mode" in body
    return None


def _draft_path_from_target(text: str) -> frozenset[str]:
    """Architectures of the `if model_arch in [...]` branches that default the draft path to the target's."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return frozenset()
    out: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        test = node.test
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.In)):
            continue
        seq = test.comparators[0]
        if not isinstance(seq, (ast.List, ast.Tuple)):
            continue
        body = ast.unparse(ast.Module(body=node.body, type_ignores=[]))
        if re.search(r"speculative_draft_model_path\s*(=|is None)", body) and "model_path" in body.replace(
                "speculative_draft_model_path", ""):
            out.update(e.value for e in seq.elts
                       if isinstance(e, ast.Constant) and isinstance(e.value, str) and "For" in e.value)
    return frozenset(out)


_ENTRY = re.compile(r"^EntryClass\s*=\s*\[([^\]]*)\]", re.M)


def _draft_classes(mods: Modules) -> tuple[str, ...]:
    out: list[str] = []
    for module in DRAFT_MODULES:
        text = mods.text(module)
        for m in _ENTRY.finditer(text or ""):
            out += [c.strip() for c in m.group(1).split(",") if "Eagle3" in c]
    return tuple(out)
