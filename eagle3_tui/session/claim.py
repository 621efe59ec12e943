"""The one restart at a time: a claim held for a block (`async with claim:`), refused while held.

Every path that changes what runs (apply, rollback, start, restart, a sweep's relaunch, stop) holds it
from its first change to its outcome, so a second one is refused with the reason instead of racing the
first; the monitor reads `busy` to leave a restarting server alone. Across processes the host's restart
lock (restart/lock.py) does the same.
"""

from __future__ import annotations

from eagle3_tui.errors import UserError


class RestartClaim:
    def __init__(self) -> None:
        self._held = False

    @property
    def busy(self) -> bool:
        return self._held

    def check_idle(self) -> None:
        if self._held:
            raise UserError("a restart is already running; wait for it to finish")

    async def __aenter__(self) -> RestartClaim:
        self.check_idle()
        self._held = True
        return self

    async def __aexit__(self, *_exc: object) -> None:
        self._held = False
