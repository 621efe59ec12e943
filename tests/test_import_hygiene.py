"""Import hygiene: no module of eagle3_tui is part of an import cycle, and `--help` stays light.

The layering rules themselves are import-linter contracts in pyproject.toml (`lint-imports`, run by
`make test`). This file checks what a contract cannot word as plainly: cycles named module by module
(a package's `__init__` counts as a module, so a child importing its own package is seen too), and
what the entry point loads before it prints its help.
"""

from __future__ import annotations

import itertools
import subprocess
import sys

import grimp

PACKAGE = "eagle3_tui"

# Imported by `eagle3-tui --help` they would cost seconds before the first byte of output.
HEAVY = ("torch", "safetensors", "numpy", "textual", "textual_plotext", "plotext", "asyncssh", "httpx", "matplotlib")


def strongly_connected(graph: grimp.ImportGraph) -> list[list[str]]:
    """Tarjan's algorithm over the module graph (iterative: deep chains must not hit the recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    for root in sorted(graph.modules):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return found


def describe_cycle(graph: grimp.ImportGraph, component: list[str]) -> str:
    """One concrete loop through the component, with the line of each import, so the fix is obvious."""
    first = component[0]
    members = set(component)
    back = min(
        (
            chain
            for importer in graph.find_modules_that_directly_import(first)
            if importer in members
            for chain in [graph.find_shortest_chain(first, importer)]
            if chain
        ),
        key=len,
    )
    hops = [*back, first]
    parts = []
    for importer, imported in itertools.pairwise(hops):
        lines = sorted(
            {d["line_number"] for d in graph.get_import_details(importer=importer, imported=imported)}
        )
        parts.append(f"{importer} -> {imported} (l.{', l.'.join(map(str, lines))})")
    return f"{len(component)} modules: " + "; ".join(parts)


def test_tarjan_finds_a_planted_cycle_and_ignores_a_chain() -> None:
    graph = grimp.ImportGraph()
    for name in ("p", "p.a", "p.b", "p.c", "p.d"):
        graph.add_module(name)
    graph.add_import(importer="p.a", imported="p.b", line_number=3, line_contents="import p.b")
    graph.add_import(importer="p.b", imported="p.c", line_number=4, line_contents="import p.c")
    graph.add_import(importer="p.c", imported="p.a", line_number=5, line_contents="import p.a")
    graph.add_import(importer="p.c", imported="p.d", line_number=6, line_contents="import p.d")
    assert strongly_connected(graph) == [["p.a", "p.b", "p.c"]]
    assert describe_cycle(graph, ["p.a", "p.b", "p.c"]) == (
        "3 modules: p.a -> p.b (l.3); p.b -> p.c (l.4); p.c -> p.a (l.5)"
    )


def test_no_import_cycle_between_modules() -> None:
    graph = grimp.build_graph(PACKAGE)
    cycles = [describe_cycle(graph, c) for c in strongly_connected(graph)]
    assert not cycles, "import cycles:\n  " + "\n  ".join(cycles)


def test_help_imports_no_heavy_library() -> None:
    probe = (
        "import sys\n"
        "from eagle3_tui.cli import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit as e:\n"
        "    assert e.code == 0, e.code\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "usage: eagle3-tui" in out.stdout
    assert out.stderr.strip().splitlines()[-1] == "[]", out.stderr
