"""The accuracy check as one zip application built from the package, as Ansible ships its modules.

The check runs on the GPU host with the host's own Python, next to the data, where eagle3-tui is not
installed. Rather than copying loose files that import each other as top-level modules, the modules
the check needs are put in one zip under their package paths (`eagle3_tui/eagle/accuracy.py`, ...),
with a `__main__.py` that runs the check: `python accuracy.pyz ARGS`. Zip imports are in the standard
library since Python 2.3, so the shipped code keeps its ordinary package imports.

Which modules go in is found from their imports (absolute and relative, at module level and inside
functions; `if TYPE_CHECKING:` blocks are annotations only and skipped), starting from `ENTRIES`, so the
list cannot drift from the code. The zip is built in memory from the package's own files.
"""

from __future__ import annotations

import ast
import io
import zipfile
from collections.abc import Iterable
from functools import cache
from pathlib import Path

PACKAGE = "eagle3_tui"
NAME = "accuracy.pyz"
"""The file name on the host; it names the check in process lists (session/check/leftovers.py looks for it)."""
ENTRIES: tuple[str, ...] = ("eagle3_tui.eagle.accuracy", "eagle3_tui.eagle.datasets")
"""What is run from the zip: the check (its `__main__`) and the data reader the quick look imports."""
MAIN = "eagle3_tui.eagle.accuracy"

_ROOT = Path(__file__).resolve().parent.parent  # the eagle3_tui package directory
_FIXED_TIME = (1980, 1, 1, 0, 0, 0)  # the zip's bytes depend on the sources only


def _source(module: str) -> tuple[Path, bool]:
    """(file, is a package) of a module of this package."""
    rel = Path(*module.split(".")[1:])
    pkg = _ROOT / rel / "__init__.py"
    if pkg.is_file():
        return pkg, True
    mod = (_ROOT / rel).with_suffix(".py")
    if mod.is_file():
        return mod, False
    raise ModuleNotFoundError(f"{module} is not a module of {PACKAGE}")


def _is_module(module: str) -> bool:
    try:
        _source(module)
    except ModuleNotFoundError:
        return False
    return True


def _type_checking_block(node: ast.AST) -> bool:
    if not isinstance(node, ast.If):
        return False
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST) -> Iterable[ast.Import | ast.ImportFrom]:
    stack = [tree]
    while stack:
        node = stack.pop()
        for child in ast.iter_child_nodes(node):
            if _type_checking_block(child):
                stack.extend(getattr(child, "orelse", []))
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                yield child
            else:
                stack.append(child)


def imports_of(module: str) -> set[str]:
    """The modules of this package that `module` imports (its parent packages included)."""
    path, is_pkg = _source(module)
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = module if is_pkg else module.rpartition(".")[0]
    found: set[str] = set()
    for node in _import_nodes(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                anchor = ".".join(parts[: len(parts) - node.level + 1])
                base = f"{anchor}.{base}" if base else anchor
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        found.update(n for n in names if (n == PACKAGE or n.startswith(PACKAGE + ".")) and _is_module(n))
    return found


def _with_parents(module: str) -> set[str]:
    parts = module.split(".")
    return {".".join(parts[:i]) for i in range(1, len(parts) + 1)}


@cache
def modules(entries: tuple[str, ...] = ENTRIES) -> tuple[str, ...]:
    """Every module the entries reach through this package's imports, with their packages, sorted."""
    seen: set[str] = set()
    todo = [m for e in entries for m in _with_parents(e)]
    while todo:
        m = todo.pop()
        if m in seen:
            continue
        seen.add(m)
        todo.extend(n for found in imports_of(m) for n in _with_parents(found) if n not in seen)
    return tuple(sorted(seen))


def _arcname(module: str) -> str:
    path, _is_pkg = _source(module)
    return path.relative_to(_ROOT.parent).as_posix()


def main_source() -> str:
    return f"import sys\nfrom {MAIN} import main\nsys.exit(main())\n"


@cache
def build() -> bytes:
    """The zip application's bytes: `__main__.py` and the modules under their package paths."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("__main__.py", _FIXED_TIME), main_source())
        for module in modules():
            path, _is_pkg = _source(module)
            info = zipfile.ZipInfo(_arcname(module), _FIXED_TIME)
            z.writestr(info, path.read_bytes(), compress_type=zipfile.ZIP_DEFLATED)
    return buf.getvalue()
