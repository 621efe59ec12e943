"""What a deployment-specific restart (container engine, systemd, other nodes) plugs into the one restart path.

`Restarter.run` keeps the lock, the failure handling and the readiness wait; a strategy replaces only
"stop the group, wait for the port, spawn detached" with what its owner (the engine, systemd) does,
and names the new server's process group for the readiness wait. The helpers here are shared by the
strategies: follow the log afresh before the owner restarts the server, and find the new process.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from eagle3_tui.session.connection import ClientFactory
from eagle3_tui.session.events import RestartFailed, RestartProgress
from eagle3_tui.session.live.runstate import Launched
from eagle3_tui.session.restart_timing import FIND_POLL_S

if TYPE_CHECKING:
    from eagle3_tui.remote.host import Host
    from eagle3_tui.session.host.discovery import ServerProcess
    from eagle3_tui.session.launch import LaunchSpec
    from eagle3_tui.session.live.logfeed import LogFeed
    from eagle3_tui.session.live.runstate import RunTracker
    from eagle3_tui.session.views import Views



class NodeFailed(RestartFailed):
    """A node other than the head did not come back; `log_tail` is that node's own log."""

    def __init__(self, message: str, log_tail: tuple[str, ...]) -> None:
        super().__init__(message)
        self.log_tail = log_tail


class OtherNodes(Protocol):
    """The other nodes of a multi-node server (deploy.nodes.NodeGroup): found and stopped before the head,
    started after it, checked while it loads."""

    async def find(self, t0: float) -> None: ...

    async def stop_others(self, t0: float) -> None: ...

    async def start_others(self, t0: float) -> None: ...

    async def check_others(self) -> None: ...

    async def stop_launched(self, t0: float) -> None: ...

    async def done(self) -> None: ...


class RestartStrategy(Protocol):
    """Restart by the server's owner. `relaunch` returns (launch number, pgid) to wait on, or None
    when it waited for readiness itself (no log to read the ready line from)."""

    async def stop(self, t0: float) -> None: ...

    async def relaunch(self, spec: LaunchSpec, reason: str, t0: float) -> tuple[int, int] | None: ...


@dataclass
class Parts:
    """What a strategy drives: the host, the views, the log feed and run state, and a rediscovery."""

    host: Host
    views: Views
    feed: LogFeed
    tracker: RunTracker
    deadline_s: float
    client: ClientFactory

    async def wait_health(self, alive: Callable[[], Awaitable[bool]], t0: float) -> None:
        """No log to read the ready line from: ready when /health answers; failed when `alive` says gone."""
        self.progress("loading", "waiting for /health (no log file: HTTP only)", t0)
        deadline = time.monotonic() + self.deadline_s
        client = await self.client()
        while not await client.health(timeout=10):
            if not await alive():
                raise RestartFailed("the server exited during start-up (see its owner's log)")
            if time.monotonic() > deadline:
                raise RestartFailed(f"the server was not ready within {self.deadline_s:.0f} s (restart deadline)")
            await asyncio.sleep(FIND_POLL_S)

    def progress(self, phase: str, message: str, t0: float) -> None:
        self.views.emit(RestartProgress(phase, message, time.monotonic() - t0))

    def follow_fresh(self, log: str | None) -> int:
        """Follow `log` from its end with nothing of the old run in flight; the new launch's number.

        Called before the owner restarts the server: an engine's log is appended to, not rotated, so
        only what comes after this point belongs to the new run.
        """
        if log is not None:
            self.feed.start(log, start="end", fresh=True)
        return self.tracker.dispatch(Launched(rotates=False)).launch

    async def find_server(self, match: Callable[[ServerProcess], bool], before: int | None,
                          t0: float) -> ServerProcess:
        """The server process `match` picks, other than pid `before`, once it shows up (within the deadline)."""
        from eagle3_tui.session.host.discovery import discover_servers

        deadline = time.monotonic() + self.deadline_s
        while True:
            for proc in await discover_servers(self.host):
                if match(proc) and proc.pid != before:
                    return proc
            if time.monotonic() > deadline:
                raise RestartFailed(f"no server process came up within {self.deadline_s:.0f} s of the restart")
            await asyncio.sleep(FIND_POLL_S)

    def started(self, proc: ServerProcess, reason: str, log: str | None) -> None:
        self.views.set_server(self.views.server.with_process(proc.pid, proc.pgid, time.time())
                              .with_launch(proc.port, log, proc.argv).with_state("starting", f"{reason}: loading"))
