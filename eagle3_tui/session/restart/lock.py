"""One restart at a time per host: a lock file beside the server's pidfile.

The in-process flag of `Restarter` refuses a second restart inside one session; this refuses one
from another process or machine. The file (`.<log name>.restart-lock`, beside the log like the
pidfile) is created exclusively by the host's shell (`set -C`: O_EXCL) and holds who took it: pid,
machine, since when, why. A refusal names them. A lock whose owner is known dead (this machine,
pid gone) or older than any restart can last is taken over.
"""

from __future__ import annotations

import json
import os
import posixpath
import socket
import time
from typing import TYPE_CHECKING, Any

from eagle3_tui.errors import UserError
from eagle3_tui.remote.procgroup import pid_alive

if TYPE_CHECKING:
    from eagle3_tui.remote.host import Host

_CREATE = 'set -C; printf %s "$1" > "$2"'


def lock_path(log_path: str) -> str:
    head, tail = posixpath.split(log_path)
    return posixpath.join(head, f".{tail}.restart-lock")


def is_stale(owner: dict[str, Any], *, now: float, max_age_s: float, machine: str) -> bool:
    """Whether the lock's owner is gone (pure but for the liveness check of a local pid)."""
    since = owner.get("since")
    if not isinstance(since, (int, float)) or now - since > max_age_s:
        return True
    pid = owner.get("pid")
    return owner.get("machine") == machine and isinstance(pid, int) and not pid_alive(pid)


def refusal(owner: dict[str, Any], path: str) -> str:
    when = time.strftime("%H:%M:%S", time.localtime(float(owner.get("since", 0))))
    why = f" ({owner['reason']})" if owner.get("reason") else ""
    return (f"another restart is running on this host: pid {owner.get('pid')} on {owner.get('machine')}, "
            f"since {when}{why}; wait for it to finish (or remove {path} if that process is gone)")


class RestartLock:
    """Acquire before stopping the server, release when the restart ended (either way)."""

    def __init__(self, host: Host, log_path: str, max_age_s: float) -> None:
        self._host = host
        self.path = lock_path(log_path)
        self._max_age = max_age_s
        self._held = False

    async def acquire(self, reason: str) -> None:
        me = {"pid": os.getpid(), "machine": socket.gethostname(), "since": time.time(), "reason": reason}
        for _ in range(2):
            res = await self._host.run(["sh", "-c", _CREATE, "sh", json.dumps(me), self.path], timeout=20)
            if res.exit_code == 0:
                self._held = True
                return
            owner = await self._owner()
            if owner is not None and not is_stale(owner, now=time.time(), max_age_s=self._max_age,
                                                  machine=socket.gethostname()):
                raise UserError(refusal(owner, self.path))
            await self._host.run(["rm", "-f", self.path], timeout=20)  # a dead restart's lock
        raise UserError(f"cannot take the restart lock {self.path}: {(res.stderr or res.stdout).strip()}")

    async def _owner(self) -> dict[str, Any] | None:
        try:
            d = json.loads(await self._host.read_text(self.path))
        except (UserError, ValueError):
            return None
        return d if isinstance(d, dict) else None

    async def release(self) -> None:
        if self._held:
            self._held = False
            try:
                await self._host.run(["rm", "-f", self.path], timeout=20)
            except UserError:
                return
