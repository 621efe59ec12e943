"""When the target's capture layers are set, relative to the decode CUDA graphs, read from model_runner.py.

`if i in self.layers_to_capture` is Python control flow: a CUDA graph bakes in the layers that were set
when it was captured. In 0.4.9 and 0.5.6 `ModelRunner.initialize` captures the graphs first
(`init_cuda_graphs` / `init_device_graphs`, and `CudaGraphRunner.__init__` calls the setter with no ids,
i.e. the defaults) and applies the draft config's ids afterwards: prefill (not graphed) sees the ids,
every graphed decode/verify step replays the defaults. From 0.5.12 the ids are applied first
(`init_aux_hidden_state_capture`, later `configure_aux_hidden_state_capture`) and the graph runner no
longer resets them.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from eagle3_tui.sglang.installed.capture import SETTER
from eagle3_tui.sglang.installed.notes import Note
from eagle3_tui.sglang.installed.source import Located, Modules, segment

RUNNER = "sglang.srt.model_executor.model_runner"
GRAPH_RUNNER = "sglang.srt.model_executor.cuda_graph_runner"
# Who drives start-up from 0.5.17: the scheduler calls the TP worker's init_attention_backends, then init_cuda_graphs.
WORKERS = ("sglang.srt.managers.scheduler", "sglang.srt.managers.tp_worker")
_GRAPH_INITS = frozenset({"init_cuda_graphs", "init_device_graphs"})
_IDS_CALLS = frozenset({"configure_aux_hidden_state_capture", "init_aux_hidden_state_capture"})

GRAPH = "graph"
IDS = "ids"
RESET = "reset"


@dataclass(frozen=True)
class GraphOrder:
    events: tuple[str, ...]
    """Start-up order of: "reset" (the setter called with no ids), "graph" (decode graphs captured), "ids"."""
    graph_resets: bool
    """Whether capturing the graphs calls the setter with no ids (the defaults) first."""
    notes: tuple[Note, ...] = ()

    @property
    def ids_before_graphs(self) -> bool:
        return GRAPH not in self.events or (IDS in self.events and self.events.index(IDS) < self.events.index(GRAPH))


def read_graph_order(mods: Modules) -> GraphOrder | None:
    """The order read from model_runner.py (and cuda_graph_runner.py), or None when it cannot be told.

    Up to 0.5.12 `ModelRunner.initialize` does both; from 0.5.17 the TP worker calls
    `model_runner.init_attention_backends()` (which applies the ids) and then `init_cuda_graphs()`.
    """
    found: list[tuple[Located, list[str]]] = []
    for driver in _drivers(mods):
        events = _event_list(mods, driver)
        if IDS in events or RESET in events:
            found.append((driver, events))
            if GRAPH in events:
                break
    if not found:
        return None
    driver, events = next(((d, e) for d, e in found if GRAPH in e), found[0])
    resets, reset_note = _graph_runner_resets(mods)
    order = GraphOrder(tuple(events), resets)
    first = "before" if order.ids_before_graphs else "after"
    name = getattr(driver.node, "name", "start-up")
    notes = [Note(driver.where, f"{name} applies the draft's ids {first} capturing the CUDA graphs")]
    if reset_note is not None:
        notes.append(reset_note)
    return GraphOrder(order.events, resets, tuple(notes))


def _drivers(mods: Modules) -> Iterator[Located]:
    init = mods.method(RUNNER, "ModelRunner", "initialize")
    if init is not None:
        yield init
    for module in WORKERS:
        got = mods.get(module)
        if got is None:
            continue
        for node in ast.walk(got[1]):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and "cuda_graphs(" in segment(got[0], node):
                yield Located(Modules.path_of(module), node, got[0])


def _event_list(mods: Modules, driver: Located) -> list[str]:
    events: list[str] = []
    own = {getattr(driver.node, "name", "")} if driver.path == Modules.path_of(RUNNER) else set()
    for ev in _events(mods, driver.node, depth=0, seen=own, home=_module_of_path(driver.path)):
        if not events or events[-1] != ev:
            events.append(ev)
        if GRAPH in events and IDS in events:
            break
    return events


def _module_of_path(path: str) -> str:
    return "sglang." + path.removesuffix(".py").replace("/", ".")


def _callee(mods: Modules, home: str, name: str) -> Located | None:
    """A function named `name` in the calling module (any class), else a ModelRunner method."""
    local = mods.defs(home, name)
    if local:
        return local[0]
    for module in (RUNNER, *WORKERS):
        for cls in ("ModelRunner", "TpModelWorker"):
            hit = mods.method(module, cls, name)
            if hit is not None:
                return hit
    return None


def _events(mods: Modules, fn: ast.AST, depth: int, seen: set[str], home: str) -> Iterator[str]:
    """Graph/ids/reset events in source order, following `self.<method>()` calls a few levels deep."""
    for node in _ordered(fn):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if name in _GRAPH_INITS:
            yield GRAPH
        elif name in _IDS_CALLS:
            yield IDS
        elif name == SETTER and (node.args or node.keywords):
            yield IDS
        elif name == SETTER and depth == 0:
            # Deeper no-id calls sit in opt-in warm-ups (0.5.6 _dummy_run, --enable-flashinfer-autotune).
            yield RESET
        elif isinstance(func, ast.Attribute) and depth < 4 and name not in seen:
            callee = _callee(mods, home, name)
            if callee is not None:
                seen.add(name)
                yield from _events(mods, callee.node, depth + 1, seen, _module_of_path(callee.path))


def _ordered(node: ast.AST) -> Iterator[ast.AST]:
    for child in ast.iter_child_nodes(node):
        yield child
        yield from _ordered(child)


def _graph_runner_resets(mods: Modules) -> tuple[bool, Note | None]:
    got = mods.get(GRAPH_RUNNER)
    if got is None:
        return False, None
    for node in ast.walk(got[1]):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == SETTER
                and not node.args and not node.keywords):
            where = f"{Modules.path_of(GRAPH_RUNNER)}:{node.lineno}"
            return True, Note(where, f"CudaGraphRunner calls {SETTER}() with no ids: the graphs capture the defaults")
    return False, None
