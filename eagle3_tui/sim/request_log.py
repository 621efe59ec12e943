"""SGLang's `--log-requests` finish line, as 0.5.23 writes it (`utils/request_logger.py`
`log_finished_request`) for each request it finishes: the request object, then `out` with the request's
meta_info (levels 0 and 1: no text; 2: the text cut at 2048 characters; 3: all of it), in Python's repr
(`--log-requests-format text`) or as one JSON object (`json`). Pure: the server's LogWriter adds the time."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

LEVELS = (0, 1, 2, 3)
FORMATS = ("text", "json")
TEXT_LIMIT = 2048


def finish_line(rid: str, meta: Mapping[str, Any], *, level: int, fmt: str, text: str | None = None) -> str:
    out: dict[str, Any] = {"meta_info": dict(meta)}
    if level >= 2 and text is not None:
        out = {"text": text if level >= 3 else text[:TEXT_LIMIT], **out}
    if fmt == "json":
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime())
        return json.dumps({"timestamp": stamp, "event": "request.finished", "rid": rid,
                           "obj": {"rid": rid, "stream": False, "log_metrics": True}, "out": out})
    return f"Finish: obj=GenerateReqInput(rid={rid!r}, stream=False, log_metrics=True), out={out!r}"
