"""Reading an installed SGLang's own files: the injected reader, the release number, a parsed-module cache.

Everything here works on file *texts*. A `Read` maps a path inside the `sglang` package directory
(`"srt/models/llama.py"`) to the file's text, or None when it is absent or unreadable. The CLI gives a
reader over a local directory (`dir_reader`); the session can give one that reads over SSH.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

Read = Callable[[str], "str | None"]

READ_FROM_SOURCE = "read from source"

# The files whose presence makes a directory an `sglang` package we can read.
MARKERS = ("srt/server_args.py", "srt/models/llama.py")


def dir_reader(root: str | Path) -> Read:
    """A reader over a local `sglang` package directory (a wheel unpacked, a site-packages copy, a checkout)."""
    base = Path(root)

    def read(rel: str) -> str | None:
        try:
            return (base / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None

    return read


def find_package_dir(path: str | Path) -> Path | None:
    """`path` itself, `path/sglang` or `path/python/sglang` (a source checkout), whichever holds SGLang's files."""
    base = Path(path)
    for cand in (base, base / "sglang", base / "python" / "sglang"):
        if all((cand / m).is_file() for m in MARKERS):
            return cand
    return None


_VERSION_ASSIGN = re.compile(r"""^__version__\s*(?::\s*str\s*)?=\s*(?:version\s*=\s*)?["']([^"']+)["']""", re.M)


def read_version(read: Read) -> str | None:
    """The release: `_version.py` (0.5.12+ wheels, generated) or `version.py` (a literal before that)."""
    for rel in ("_version.py", "version.py"):
        text = read(rel)
        if text:
            m = _VERSION_ASSIGN.search(text)
            if m:
                return m.group(1)
    return None


_VERSION_PARTS = re.compile(r"^(\d+)\.(\d+)(?:\.(\d+))?(?:\.?(rc|post|dev)(\d+))?")


def version_key(version: str) -> tuple[int, int, int, int]:
    """A sortable key: `0.5.6.post1` > `0.5.6` > `0.5.6rc0`; unparsable versions sort first."""
    m = _VERSION_PARTS.match(version.strip())
    if m is None:
        return (-1, 0, 0, 0)
    major, minor, patch = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    tag, num = m.group(4), int(m.group(5) or 0)
    extra = {"rc": -100 + num, "dev": -200 + num, "post": 1 + num}.get(tag or "", 0)
    return (major, minor, patch, extra)


@dataclass(frozen=True)
class Located:
    """A node found in SGLang's source: the module's path, the node, and that module's text."""

    path: str
    node: ast.AST
    text: str

    @property
    def line(self) -> int:
        return int(getattr(self.node, "lineno", 0))

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}" if self.line else self.path

    def segment(self) -> str:
        return segment(self.text, self.node)


