"""The session's side of an engine: the reader of its log, its presets, the plans that apply them, what
the launch command serves, and the sweep's launch commands, each in the engine's own terms.

`terms_for(engine)` is the one place that chooses: SGLang keeps its release-aware rules (`SGLangTerms`:
effective flags, the installed release's capture rule, the doctor's advice preset); every other engine
is read through the engine seam (`SeamTerms`). The session, the sweep and the commands ask the terms
and never branch on an engine's name.
"""

from __future__ import annotations

from eagle3_tui.engines import Engine
from eagle3_tui.session.terms.base import EngineTerms, PresetInputs
from eagle3_tui.session.terms.seam import SeamTerms
from eagle3_tui.session.terms.sglang import SGLangTerms

__all__ = ["EngineTerms", "PresetInputs", "SGLangTerms", "SeamTerms", "terms_for"]


def terms_for(engine: Engine) -> EngineTerms:
    return SGLangTerms(engine) if engine.name == "sglang" else SeamTerms(engine)
