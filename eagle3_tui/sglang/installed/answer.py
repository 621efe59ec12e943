"""The model's answer for one served target: what a layer-id list is captured as on this release, and why.

`answer(release, arch, num_layers, layer_ids)` is what `eagle3-tui sglang-info`, the doctor and (later)
the presets and the status bar read. Boundaries: 0 = embedding output, h = input of layer h, in the order
fed to the draft's fc (ascending).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from eagle3_tui.eagle.spec_config import SpecConfig
from eagle3_tui.sglang.installed.archs import Arch
from eagle3_tui.sglang.installed.evaluate import (
    Captured,
    CaptureFailure,
    embed_id,
    fc_states_for,
    replay,
    setter_indices,
)
from eagle3_tui.sglang.installed.loader import DraftLoader
from eagle3_tui.sglang.installed.notes import Note
from eagle3_tui.sglang.installed.release import Release
from eagle3_tui.sglang.installed.spec import SpecRules


@dataclass(frozen=True)
class Answer:
    version: str | None
    arch: Arch
    num_layers: int
    layer_ids: tuple[int, ...] | None
    captures: tuple[int, ...] | None
    """What prefill captures (CUDA graphs on, SGLang's default); None when start-up fails."""
    captures_cuda_graph: tuple[int, ...] | None
    """What every graphed decode step replays (the graphs' snapshot)."""
    captures_without_cuda_graph: tuple[int, ...] | None
    """Prefill and decode with `--disable-cuda-graph`."""
    fails: str | None
    fails_without_cuda_graph: str | None
    embed_capture: bool
    """Whether id -1 captures the embedding output (stock, or the capture_embedding_for_eagle3 patch)."""
    embed_id: int | None
    """The id that captures the embedding here (-1, or 0 where ids are taken verbatim), or None."""
    patched: bool
    requested: tuple[int, ...] | None
    """The boundaries the setter asks for, in id order, before the loop drops the unreachable ones."""
    max_boundary: int
    """The last boundary the forward can capture (N-1, or N where the last layer's output is capturable)."""
    loader: DraftLoader
    spec: SpecRules
    auto_spec: SpecConfig | None
    log_stream: str
    notes: tuple[Note, ...]
    release: Release | None = field(default=None, compare=False, repr=False)

    def evaluate(self, layer_ids: Sequence[int] | None) -> Answer:
        """The same release and target with other ids."""
        if self.release is None:
            raise ValueError("this answer was built without its release")
        return answer(self.release, self.arch, self.num_layers, layer_ids)

    def ids_for(self, boundaries: Sequence[int]) -> tuple[int, ...] | None:
        """The draft-config ids whose prefill captures exactly `boundaries` (fc order) on this release without
        failing; None when no id list does (the embedding without the patch). Graphed decode can still replay
        the default before 0.5.11: `evaluate(ids).prefill_only` says so."""
        want = tuple(sorted(set(int(b) for b in boundaries)))
        for cand in (tuple(b - 1 for b in want), want):
            got = self.evaluate(cand)
            if got.fails is None and got.captures == want:
                return cand
        return None

    @property
    def prefill_only(self) -> bool:
        """The ids reach prefill, but graphed decode replays other boundaries."""
        return (self.captures is not None and self.captures_cuda_graph is not None
                and self.captures != self.captures_cuda_graph)

    @property
    def assumed(self) -> tuple[Note, ...]:
        return tuple(n for n in self.notes if n.assumed)

    @property
    def source(self) -> str:
        """"read from source", or the version the table stood in for (the first assumed note's)."""
        return self.assumed[0].how if self.assumed else "read from source"

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version or "unknown",
            "arch": self.arch.architecture,
            "num_layers": self.num_layers,
            "layer_ids": list(self.layer_ids) if self.layer_ids is not None else None,
            "captures": _list(self.captures),
            "captures_cuda_graph": _list(self.captures_cuda_graph if self.captures_cuda_graph is not None
                                         else self.captures),
            "captures_without_cuda_graph": _list(self.captures_without_cuda_graph),
            "fails": self.fails,
            "fails_without_cuda_graph": self.fails_without_cuda_graph,
            "embed_capture": self.embed_capture,
            "embed_id": self.embed_id,
            "patched": self.patched,
            "draft_loader": self.loader.to_dict(),
            "auto_spec": list(self.auto_spec) if self.auto_spec is not None else None,
            "log_stream": self.log_stream,
            "speculative_path": self.release.path.to_dict() if self.release is not None else None,
            "source": self.source,
            "evidence": [n.to_dict() for n in self.notes],
        }


def _list(values: tuple[int, ...] | None) -> list[int] | None:
    return list(values) if values is not None else None


def answer(release: Release, arch: Arch, num_layers: int, layer_ids: Sequence[int] | None) -> Answer:
    """Evaluate `layer_ids` (None: the draft config has no id key) on `arch` with `num_layers` layers."""
    rule = release.capture_rule(arch)
    ids = tuple(int(i) for i in layer_ids) if layer_ids is not None else None
    order = release.graph_order
    if not release.spec.has_eagle3:
        msg = f"SGLang {release.version or 'this release'} has no EAGLE3: --speculative-algorithm EAGLE3 is refused"
        got = Captured(None, None, None, msg, msg)
    else:
        got = replay(rule, order.events, order.graph_resets, ids, num_layers,
                     fc_states=fc_states_for(ids, release.loader.fc_from_ids))
    eid = embed_id(rule, num_layers) if release.spec.has_eagle3 else None
    requested: tuple[int, ...] | None
    try:
        asked = tuple(setter_indices(rule, ids, num_layers))
        requested = (0, *asked) if rule.patched and ids is not None and -1 in ids else asked
    except CaptureFailure:
        requested = None
    notes = (*rule.notes, *order.notes, *release.loader.notes, *release.spec.notes, release.log_note)
    return Answer(
        version=release.version,
        arch=arch,
        num_layers=num_layers,
        layer_ids=ids,
        captures=got.prefill,
        captures_cuda_graph=got.decode_graph if got.fails is None else None,
        captures_without_cuda_graph=got.eager,
        fails=got.fails,
        fails_without_cuda_graph=got.eager_fails,
        embed_capture=eid == -1,
        embed_id=eid,
        patched=rule.patched,
        requested=requested,
        max_boundary=num_layers if rule.last_boundary else num_layers - 1,
        loader=release.loader,
        spec=release.spec,
        auto_spec=release.spec.auto_spec(arch.architecture) if release.spec.has_eagle3 else None,
        log_stream=release.log_stream,
        notes=notes,
        release=release,
    )
