"""What the installed EAGLE-3 draft (`srt/models/llama_eagle3.py`) loads and applies, read from it.

Up to 0.5.6 the draft is one `midlayer` and `fc` takes 3 aux states; a `layers.0.*` checkpoint name or
a training-side norm has no parameter and is skipped silently. From 0.5.12 the draft is `layers`
(`legacy_name_map` maps `midlayer` -> `layers.0`, several layers allowed), `fc` is sized from
`len(eagle_aux_hidden_state_layer_ids)`, and `fc_norm` (or legacy `use_aux_norm`) and `norm_output`
are applied when the draft config sets them; from 0.5.17 `norm_before_fc` (weight `input_norm`) too.
`norm_before_residual` is never read.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from eagle3_tui.sglang.installed.notes import Note
from eagle3_tui.sglang.installed.source import Modules, squash

DRAFT = "sglang.srt.models.llama_eagle3"

FC_NORM = "fc_norm"
NORM_OUTPUT = "norm_output"
NORM_BEFORE_FC = "norm_before_fc"


@dataclass(frozen=True)
class DraftLoader:
    layers_prefix: bool
    """Checkpoint names `layers.0.*` load (not skipped)."""
    multi_layer: bool
    applies: tuple[str, ...]
    """Draft-config norms the draft applies when the config turns them on."""
    fc_from_ids: bool
    """`fc` takes len(layer ids) aux states (else always 3)."""
    notes: tuple[Note, ...] = field(default=(), compare=False)

    def to_dict(self) -> dict[str, object]:
        return {"layers_prefix": self.layers_prefix, "multi_layer": self.multi_layer, "applies": list(self.applies)}


_APPLIES = (
    (FC_NORM, re.compile(r"getattr\(config, \"fc_norm\"")),
    (NORM_OUTPUT, re.compile(r"getattr\(config, \"norm_output\"")),
    (NORM_BEFORE_FC, re.compile(r"\"norm_before_fc\"")),
)


def read_draft_loader(mods: Modules) -> DraftLoader | None:
    text = mods.text(DRAFT)
    if text is None:
        return None
    flat = squash(text)
    path = Modules.path_of(DRAFT)
    layers_prefix = '"midlayer": "layers.0"' in flat or "self.layers = nn.ModuleList(" in flat
    single = "only supports 1 layer" in flat or "range(config.num_hidden_layers)" not in flat
    applies = tuple(name for name, pat in _APPLIES if pat.search(flat))
    fc_from_ids = "len(layer_ids) if layer_ids else 3" in flat
    notes = [
        Note(path, "maps midlayer -> layers.0 (layers.0.* names load)" if layers_prefix
             else "one `midlayer`: layers.0.* checkpoint names are skipped silently"),
        Note(path, "several draft layers" if not single else "refuses drafts with more than one layer"),
        Note(path, f"applies {', '.join(applies)} when the draft config sets them" if applies
             else "applies no training-side norms (fc_norm, norm_output, norm_before_fc are ignored)"),
        Note(path, "fc takes len(eagle_aux_hidden_state_layer_ids) aux states" if fc_from_ids
             else "fc always takes 3 aux states"),
    ]
    return DraftLoader(layers_prefix, not single, applies, fc_from_ids, tuple(notes))
