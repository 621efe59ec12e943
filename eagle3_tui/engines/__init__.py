"""The engine seam (`base.Engine`) and its two implementations, SGLang and vLLM. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from eagle3_tui.engines.base import (
    Captures,
    Engine,
    EngineEvent,
    Failed,
    Launch,
    Numerics,
    Ready,
    SpecStats,
    Started,
)
from eagle3_tui.engines.sglang import SGLangEngine
from eagle3_tui.engines.vllm import VLLMEngine
from eagle3_tui.errors import UserError

__all__ = [
    "ENGINES",
    "Captures",
    "Engine",
    "EngineEvent",
    "Failed",
    "Launch",
    "Numerics",
    "Ready",
    "SpecStats",
    "Started",
    "engine_for_launch",
    "get_engine",
]

ENGINES: dict[str, Engine] = {e.name: e for e in (SGLangEngine(), VLLMEngine())}


def get_engine(name: str) -> Engine:
    """The engine named `name` ("sglang" or "vllm"); UserError otherwise."""
    try:
        return ENGINES[name.strip().lower()]
    except KeyError:
        raise UserError(f"unknown engine {name!r} (known: {', '.join(ENGINES)})") from None


def engine_for_launch(argv: Sequence[str]) -> Engine:
    """The engine whose launch command argv is; UserError (one sentence) when it is none of them."""
    for engine in ENGINES.values():
        if engine.is_launch(argv):
            return engine
    shown = " ".join(str(t) for t in list(argv)[:4])
    raise UserError(f"not a launch command of {' or '.join(ENGINES)}: {shown!r}")
