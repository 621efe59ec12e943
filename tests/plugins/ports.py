"""Free TCP ports on 127.0.0.1 for the servers tests start, a separate block for each pytest-xdist worker.

`bind(("127.0.0.1", 0))` takes a number from the kernel's ephemeral range, and the probe socket is
closed before the server that is to own the port starts. With tests running at once in several
workers, another worker can be handed the same number in between: one server then fails to bind and
its test talks to the other test's listener (`test_deploy_nodes` even keeps one that never answers).
Below the ephemeral range (32768 and up by default on Linux; client sockets take their
local ports from it too), each worker draws from its own block, in a shuffled order that hands a
port out again only after the whole block: no two workers, and no two tests of a worker in a row,
share a number.
"""

from __future__ import annotations

import os
import random
import socket

__all__ = ["free_port"]

BASE = 12_000
BLOCK = 2_000
MAX_BLOCKS = 10  # 12000..31999: under the ephemeral range


def _worker_index() -> int:
    """gw0 -> 0, gw1 -> 1, ...; 0 outside xdist."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    digits = name.removeprefix("gw")
    return int(digits) % MAX_BLOCKS if digits.isdigit() else 0


_first = BASE + BLOCK * _worker_index()
_order = random.Random(os.getpid()).sample(range(_first, _first + BLOCK), BLOCK)
_next = 0


def free_port() -> int:
    """A port of this worker's block that nothing is bound to now."""
    global _next
    for _ in range(BLOCK):
        port = _order[_next % BLOCK]
        _next += 1
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError(f"no free port in 127.0.0.1:{_first}-{_first + BLOCK - 1}")
