"""How one release's target model file captures aux hidden states, read from that file.

Two pieces of SGLang code decide it (research/sglang.md §3):

* `set_eagle3_layers_to_capture(layer_ids)` on the CausalLM class turns the draft config's ids into
  `layers_to_capture` (loop indices: index i captures the input of layer i, i.e. boundary i). The
  rules seen across releases: +1 always (llama.py 0.4.9-0.5.23, qwen2/qwen3), +1 only when the first id
  is 1 (deepseek_v2.py and glm4_moe_lite.py from 0.5.17), ids verbatim when they reach the last
  boundary (gpt_oss.py from 0.5.17), no argument at all (llama.py 0.4.6: always the default), or no
  method (qwen2.py 0.4.9, deepseek_v2.py 0.4.9: start-up fails).
* the model's `forward` loop. `hidden_states + residual` (llama.py <= 0.5.20, deepseek_v2.py <= 0.5.12,
  glm4_moe.py <= 0.5.20, llama4.py <= 0.5.20) raises at index 0, where `residual` is still None; the
  `... if residual is not None else hidden_states` form (qwen2.py), the communicator's
  `captured_last_layer_outputs` (qwen2_moe.py 0.5.6+, deepseek_v2.py 0.5.17+) and the layer-boundary
  `capture_output=` (0.5.23) all capture the embedding there.

Qwen-MoE's model-level setter marks layers with `setattr(self.layers[i], "_is_layer_to_capture", True)`
and never clears a mark ("sticky"): every call adds to the set.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from eagle3_tui.sglang.installed.archs import Arch
from eagle3_tui.sglang.installed.notes import Note
from eagle3_tui.sglang.installed.source import Located, Modules, squash

SETTER = "set_eagle3_layers_to_capture"

PLUS1 = "plus1"
PLUS1_IF_FIRST_IS_1 = "plus1-if-first-is-1"
VERBATIM_IF_LAST = "verbatim-if-max-is-N"
IGNORES_IDS = "ignores-ids"
MISSING = "missing"

RULE_TEXT = {
    PLUS1: "explicit ids +1 each",
    PLUS1_IF_FIRST_IS_1: "explicit ids +1 only when the first id is 1, else taken verbatim",
    VERBATIM_IF_LAST: "explicit ids verbatim when the largest is the layer count, else +1 each",
    IGNORES_IDS: "takes no ids: always the default [2, N//2, N-3]",
    MISSING: f"no {SETTER}: EAGLE3 cannot start on this model",
}

_DEFAULT = re.compile(r"\[ ?2, num_layers // 2, num_layers - 3,? ?\]")


@dataclass(frozen=True)
class CaptureRule:
    """What one release's model file does with the ids (see the module docstring)."""

    setter: str
    embed_safe: bool
    """Whether index 0 (the embedding output) is captured rather than crashing the forward."""
    last_boundary: bool
    """Whether boundary N (the last layer's output) can be captured."""
    sticky: bool = False
    patched: bool = False
    """The story's `capture_embedding_for_eagle3` patch: id -1 captures the embedding first."""
    notes: tuple[Note, ...] = ()


def read_capture_rule(mods: Modules, arch: Arch) -> CaptureRule | None:
    """The rule read from the installed files, or None when a needed file or pattern is not there."""
    if mods.find_class(arch.module, arch.architecture) is None:
        return None
    return _rule_for(mods, arch.module, arch.architecture, depth=0)


def _rule_for(mods: Modules, module: str, cls: str, depth: int) -> CaptureRule | None:
    setter = mods.method(module, cls, SETTER)
    if setter is None:
        return CaptureRule(MISSING, False, False, notes=(Note(Modules.path_of(module), f"{cls} has no {SETTER}"),))
    text = squash(setter.segment())
    if f".language_model.{SETTER}(" in text and depth < 2:
        home = mods.attribute_class(module, cls, "language_model")
        if home is None:
            return None
        inner = _rule_for(mods, home[0], home[1], depth + 1)
        if inner is None:
            return None
        hop = Note(setter.where, f"{cls}.{SETTER} hands the ids to its language model {home[1]}")
        return CaptureRule(inner.setter, inner.embed_safe, inner.last_boundary, inner.sticky, inner.patched,
                           (hop, *inner.notes))
    setter_kind = _setter_kind(setter, text)
    if setter_kind is None:
        return None
    model = mods.attribute_class(module, cls, "model")
    if model is None:
        return None
    forward = mods.method(model[0], model[1], "forward")
    if forward is None:
        return None
    style = _forward_style(squash(forward.segment()))
    if style is None:
        return None
    embed_safe, last_boundary, style_text = style
    sticky, sticky_note = _sticky(mods, model, text)
    patched = "capture_embedding_for_eagle3" in text and "capture_embedding_for_eagle3" in squash(forward.segment())
    notes = [Note(setter.where, f"{cls}.{SETTER}: {RULE_TEXT[setter_kind]}"),
             Note(forward.where, f"{model[1]}.forward: {style_text}")]
    if sticky_note is not None:
        notes.append(sticky_note)
    if patched:
        notes.append(Note(setter.where, "patched: capture_embedding_for_eagle3 captures the embedding for id -1"))
    return CaptureRule(setter_kind, embed_safe, last_boundary, sticky, patched, tuple(notes))


def _setter_kind(setter: Located, text: str) -> str | None:
    node = setter.node
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and len(node.args.args) <= 1:
        return IGNORES_IDS if _DEFAULT.search(text) else None
    if not _DEFAULT.search(text):
        return None
    if "layer_ids[0] == 1" in text:
        return PLUS1_IF_FIRST_IS_1
    if "max(layer_ids) == num_layers" in text:
        return VERBATIM_IF_LAST
    if "val + 1 for val in layer_ids" in text:
        return PLUS1
    return None


def _forward_style(text: str) -> tuple[bool, bool, str] | None:
    """(embed_safe, last_boundary, what it does) from the model's forward, or None if unrecognised."""
    if "layers_to_capture" not in text and "_is_layer_to_capture" not in text:
        return None
    last = "i + 1 in self.layers_to_capture" in text or "self.end_layer in self.layers_to_capture" in text
    reach = "boundary N (after the last layer) is capturable" if last else "boundaries 0..N-1"
    if "aux_hidden_states.append(hidden_states + residual)" in text:
        return False, last, f"appends hidden_states + residual, which raises at layer 0 (residual is None); {reach}"
    if "hidden_states + residual if residual is not None else hidden_states" in text:
        return True, last, f"appends hidden_states alone while residual is None (the embedding); {reach}"
    if "aux_hidden_states.append(snapshot(hidden_states, residual))" in text:
        return True, last, f"snapshot() copies hidden_states alone while residual is None (the embedding); {reach}"
    if "captured_last_layer_outputs=" in text:
        return True, last, f"the layer communicator captures the residual after prepare_attn (the embedding at layer 0); {reach}"
    if "capture_output=" in text:
        return True, last, f"the layer boundary's capture_output (the embedding at layer 0); {reach}"
    return None


def _sticky(mods: Modules, model: tuple[str, str], setter_text: str) -> tuple[bool, Note | None]:
    if f"self.model.{SETTER}(" not in setter_text:
        return False, None
    inner = mods.method(model[0], model[1], SETTER)
    if inner is None:
        return False, None
    text = squash(inner.segment())
    if "setattr(self.layers[" in text:
        return True, Note(inner.where, f"{model[1]}.{SETTER} marks self.layers[i] and never clears a mark: "
                                       "calls add up; an index past the last layer raises IndexError")
    return False, None
