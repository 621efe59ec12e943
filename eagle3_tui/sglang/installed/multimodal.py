"""Multimodal targets: whether the wrapper class passes the draft's layer ids to the language model that
captures them, read from the release's model file.

A vision-language target (`Qwen2_5_VLForConditionalGeneration`, `Qwen3VLForConditionalGeneration`,
`Qwen3_5ForConditionalGeneration`, ...) wraps a language model in `self.model`. Three shapes seen in the
releases read (0.5.0rc0-0.5.23):

* no `set_eagle3_layers_to_capture` on the wrapper: EAGLE3 start-up fails (Qwen2.5-VL before 0.5.2,
  added by sglang PR #8801; Qwen3-VL and Qwen3.5 before 0.5.11);
* the wrapper writes `self.model.layers_to_capture`, and the language model's forward reads it: captured
  (Qwen2.5-VL 0.5.2+, Qwen3-VL 0.5.11+);
* the wrapper writes `self.model.layers_to_capture`, but the language model collects through per-layer
  `_is_layer_to_capture` marks that only its own setter makes: no aux state is captured and the wrapper's
  `hidden_states, aux_hidden_states = hidden_states` fails while the CUDA graphs are captured (Qwen3.5
  0.5.11-0.5.21, sglang PR #38307); from 0.5.22 the wrapper calls the language model's own setter.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from eagle3_tui.sglang.installed.notes import Note
from eagle3_tui.sglang.installed.source import Modules

SETTER = "set_eagle3_layers_to_capture"

# HF architectures[0] -> the SGLang module that defines it
MULTIMODAL: dict[str, str] = {
    "Qwen2_5_VLForConditionalGeneration": "sglang.srt.models.qwen2_5_vl",
    "Qwen3VLForConditionalGeneration": "sglang.srt.models.qwen3_vl",
    "Qwen3VLMoeForConditionalGeneration": "sglang.srt.models.qwen3_vl_moe",
    "Qwen3_5ForConditionalGeneration": "sglang.srt.models.qwen3_5",
    "Qwen3_5MoeForConditionalGeneration": "sglang.srt.models.qwen3_5",
}

NO_SETTER = "no-setter"
LOST = "lost"
CAPTURED = "captured"


@dataclass(frozen=True)
class MultimodalCapture:
    architecture: str
    status: str
    """NO_SETTER, LOST or CAPTURED."""
    note: Note


def read_multimodal(mods: Modules, architecture: str) -> MultimodalCapture | None:
    """None when the architecture is not a known multimodal wrapper, is not in this release, or its code
    does not match a shape above."""
    module = MULTIMODAL.get(architecture)
    if module is None or mods.find_class(module, architecture) is None:
        return None
    setter = mods.method(module, architecture, SETTER)
    if setter is None:
        return MultimodalCapture(architecture, NO_SETTER, Note(
            Modules.path_of(module), f"{architecture} has no {SETTER}: EAGLE3 start-up fails"))
    inner = _inner(mods, module, architecture)
    body = setter.segment().split(f"def {SETTER}", 1)[-1]
    where = setter.where
    if inner is None:
        return None
    inner_mod, inner_cls = inner
    own = mods.method(inner_mod, inner_cls, SETTER)
    if f".{SETTER}(" in body and own is not None:
        return MultimodalCapture(architecture, CAPTURED, Note(where, f"{architecture}.{SETTER} calls "
                                                                     f"{inner_cls}.{SETTER}: captured"))
    forward = mods.method(inner_mod, inner_cls, "forward")
    text = forward.segment() if forward is not None else ""
    if "layers_to_capture" in body and re.search(r"in self\.layers_to_capture", text):
        return MultimodalCapture(architecture, CAPTURED, Note(where, f"{architecture}.{SETTER} sets "
                                                                     f"{inner_cls}.layers_to_capture, which its "
                                                                     "forward reads: captured"))
    if "layers_to_capture" in body and "_is_layer_to_capture" in text:
        return MultimodalCapture(architecture, LOST, Note(where, (
            f"{architecture}.{SETTER} sets {inner_cls}.layers_to_capture, but {inner_cls}.forward collects only "
            "layers marked _is_layer_to_capture: no aux state is captured and start-up fails unpacking them")))
    return None


_LM_CLS = re.compile(r"language_model_cls\s*=\s*(\w+)")


def _inner(mods: Modules, module: str, cls: str) -> tuple[str, str] | None:
    """(module, class) of the wrapper's `self.model`: built directly, or from `language_model_cls`."""
    got = mods.attribute_class(module, cls, "model")
    if got is not None:
        return got
    for init in mods.methods(module, cls, "__init__"):
        m = _LM_CLS.search(init.segment())
        if m is not None:
            home = "sglang." + init.path.removesuffix(".py").replace("/", ".")
            found = mods.find_class(home, m.group(1))
            if found is not None:
                return found[0], m.group(1)
    return None