class Modules:
    """Parsed modules of one installed SGLang, by dotted name (`sglang.srt.models.llama`), parsed once."""

    def __init__(self, read: Read) -> None:
        self.read = read
        self._cache: dict[str, tuple[str, ast.Module] | None] = {}
        self._index: dict[str, _Index] = {}

    @staticmethod
    def path_of(module: str) -> str:
        return module.removeprefix("sglang.").replace(".", "/") + ".py"

    def get(self, module: str) -> tuple[str, ast.Module] | None:
        if module not in self._cache:
            text = self.read(self.path_of(module))
            tree: ast.Module | None = None
            if text is not None:
                try:
                    tree = ast.parse(text)
                except SyntaxError:
                    tree = None
            self._cache[module] = (text, tree) if text is not None and tree is not None else None
        return self._cache[module]

    def index(self, module: str) -> _Index | None:
        if module not in self._index:
            got = self.get(module)
            if got is None:
                return None
            self._index[module] = _Index.build(got[1])
        return self._index[module]

    def defs(self, module: str, name: str) -> list[Located]:
        """Every function or method called `name` in `module`, at any depth, in source order."""
        idx = self.index(module)
        text = self.text(module) or ""
        return [Located(self.path_of(module), n, text) for n in idx.functions.get(name, [])] if idx else []

    def text(self, module: str) -> str | None:
        got = self.get(module)
        return got[0] if got else None

    def function(self, module: str, name: str) -> Located | None:
        """A module-level function by name."""
        got = self.get(module)
        if got is None:
            return None
        for node in got[1].body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name:
                return Located(self.path_of(module), node, got[0])
        return None

    def find_class(self, module: str, name: str, _depth: int = 0) -> tuple[str, ast.ClassDef] | None:
        """The class `name` as seen from `module`: defined there, or imported from another sglang module."""
        idx = self.index(module)
        if idx is None or _depth > 4:
            return None
        if name in idx.classes:
            return module, idx.classes[name]
        if name in idx.imports:
            source, original = idx.imports[name]
            return self.find_class(source, original, _depth + 1)
        return None

    def method(self, module: str, cls: str, name: str) -> Located | None:
        """Method `name` of class `cls` (looked up in `module`), following base classes depth first."""
        return next(self.methods(module, cls, name), None)

    def methods(self, module: str, cls: str, name: str, _depth: int = 0) -> Iterator[Located]:
        """Every definition of `name` along the base classes of `cls`, most derived first."""
        found = self.find_class(module, cls)
        if found is None or _depth > 6:
            return
        mod, node = found
        for item in node.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == name:
                yield Located(self.path_of(mod), item, self.text(mod) or "")
        for base in node.bases:
            base_name = base.id if isinstance(base, ast.Name) else None
            if base_name and base_name not in ("object", "Module"):
                yield from self.methods(mod, base_name, name, _depth + 1)

    def attribute_class(self, module: str, cls: str, attr: str) -> tuple[str, str] | None:
        """(module, class) that `self.<attr>` is built from in `cls.__init__` (directly or via `self._init_x()`)."""
        for init in self.methods(module, cls, "__init__"):
            init_mod = _module_of(init.path)
            for node in ast.walk(init.node):
                if not (isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)):
                    continue
                if not any(_is_self_attr(t, attr) for t in node.targets):
                    continue
                func = node.value.func
                if isinstance(func, ast.Name):
                    return self._class_home(init_mod, func.id)
                if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
                    return self._returned_class(module, cls, func.attr)
        return None

    def _returned_class(self, module: str, cls: str, factory: str) -> tuple[str, str] | None:
        fn = self.method(module, cls, factory)
        if fn is None:
            return None
        for node in ast.walk(fn.node):
            if isinstance(node, ast.Return) and isinstance(node.value, ast.Call) and isinstance(node.value.func, ast.Name):
                return self._class_home(_module_of(fn.path), node.value.func.id)
        return None

    def _class_home(self, module: str, name: str) -> tuple[str, str] | None:
        found = self.find_class(module, name)
        return (found[0], name) if found else None


@lru_cache(maxsize=64)
def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def segment(text: str, node: ast.AST) -> str:
    """The source of `node` (whole lines), like ast.get_source_segment but with the file split once."""
    start, end = getattr(node, "lineno", None), getattr(node, "end_lineno", None)
    if start is None or end is None:
        return ""
    return "".join(_lines(text)[start - 1 : end])


@dataclass
class _Index:
    classes: dict[str, ast.ClassDef]
    imports: dict[str, tuple[str, str]]
    functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]

    @classmethod
    def build(cls, tree: ast.Module) -> _Index:
        classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
        imports: dict[str, tuple[str, str]] = {}
        functions: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("sglang."):
                for alias in node.names:
                    imports.setdefault(alias.asname or alias.name, (node.module, alias.name))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                functions.setdefault(node.name, []).append(node)
        for fns in functions.values():
            fns.sort(key=lambda f: f.lineno)
        return cls(classes, imports, functions)


def _module_of(path: str) -> str:
    return "sglang." + path.removesuffix(".py").replace("/", ".")


def _is_self_attr(node: ast.AST, attr: str) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == attr
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    )


def squash(text: str) -> str:
    """Whitespace runs collapsed to one space, so patterns match code however it was wrapped."""
    text = re.sub(r"\s+", " ", text)
    return re.sub(r"\(\s+", "(", re.sub(r"\s+\)", ")", text))
