"""Replay SGLang's start-up on the capture rules: which boundaries prefill and graphed decode capture.

The calls happen in the order `GraphOrder.events` gives ("reset": the setter with no ids; "graph":
the decode CUDA graphs are captured, after the graph runner's own reset when it has one; "ids": the
draft config's ids). What the graphs saw is what every graphed decode step replays; what is set at the
end is what prefill (and eager decode, `--disable-cuda-graph`) captures. Boundaries are loop indices:
index i captures the input of layer i (0 = the embedding output), in ascending order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from eagle3_tui.sglang.installed.capture import (
    IGNORES_IDS,
    MISSING,
    PLUS1,
    PLUS1_IF_FIRST_IS_1,
    VERBATIM_IF_LAST,
    CaptureRule,
)
from eagle3_tui.sglang.installed.runner import GRAPH, IDS, RESET

Ids = Sequence[int] | None


class CaptureFailure(Exception):
    """SGLang would raise here: the sentence says where and why."""


@dataclass
class _State:
    indices: list[int] = field(default_factory=list)
    marks: set[int] = field(default_factory=set)
    embed: bool = False


@dataclass(frozen=True)
class Captured:
    prefill: tuple[int, ...] | None
    decode_graph: tuple[int, ...] | None
    eager: tuple[int, ...] | None
    """With `--disable-cuda-graph` (differs from `prefill` only for sticky marks)."""
    fails: str | None
    eager_fails: str | None
    notes: tuple[str, ...] = ()


def default_indices(n: int) -> list[int]:
    return [2, n // 2, n - 3]


def setter_indices(rule: CaptureRule, ids: Ids, n: int) -> list[int]:
    """`layers_to_capture` as the release's setter computes it from the ids."""
    if ids is None or rule.setter == IGNORES_IDS:
        return default_indices(n)
    vals = [int(v) for v in ids if not (rule.patched and v < 0)]
    if rule.setter == PLUS1:
        return [v + 1 for v in vals]
    if rule.setter == PLUS1_IF_FIRST_IS_1:
        return [v + 1 for v in vals] if vals and vals[0] == 1 else vals
    if rule.setter == VERBATIM_IF_LAST:
        return vals if vals and max(vals) == n else [v + 1 for v in vals]
    raise CaptureFailure("the model has no set_eagle3_layers_to_capture: EAGLE3 start-up fails (AttributeError)")


def _apply(state: _State, rule: CaptureRule, ids: Ids, n: int) -> None:
    idx = setter_indices(rule, ids, n)
    if ids is not None and rule.patched:
        state.embed = -1 in ids
    if not rule.sticky:
        state.indices = idx
        return
    for i in idx:
        if not -n <= i < n:
            raise CaptureFailure(f"set_eagle3_layers_to_capture indexes self.layers[{i}] of a {n}-layer model: "
                                 "IndexError at start-up")
        state.marks.add(i % n)


def _boundaries(state: _State, rule: CaptureRule, n: int) -> tuple[int, ...]:
    hi = n if rule.last_boundary else n - 1
    got = sorted(state.marks) if rule.sticky else sorted({i for i in state.indices if 0 <= i <= hi})
    if 0 in got and not rule.embed_safe:
        raise CaptureFailure("the first forward raises TypeError: it adds hidden_states + residual at layer 0, "
                             "where residual is still None (id -1 needs the embed-capture patch)")
    return tuple([0, *got] if state.embed and 0 not in got else got)


def _check_count(got: tuple[int, ...], want: int, when: str) -> None:
    if len(got) == want:
        return
    shown = ", ".join(map(str, got)) or "none"
    if len(got) == 1:
        # llama_eagle3 applies fc only when the input is wider than the embedding: one state of the
        # draft's width skips fc silently instead of failing.
        raise CaptureFailure(f"{when} fails, or (when the target and draft widths match) the draft silently "
                             f"skips fc: its fc takes {want} aux states but the target captures 1 ({shown})")
    raise CaptureFailure(f"{when} fails: the draft's fc takes {want} aux states but the target captures "
                         f"{len(got)} ({shown})")


def replay(
    rule: CaptureRule,
    events: Sequence[str],
    graph_resets: bool,
    ids: Ids,
    n: int,
    *,
    fc_states: int,
) -> Captured:
    """Run the start-up order with CUDA graphs on and off; `fc_states` is what the draft's fc takes."""
    if rule.setter == MISSING:
        msg = "the model has no set_eagle3_layers_to_capture: EAGLE3 start-up fails (AttributeError)"
        return Captured(None, None, None, msg, msg)
    with_graphs, graph_seen, fails = _run(rule, events, graph_resets, ids, n, fc_states)
    eager, _, eager_fails = _run(rule, [e for e in events if e != GRAPH], False, ids, n, fc_states)
    return Captured(with_graphs, graph_seen, eager, fails, eager_fails)


def _run(rule: CaptureRule, events: Sequence[str], graph_resets: bool, ids: Ids, n: int,
         fc_states: int) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None, str | None]:
    state = _State()
    graph: tuple[int, ...] | None = None
    try:
        for ev in events:
            if ev == RESET:
                _apply(state, rule, None, n)
            elif ev == IDS:
                _apply(state, rule, ids, n)
            elif ev == GRAPH:
                if graph_resets:
                    _apply(state, rule, None, n)
                graph = _boundaries(state, rule, n)
                _check_count(graph, fc_states, "capturing the decode CUDA graphs at start-up")
        prefill = _boundaries(state, rule, n)
        _check_count(prefill, fc_states, "the first forward (the server's warm-up request)")
    except CaptureFailure as err:
        return None, graph, str(err)
    return prefill, graph, None


def fc_states_for(ids: Ids, fc_from_ids: bool) -> int:
    """How many aux states the draft's fc takes: len(ids) from 0.5.12 (when ids are given), else 3."""
    return len(ids) if fc_from_ids and ids else 3


def embed_id(rule: CaptureRule, n: int) -> int | None:
    """The config id that captures the embedding (boundary 0) on this release, or None."""
    if rule.setter == MISSING:
        return None
    if rule.patched:
        return -1
    for cand in (-1, 0):
        try:
            idx = setter_indices(rule, [cand, 2, n - 4], n)
        except CaptureFailure:
            return None
        if idx and idx[0] == 0 and rule.embed_safe:
            return cand
    return None
