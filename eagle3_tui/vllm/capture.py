"""Which target states vLLM feeds an EAGLE-3 draft: the draft config's layer ids, read as vLLM reads them.

vLLM 0.32 (`v1/worker/gpu_model_runner.py`, also used by the CPU runner) takes the draft config's top-level
`eagle_aux_hidden_state_layer_ids` (speculators format), else `eagle_config.eagle_aux_hidden_state_layer_ids`,
else the target model's default `(2, num_layers // 2, num_layers - 3)`. Its ids are boundaries (id i is the
residual stream entering layer i, HF `hidden_states[i]`), and the target de-duplicates them with
`sorted(set(...))`, so the default triple collapses on a target under 7 layers (e.g. 4 layers: (2, 2, 1)
-> [1, 2]) and the draft's fc receives fewer states than it was built for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

IDS_KEY = "eagle_aux_hidden_state_layer_ids"
TOP_LEVEL = IDS_KEY
NESTED = f"eagle_config.{IDS_KEY}"
DEFAULT = "default"


def default_ids(num_layers: int) -> tuple[int, int, int]:
    """The target's own choice when the draft names no ids (`get_eagle3_aux_hidden_state_layers`)."""
    return (2, num_layers // 2, num_layers - 3)


def _int_list(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, (list, tuple)) and value and all(
        isinstance(x, int) and not isinstance(x, bool) for x in value
    ):
        return tuple(value)
    return None


@dataclass(frozen=True)
class AuxLayers:
    """The ids vLLM uses for a draft config and where it found them."""

    ids: tuple[int, ...]
    """As written (or the default), before vLLM's de-duplication."""
    source: str
    """`TOP_LEVEL`, `NESTED` or `DEFAULT`."""
    num_layers: int
    ignored: tuple[str, ...] = ()
    """Keys that name ids vLLM does not use (a nested list shadowed by the top-level one, a malformed value)."""

    @property
    def boundaries(self) -> tuple[int, ...]:
        """What the target captures: vLLM's ids are boundaries, de-duplicated and ascending."""
        return tuple(sorted(set(self.ids)))

    @property
    def collapsed(self) -> bool:
        """Whether de-duplication dropped ids (the draft's fc then receives fewer states)."""
        return len(self.boundaries) < len(self.ids)


def aux_layers(config: Mapping[str, Any], num_layers: int) -> AuxLayers:
    """The ids vLLM takes from a draft config.json's dict: top-level wins over `eagle_config`, else the default."""
    top_raw = config.get(IDS_KEY)
    nested_holder = config.get("eagle_config")
    nested_raw = nested_holder.get(IDS_KEY) if isinstance(nested_holder, Mapping) else None
    top, nested = _int_list(top_raw), _int_list(nested_raw)
    ignored: list[str] = []
    if top_raw is not None and top is None:
        ignored.append(TOP_LEVEL)
    if nested_raw is not None and (nested is None or top is not None):
        ignored.append(NESTED)
    if top is not None:
        return AuxLayers(top, TOP_LEVEL, num_layers, tuple(ignored))
    if nested is not None:
        return AuxLayers(nested, NESTED, num_layers, tuple(ignored))
    return AuxLayers(default_ids(num_layers), DEFAULT, num_layers, tuple(ignored))


def ids_to_boundaries(ids: Sequence[int]) -> tuple[int, ...]:
    """vLLM's ids are boundaries; the target captures each once, in ascending order."""
    return tuple(sorted({int(i) for i in ids}))


def boundaries_to_ids(boundaries: Sequence[int]) -> tuple[int, ...]:
    """The top-level `eagle_aux_hidden_state_layer_ids` that make vLLM capture `boundaries`."""
    return tuple(int(h) for h in boundaries)


def uncaptured(boundaries: Sequence[int], num_layers: int) -> tuple[int, ...]:
    """Boundaries vLLM never captures. 0.32's `EagleModelMixin._maybe_add_hidden_state` is called with
    `start_layer` before the loop (0: the embedding) and with `idx + 1` after each layer (up to N, the last
    layer's output before the final norm), so every boundary 0..N is reachable."""
    return tuple(h for h in boundaries if h < 0 or h > num_layers)
