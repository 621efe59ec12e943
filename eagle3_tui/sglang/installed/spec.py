"""The speculative-flag rules of one release, read from `server_args.py` / `arg_groups/speculative_hook.py`.

`auto_choose_speculative_params` (0.4.5-0.5.12, server_args.py) / `_auto_choose_speculative_params`
(0.5.17+, arg_groups/speculative_hook.py) is an if-chain over the target's `architectures[0]`; it is
read with `ast`, so a new arch in its lists is picked up without a change here. Its fallback changed
from (5, 4, 8) to (3, 1, 4) in 0.5.12 (all other models).

Start-up crashes seen in the source: topk or draft tokens without steps trip the auto-choice `assert`;
steps without topk reach `if (speculative_eagle_topk > 1 and ...)` with topk None (TypeError
`None > 1`, 0.5.x).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from eagle3_tui.eagle.spec_config import SpecConfig
from eagle3_tui.sglang.installed.notes import Note
from eagle3_tui.sglang.installed.source import Located, Modules

SERVER_ARGS = "sglang.srt.server_args"
SPEC_HOOK = "sglang.srt.arg_groups.speculative_hook"
_AUTO_NAMES = ("auto_choose_speculative_params", "_auto_choose_speculative_params")

@dataclass(frozen=True)
class SpecRules:
    has_eagle3: bool
    by_arch: tuple[tuple[frozenset[str], SpecConfig], ...]
    fallback: SpecConfig | None
    steps_alone_fails: bool | None
    """`--speculative-num-steps` without topk crashes at start-up (None: not seen in the source)."""
    incomplete_asserts: bool
    topk1_forces_draft: bool
    page_size_forces_topk1: bool
    notes: tuple[Note, ...] = field(default=(), compare=False)

    def auto_spec(self, architecture: str | None) -> SpecConfig | None:
        for archs, triple in self.by_arch:
            if architecture in archs:
                return triple
        return self.fallback


def read_spec_rules(mods: Modules) -> SpecRules | None:
    args_text = mods.text(SERVER_ARGS)
    if args_text is None:
        return None
    hook_text = mods.text(SPEC_HOOK) or ""
    text = args_text + "\n" + hook_text
    has_eagle3 = '"EAGLE3"' in args_text or "'EAGLE3'" in args_text or "EAGLE3" in hook_text
    auto = _find_auto(mods)
    by_arch: tuple[tuple[frozenset[str], SpecConfig], ...] = ()
    fallback: SpecConfig | None = None
    notes: list[Note] = []
    if auto is not None:
        by_arch, fallback = _read_chain(auto)
        name = getattr(auto.node, "name", "auto-choice")
        notes.append(Note(auto.where, f"{name}: {len(by_arch)} arch lists, other models get {fallback}"))
    steps_alone = _steps_alone_fails(text)
    if steps_alone:
        notes.append(Note(SPEC_HOOK_PATH if "speculative_eagle_topk > 1" in hook_text else SERVER_ARGS_PATH,
                          "--speculative-num-steps without --speculative-eagle-topk reaches "
                          "`speculative_eagle_topk > 1` with None: TypeError at start-up"))
    return SpecRules(
        has_eagle3=has_eagle3,
        by_arch=by_arch,
        fallback=fallback,
        steps_alone_fails=steps_alone,
        incomplete_asserts=bool(re.search(r"assert \(?\s*\w+\.speculative_eagle_topk is None\s+and", text)),
        topk1_forces_draft="adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1" in text,
        page_size_forces_topk1="speculative_eagle_topk is adjusted to 1 when page_size > 1" in text,
        notes=tuple(notes),
    )


SERVER_ARGS_PATH = Modules.path_of(SERVER_ARGS)
SPEC_HOOK_PATH = Modules.path_of(SPEC_HOOK)


def _find_auto(mods: Modules) -> Located | None:
    for module in (SPEC_HOOK, SERVER_ARGS):
        for name in _AUTO_NAMES:
            fn = mods.function(module, name)
            if fn is not None:
                return fn
    return None


def _read_chain(fn: Located) -> tuple[tuple[tuple[frozenset[str], SpecConfig], ...], SpecConfig | None]:
    """The (arch list -> triple) branches and the `else` triple of the auto-choice's if-chain."""
    out: list[tuple[frozenset[str], SpecConfig]] = []
    fallback: SpecConfig | None = None
    body = list(getattr(fn.node, "body", []))
    for stmt in body:
        node: ast.stmt | None = stmt
        while isinstance(node, ast.If):
            archs = _arch_list(node.test)
            triple = _returned(node.body)
            if archs is not None and triple is not None:
                out.append((archs, triple))
            orelse = node.orelse
            if len(orelse) == 1 and isinstance(orelse[0], ast.If):
                node = orelse[0]
                continue
            if archs is not None and orelse:
                fallback = _returned(orelse) or fallback
            node = None
        if isinstance(stmt, ast.Return):
            fallback = _literal_triple(stmt.value) or fallback
    return tuple(out), fallback


def _arch_list(test: ast.expr) -> frozenset[str] | None:
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.In)):
        return None
    if not (isinstance(test.left, ast.Name) and test.left.id in ("arch", "model_arch")):
        return None
    seq = test.comparators[0]
    if not isinstance(seq, (ast.List, ast.Tuple, ast.Set)):
        return None
    return frozenset(e.value for e in seq.elts if isinstance(e, ast.Constant) and isinstance(e.value, str))


def _returned(body: list[ast.stmt]) -> SpecConfig | None:
    for stmt in body:
        if isinstance(stmt, ast.Return):
            return _literal_triple(stmt.value)
    return None


def _literal_triple(value: ast.expr | None) -> SpecConfig | None:
    if isinstance(value, ast.Tuple) and len(value.elts) == 3:
        nums = [e.value for e in value.elts if isinstance(e, ast.Constant) and isinstance(e.value, int)]
        if len(nums) == 3:
            return SpecConfig(nums[0], nums[1], nums[2])
    return None


_STEPS_ALONE = re.compile(r"if \(\s*\w+\.speculative_eagle_topk > 1\s+and")


def _steps_alone_fails(text: str) -> bool | None:
    """True when, after the auto-choice, an unguarded `if (x.speculative_eagle_topk > 1 and ...)` follows."""
    for anchor in ("= auto_choose_speculative_params(", "= _auto_choose_speculative_params("):
        start = text.find(anchor)
        if start < 0:
            continue
        end_candidates = [i for i in (text.find("\ndef ", start), text.find('speculative_algorithm == "NGRAM"', start))
                          if i > 0]
        window = text[start:min(end_candidates)] if end_candidates else text[start:]
        if _STEPS_ALONE.search(window):
            return True
    return None
