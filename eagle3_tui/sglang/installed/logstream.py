"""Which stream SGLang's own log goes to, read from `configure_logger`.

Every release read (0.4.3-0.5.23) calls `logging.basicConfig(...)` without `stream=` or `handlers=`,
so the log goes to stderr (Python's default); uvicorn's access lines go to stdout. Setting
`SGLANG_LOGGING_CONFIG_PATH` (0.4.6+) replaces all of it with the user's dictConfig.
"""

from __future__ import annotations

import ast

from eagle3_tui.sglang.installed.notes import Note
from eagle3_tui.sglang.installed.source import Located, Modules

_HOMES = ("sglang.srt.utils.common", "sglang.srt.utils")


def read_log_stream(mods: Modules) -> tuple[str, Note] | None:
    """("stderr" | "stdout", evidence), or None when configure_logger is not found or not plain."""
    fn = _find(mods)
    if fn is None:
        return None
    for node in ast.walk(fn.node):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "basicConfig":
            kw = {k.arg: k.value for k in node.keywords if k.arg}
            if "handlers" in kw:
                return None
            stream = kw.get("stream")
            name = "stderr"
            if isinstance(stream, ast.Attribute) and stream.attr in ("stdout", "stderr"):
                name = stream.attr
            elif stream is not None:
                return None
            how = "without stream=" if stream is None else f"with stream=sys.{name}"
            extra = " (unless SGLANG_LOGGING_CONFIG_PATH names a logging config)" if "SGLANG_LOGGING_CONFIG_PATH" in fn.segment() else ""
            where = f"{fn.path}:{node.lineno}"
            return name, Note(where, f"configure_logger calls logging.basicConfig {how}: the log goes to {name}{extra}")
    return None


def _find(mods: Modules) -> Located | None:
    for module in _HOMES:
        fn = mods.function(module, "configure_logger")
        if fn is not None:
            return fn
    return None
