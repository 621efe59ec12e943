"""What each released SGLang does, by version: the fallback when the installed source cannot be read.

Every row was produced by this package's own readers run over the released wheels
(`pip download sglang==X --no-deps`) of 0.4.3, 0.4.4-0.4.10, 0.5.0rc0, 0.5.1-0.5.23, and
`tests/test_sglang_release.py` checks that reading those wheels still gives these rows. A row starts at
the first release read with that behaviour; a release between two rows is assumed to behave like the
earlier one, and its evidence says "assumed from version X" with X the nearest release read.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from eagle3_tui.eagle.spec_config import SpecConfig
from eagle3_tui.sglang.installed.archs import ARCHS, Arch
from eagle3_tui.sglang.installed.capture import (
    IGNORES_IDS,
    MISSING,
    PLUS1,
    PLUS1_IF_FIRST_IS_1,
    RULE_TEXT,
    VERBATIM_IF_LAST,
    CaptureRule,
)
from eagle3_tui.sglang.installed.loader import FC_NORM, NORM_BEFORE_FC, NORM_OUTPUT, DraftLoader
from eagle3_tui.sglang.installed.multimodal import CAPTURED, LOST, NO_SETTER, MultimodalCapture
from eagle3_tui.sglang.installed.notes import Note, assumed_from
from eagle3_tui.sglang.installed.runner import GRAPH, IDS, RESET, GraphOrder
from eagle3_tui.sglang.installed.source import version_key
from eagle3_tui.sglang.installed.spec import SpecRules
from eagle3_tui.sglang.installed.specpath import (
    BETA_SPEC_FLAG,
    CONTEXT_OVERRIDDEN,
    CONTEXT_REFUSED,
    OLD_SIMULATE,
    SIMULATE,
    SPEC_V2_ENV,
    TOPK_FALLS_BACK,
    TOPK_REFUSED,
    TOPK_UNCHECKED,
    V2_DEFAULT,
    V2_ONLY,
    V2_OPT_IN,
    WIDTH_DRAFT,
    WIDTH_TARGET,
    SpecPath,
)

READ_VERSIONS: tuple[str, ...] = (
    "0.4.3", "0.4.4", "0.4.5", "0.4.6", "0.4.7", "0.4.8", "0.4.9", "0.4.10", "0.5.0rc0",
    *(f"0.5.{i}" for i in range(1, 24)),
)
LATEST = READ_VERSIONS[-1]
T = TypeVar("T")
LOG_TEXT = "configure_logger calls logging.basicConfig without stream=: the log goes to stderr"

# (setter, embed_safe, last_boundary, sticky); None: the model file is not in that release.
_Cap = tuple[str, bool, bool, bool] | None
_CAPTURE: dict[str, tuple[tuple[str, _Cap], ...]] = {
    "llama": (("0.4.3", (MISSING, False, False, False)), ("0.4.5", (IGNORES_IDS, False, False, False)),
              ("0.4.9", (PLUS1, False, False, False)), ("0.5.22", (PLUS1, True, False, False))),
    "qwen2": (("0.4.3", (MISSING, False, False, False)), ("0.5.2", (PLUS1, True, False, False))),
    "qwen3": (("0.4.3", None), ("0.4.6", (MISSING, False, False, False)), ("0.4.9", (PLUS1, True, False, False))),
    "qwen2_moe": (("0.4.3", (MISSING, False, False, False)), ("0.5.2", (PLUS1, True, False, False)),
                  ("0.5.5", (PLUS1, True, False, True))),
    "qwen3_moe": (("0.4.3", None), ("0.4.6", (MISSING, False, False, False)), ("0.4.9", (PLUS1, True, False, False)),
                  ("0.5.5", (PLUS1, True, False, True))),
    "deepseek_v2": (("0.4.3", (MISSING, False, False, False)), ("0.5.5", (PLUS1, False, False, False)),
                    ("0.5.13", (PLUS1_IF_FIRST_IS_1, False, False, False)),
                    ("0.5.14", (PLUS1_IF_FIRST_IS_1, True, False, False))),
    "kimi_k25": (("0.4.3", None), ("0.5.9", (MISSING, False, False, False)), ("0.5.10", (PLUS1, False, False, False)),
                 ("0.5.13", (PLUS1_IF_FIRST_IS_1, False, False, False)),
                 ("0.5.14", (PLUS1_IF_FIRST_IS_1, True, False, False))),
    "glm4_moe": (("0.4.3", None), ("0.4.10", (MISSING, False, False, False)), ("0.5.5", (PLUS1, False, False, False)),
                 ("0.5.21", (PLUS1, True, False, False))),
    "glm4_moe_lite": (("0.4.3", None), ("0.5.8", (PLUS1, False, False, False)),
                      ("0.5.13", (PLUS1_IF_FIRST_IS_1, False, False, False)),
                      ("0.5.21", (PLUS1_IF_FIRST_IS_1, True, False, False))),
    "gpt_oss": (("0.4.3", None), ("0.5.0rc0", (PLUS1, False, False, False)),
                ("0.5.17", (VERBATIM_IF_LAST, True, True, False))),
    "llama4": (("0.4.3", None), ("0.4.5", (MISSING, False, False, False)), ("0.4.9", (PLUS1, False, False, False)),
               ("0.5.21", (PLUS1, True, False, False))),
}

_ORDER: tuple[tuple[str, tuple[tuple[str, ...], bool]], ...] = (
    ("0.4.3", ((GRAPH,), False)),
    ("0.4.5", ((GRAPH, RESET), True)),
    ("0.4.9", ((GRAPH, IDS), True)),
    ("0.5.11", ((IDS, GRAPH), False)),
)

_LOADER: tuple[tuple[str, tuple[bool, bool, tuple[str, ...], bool]], ...] = (
    ("0.4.3", (False, False, (), False)),
    ("0.5.12", (True, True, (FC_NORM, NORM_OUTPUT), True)),
    ("0.5.17", (True, True, (FC_NORM, NORM_OUTPUT, NORM_BEFORE_FC), True)),
)

_548 = SpecConfig(5, 4, 8)
_314 = SpecConfig(3, 1, 4)
# auto-choice: arch key -> rows; "*" is every architecture not in its own list (the `else:` branch).
_AUTO: dict[str, tuple[tuple[str, SpecConfig], ...]] = {
    "llama": (("0.4.5", _548),),
    "deepseek_v2": (("0.4.5", _548), ("0.4.7", _314)),
    "deepseek_v3": (("0.4.5", _548), ("0.4.7", _314)),
    "glm4_moe": (("0.4.5", _548), ("0.5.7", _314)),
    "gpt_oss": (("0.4.5", _548), ("0.5.1", _314)),
    "*": (("0.4.5", _548), ("0.5.8", _314)),
}
# (first release, steps alone crash, topk-1 forces draft tokens, page_size > 1 forces topk 1)
_SPEC: tuple[tuple[str, tuple[bool | None, bool, bool]], ...] = (
    ("0.4.5", (None, False, False)),
    ("0.4.6", (None, True, True)),
    ("0.4.9", (None, True, False)),
    ("0.5.2", (True, True, False)),
)


def nearest(version: str | None) -> str:
    """The latest release read at or below `version` (the latest read for an unknown or newer one)."""
    if version is None:
        return LATEST
    key = version_key(version)
    if key[0] < 0:
        return LATEST
    best = READ_VERSIONS[0]
    for v in READ_VERSIONS:
        if version_key(v) <= key:
            best = v
    return best


def _row(rows: Sequence[tuple[str, T]], version: str | None) -> tuple[str, T]:
    at = version_key(nearest(version))
    chosen = rows[0]
    for row in rows:
        if version_key(row[0]) <= at:
            chosen = row
    return chosen


def capture_rule(version: str | None, arch: Arch) -> CaptureRule:
    family = "deepseek_v2" if arch.family == "deepseek_v2" else arch.key
    first, cap = _row(_CAPTURE[family], version)
    how = assumed_from(nearest(version))
    if cap is None:
        note = Note("version table", f"no {arch.module.rsplit('.', 1)[-1]}.py in SGLang {first}: "
                                     f"{arch.architecture} is not served", how)
        return CaptureRule(MISSING, False, False, notes=(note,))
    setter, safe, last, sticky = cap
    embed = "captures the embedding at layer 0" if safe else "adds hidden_states + residual, which raises at layer 0"
    notes = (Note("version table", f"{arch.architecture} (since {first}): {RULE_TEXT[setter]}; the forward {embed}"
                  + ("; its marks add up across calls" if sticky else ""), how),)
    return CaptureRule(setter, safe, last, sticky, notes=notes)


def graph_order(version: str | None) -> GraphOrder:
    first, (events, resets) = _row(_ORDER, version)
    before = "before" if GraphOrder(events, resets).ids_before_graphs else "after"
    note = Note("version table", f"since {first}: the draft's ids are applied {before} the CUDA graphs are captured"
                + ("; the graph runner resets to the defaults" if resets else ""), assumed_from(nearest(version)))
    return GraphOrder(events, resets, (note,))


def draft_loader(version: str | None) -> DraftLoader:
    first, (prefix, multi, applies, from_ids) = _row(_LOADER, version)
    what = f"applies {', '.join(applies)}" if applies else "applies no training-side norms"
    note = Note("version table", f"llama_eagle3 since {first}: {'maps' if prefix else 'skips'} layers.0.*, {what}",
                assumed_from(nearest(version)))
    return DraftLoader(prefix, multi, applies, from_ids, (note,))


def spec_rules(version: str | None) -> SpecRules:
    at = nearest(version)
    has = version_key(at) >= version_key("0.4.5")
    by_arch: list[tuple[frozenset[str], SpecConfig]] = []
    for arch in ARCHS:
        rows = _AUTO.get(arch.key)
        if rows is not None:
            by_arch.append((frozenset({arch.architecture}), _row(rows, version)[1]))
    fallback: SpecConfig = _row(_AUTO["*"], version)[1]
    _, (steps_alone, topk1, page) = _row(_SPEC, version)
    note = Note("version table", f"auto-choice for other models {fallback}", assumed_from(at))
    return SpecRules(has, tuple(by_arch) if has else (), fallback if has else None,
                     steps_alone if has else None, has, topk1 and has, page and has, (note,))


_LLAMA3 = ("LlamaForCausalLMEagle3",)
_MLA3 = ("LlamaForCausalLMEagle3", "Eagle3DeepseekV2ForCausalLM")
_PathRow = tuple[str | None, str | None, str | None, bool | None, tuple[str, ...], str | None]
# (spec v2, its topk > 1 rule, draft-extend graph width, recorder capture-safe, EAGLE-3 draft classes,
# the simulated-acceptance variable)
_PATH: tuple[tuple[str, _PathRow], ...] = (
    ("0.4.3", (None, None, None, None, (), None)),
    ("0.4.5", (None, None, None, None, _LLAMA3, OLD_SIMULATE)),
    ("0.4.7", (None, None, WIDTH_DRAFT, False, _LLAMA3, OLD_SIMULATE)),
    ("0.4.10", (None, None, WIDTH_TARGET, False, _LLAMA3, OLD_SIMULATE)),
    ("0.5.3", (None, None, WIDTH_TARGET, False, _LLAMA3, SIMULATE)),
    ("0.5.4", (None, TOPK_UNCHECKED, WIDTH_TARGET, False, _LLAMA3, SIMULATE)),
    ("0.5.5", (V2_OPT_IN, TOPK_UNCHECKED, WIDTH_TARGET, False, _LLAMA3, SIMULATE)),
    ("0.5.7", (V2_OPT_IN, TOPK_REFUSED, WIDTH_TARGET, False, _LLAMA3, SIMULATE)),
    ("0.5.11", (V2_DEFAULT, TOPK_FALLS_BACK, WIDTH_TARGET, False, _LLAMA3, SIMULATE)),
    ("0.5.12", (V2_DEFAULT, TOPK_FALLS_BACK, WIDTH_TARGET, False, _MLA3, SIMULATE)),
    ("0.5.13", (V2_ONLY, None, WIDTH_TARGET, False, _MLA3, SIMULATE)),
)
# SGLANG_ENABLE_SPEC_V2 is declared in environ.py from 0.5.5 through 0.5.13
_SWITCH = (("0.4.3", False), ("0.5.5", True), ("0.5.14", False))
_CONTEXT = (("0.4.3", CONTEXT_REFUSED), ("0.4.4", CONTEXT_OVERRIDDEN), ("0.5.1", CONTEXT_REFUSED))
_STRETCH = (("0.4.3", False), ("0.5.3", True))
# 0.5.4 turns spec v2 on with a launch flag (ServerArgs.enable_beta_spec), not the environment
_BETA_FLAG: tuple[tuple[str, str | None], ...] = (("0.4.3", None), ("0.5.4", BETA_SPEC_FLAG), ("0.5.5", None))


def spec_path(version: str | None) -> SpecPath:
    """The speculative path beyond capture; of the declared switches only the ones the rules judge are kept."""
    first, (v2, topk, width, safe, classes, simulate) = _row(_PATH, version)
    env: tuple[tuple[str, str, str], ...] = ()
    if _row(_SWITCH, version)[1]:
        env = ((SPEC_V2_ENV, "EnvBool", "False" if v2 == V2_OPT_IN else "True"),)
    if simulate == SIMULATE:
        env += ((SIMULATE, "EnvFloat", "-1"),)
    context = _row(_CONTEXT, version)[1]
    note = Note("version table", f"speculative path since {first}: spec v2 {v2 or 'absent'}"
                + (f", topk > 1 {topk}" if topk else "") + (f", draft-extend graph sized from the {width}" if width
                                                            else ""), assumed_from(nearest(version)))
    return SpecPath(env, v2, topk, width, safe, frozenset(), classes, context, _row(_STRETCH, version)[1], None, simulate,
                    (note,), spec_v2_flag=_row(_BETA_FLAG, version)[1])


_QWEN3VL = (("0.4.3", None), ("0.5.3", NO_SETTER), ("0.5.11", CAPTURED))
_QWEN35 = (("0.4.3", None), ("0.5.9", NO_SETTER), ("0.5.11", LOST), ("0.5.22", CAPTURED))
_MULTIMODAL: dict[str, tuple[tuple[str, str | None], ...]] = {
    "Qwen2_5_VLForConditionalGeneration": (("0.4.3", None), ("0.4.4", NO_SETTER), ("0.5.2", CAPTURED)),
    "Qwen3VLForConditionalGeneration": _QWEN3VL,
    "Qwen3VLMoeForConditionalGeneration": _QWEN3VL,
    "Qwen3_5ForConditionalGeneration": _QWEN35,
    "Qwen3_5MoeForConditionalGeneration": _QWEN35,
}


def multimodal(version: str | None, architecture: str) -> MultimodalCapture | None:
    rows = _MULTIMODAL.get(architecture)
    if rows is None:
        return None
    first, status = _row(rows, version)
    if status is None:
        return None
    what = {NO_SETTER: "has no set_eagle3_layers_to_capture", LOST: "passes the ids where its language model "
            "does not read them", CAPTURED: "passes the ids to its language model"}[status]
    return MultimodalCapture(architecture, status, Note("version table", f"{architecture} (since {first}) {what}",
                                                        assumed_from(nearest(version))))


def first_captured(architecture: str, after: str | None) -> str | None:
    """The first release read, after `after`, whose multimodal wrapper passes the ids on."""
    at = version_key(nearest(after))
    for first, status in _MULTIMODAL.get(architecture, ()):
        if status == CAPTURED and version_key(first) > at:
            return first
    return None
