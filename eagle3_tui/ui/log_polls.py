"""Which log lines are monitoring polls: the access lines of GET requests for a server's state.

SGLang and vLLM log every HTTP request (uvicorn's access line). The console itself asks for
`/server_info` and `/metrics` every few seconds, as Prometheus and health checks do; on a quiet server
those lines are most of the log and bury the user's own traffic. The log pane hides them unless asked.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

# The state endpoints of SGLang and vLLM (and their older spellings), as uvicorn writes the request line.
_POLL = re.compile(
    r'"GET /(?:server_info|get_server_info|metrics|health|health_generate|model_info|get_model_info'
    r'|v1/models|version|ping)(?:\?[^ "]*)? HTTP/'
)


def is_poll(line: str) -> bool:
    return '"GET /' in line and _POLL.search(line) is not None


def count_polls(lines: Sequence[str]) -> int:
    """How many of `lines` are polls (one pass in C over the batch: a log flood has few or none)."""
    text = "\n".join(lines)
    return len(_POLL.findall(text)) if '"GET /' in text else 0


def without_polls(lines: Sequence[str]) -> list[str]:
    if '"GET /' not in "\n".join(lines):
        return list(lines)
    return [ln for ln in lines if not is_poll(ln)]
