"""Where the server's `import sglang` loads from, asked of the server's own interpreter.

Run `find_argv(python)` on the host with the server process's cwd and PYTHONPATH: the same interpreter
with the same path gives the same `sys.path`, so a source checkout (`/root/sglang/python` on
PYTHONPATH, or the cwd) is found as the server finds it. `importlib.util.find_spec` locates the package
without importing it (importing sglang takes seconds and needs a GPU stack).
"""

from __future__ import annotations

FIND_SGLANG = (
    "import importlib.util, os\n"
    "s = importlib.util.find_spec('sglang')\n"
    "locs = list(s.submodule_search_locations or []) if s is not None else []\n"
    "print(os.path.dirname(s.origin) if s is not None and s.origin else (locs[0] if locs else ''))\n"
)


def find_argv(python: str) -> list[str]:
    """The command that prints the sglang package directory (empty output: not importable)."""
    return [python, "-c", FIND_SGLANG]


def package_dir_from(stdout: str) -> str | None:
    """The directory `find_argv` printed, or None."""
    lines = [line.strip() for line in stdout.splitlines() if line.strip()]
    return lines[-1] if lines else None
