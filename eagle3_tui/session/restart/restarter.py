"""The one restart path (start, restart, apply, rollback, the demo and the tests all use it).

Stop the process group (TERM, grace, KILL), wait until the port is free, relaunch detached with the
same argv, cwd and whitelisted env (the host layer rotates the log), follow the new log, and call it
ready when the log says "The server is fired up and ready to roll!" and `/health` answers, within the
profile's deadline. On failure: state `failed`, the failure event, and the last 40 log lines.

Which log lines belong to the new launch: the host rotates the old log at the launch, and the log
is then followed afresh from the new file's first byte (`LogFeed.start(fresh=True)`), so a ready or
crash line of the previous run's file never decides this launch. A start that fails stops the group
it launched. Across processes and machines one restart at a time: `restart.lock.RestartLock`.
Several nodes (`nodes`, deploy/nodes.py): the others are found first, stopped before the head and
launched after it; readiness is the head's, and a node that exits fails the restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import posixpath
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from eagle3_tui.errors import UserError
from eagle3_tui.remote import faults
from eagle3_tui.session.claim import RestartClaim
from eagle3_tui.session.connection import ClientFactory
from eagle3_tui.session.events import RestartFailed, RestartProgress
from eagle3_tui.session.launch import LaunchSpec
from eagle3_tui.session.live.logfeed import log_tail
from eagle3_tui.session.live.runstate import Launched, RunTracker
from eagle3_tui.session.restart.lock import RestartLock
from eagle3_tui.session.restart.strategy import NodeFailed
from eagle3_tui.session.restart_timing import (
    ALIVE_CHECK_S,
    FAILED_STOP_GRACE_S,
    LAST_LINES_GRACE_S,
    POLL_S,
    PORT_HELD_S,
    STOP_GRACE_S,
)

if TYPE_CHECKING:
    from eagle3_tui.profile import Profile
    from eagle3_tui.remote.host import Host
    from eagle3_tui.session.live.logfeed import LogFeed
    from eagle3_tui.session.restart.strategy import OtherNodes, RestartStrategy
    from eagle3_tui.session.views import Views


_PORT_FREE = (
    "import socket,sys\n"
    "s=socket.socket(socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET)\n"
    "s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
    "try:\n s.bind((sys.argv[1],int(sys.argv[2])))\nexcept OSError:\n print('busy')\nelse:\n print('free')\n"
)

_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "fish", "ksh", "tmux", "screen", "sshd", "login", "su", "sudo"})

LaunchHook = Callable[[LaunchSpec, int, str], None]


def is_foreign(argv: list[str]) -> bool:
    """A process a restart must never signal: a shell, a multiplexer, sshd."""
    if not argv:
        return False
    name = posixpath.basename(argv[0]).lstrip("-")
    return name in _SHELLS or name.startswith(("tmux", "screen"))


class RestartOwner(Protocol):
    """Who restarts the server when not the console itself (the deployment part)."""

    @property
    def strategy(self) -> RestartStrategy | None: ...

    @property
    def nodes(self) -> OtherNodes | None: ...


class Restarter:
    """The one restart path: `run()` stops, relaunches and waits, with the restart claimed by its caller."""

    def __init__(
        self,
        host: Host,
        profile: Profile,
        views: Views,
        tracker: RunTracker,
        feed: LogFeed,
        client: ClientFactory,
        claim: RestartClaim,
        owner: RestartOwner,
        on_launched: LaunchHook,
    ) -> None:
        """`owner`: who restarts the server when not the console (the deployment part's `strategy` and
        `nodes`); `claim`: the one restart, held by the caller of `run`."""
        self._host = host
        self._profile = profile
        self._views = views
        self._tracker = tracker
        self._feed = feed
        self._client = client
        self._claim = claim
        self._owner = owner
        self._on_launched = on_launched
        self._started: int | None = None

    @property
    def strategy(self) -> RestartStrategy | None:
        """The server's owner restarts it (container engine, systemd: deploy/); None: relaunched here."""
        return self._owner.strategy

    @property
    def nodes(self) -> OtherNodes | None:
        """The other nodes of a multi-node server (deploy/nodes.py): stopped before the head, started after it."""
        return self._owner.nodes

    def _progress(self, phase: str, message: str, t0: float) -> None:
        self._views.emit(RestartProgress(phase, message, time.monotonic() - t0))

    # ------------------------------------------------------------ stop

    async def stop(self) -> None:
        """Stop the server (claims the restart for the while)."""
        async with self._claim:
            await self._stop()

    async def _stop(self) -> None:
        try:
            if self.nodes is not None and self.strategy is None:
                await self.nodes.find(time.monotonic())
            await self.stop_current(time.monotonic())
            self._views.set_server(self._views.server.without_process().with_state("stopped", "stopped"))
        finally:
            if self.nodes is not None:
                await self.nodes.done()

    async def stop_current(self, t0: float) -> None:
        """TERM the server's process group (grace, then KILL); a group shared with a shell is not signalled."""
        server = self._views.server
        if self.strategy is not None:
            await self.strategy.stop(t0)
            return
        if self.nodes is not None:
            await self.nodes.stop_others(t0)  # ranks > 0 first, then the head
        pgid = server.pgid
        if pgid is None:
            return
        self._progress("stopping", f"stopping process group {pgid}", t0)
        procs = await self._host.processes()
        foreign = [p for p in procs if p.pgid == pgid and is_foreign(p.argv)]
        if foreign and server.pid:
            outcome = await self._stop_pid(server.pid)
            shown = posixpath.basename(foreign[0].argv[0]) if foreign[0].argv else "?"
            self._progress("stopping", f"pid {server.pid} (its group {pgid} also holds {shown}): {outcome}", t0)
            return
        group_outcome = await self._host.stop_group(pgid, grace=STOP_GRACE_S)
        self._progress("stopping", f"process group {pgid}: {group_outcome}", t0)

    async def _stop_pid(self, pid: int) -> str:
        """TERM one process, wait for it to go, KILL after the grace (shared group: spare the rest)."""
        await self._host.run(["kill", "-s", "TERM", str(pid)], timeout=20)
        deadline = time.monotonic() + STOP_GRACE_S
        while time.monotonic() < deadline:
            if not any(p.pid == pid for p in await self._host.processes()):
                return "stopped"
            await asyncio.sleep(0.3)
        await self._host.run(["kill", "-s", "KILL", str(pid)], timeout=20)
        return "killed"

    # ------------------------------------------------------------ restart

    async def run(self, spec: LaunchSpec, *, reason: str) -> float:
        """The one restart path, run with the restart claimed (`async with claim`). Returns the seconds it took.

        `spec.log_path` must be set. Raises `RestartFailed` (the view is `failed`, with the log tail).
        """
        assert spec.log_path is not None
        assert self._claim.busy, "run() needs the restart claimed (async with the claim)"
        self._started = None
        t0 = time.monotonic()
        nodes = self.nodes if self.strategy is None else None
        if nodes is not None:
            try:
                await nodes.find(t0)  # read only: a node that cannot be found refuses with nothing stopped
            except RestartFailed:
                await nodes.done()
                raise
        lock = RestartLock(self._host, spec.log_path, self._lock_age_s())
        await lock.acquire(reason)  # another restart owns the host: its refusal, nothing of ours marked failed
        try:
            started = await self.strategy.relaunch(spec, reason, t0) if self.strategy is not None else None
            if self.strategy is None:
                await self.stop_current(t0)
                faults.hit("restart-after-stop")
                self._views.set_server(self._views.server.without_process().with_state("stopped", log_tail=()))
                await self._wait_port(spec, t0)
                started = await self._launch(spec, reason, t0)
                if nodes is not None:
                    await nodes.start_others(t0)  # the head first: it opens the address the others join
            if started is not None:
                await self._wait_ready(started[0], t0, started[1])
            if nodes is not None:
                await nodes.check_others()  # readiness is the head's; the others must still run
        except RestartFailed as err:
            await self._fail(str(err), spec, t0, tail=err.log_tail if isinstance(err, NodeFailed) else None)
            raise
        except UserError as err:
            await self._fail(str(err), spec, t0)
            raise RestartFailed(str(err)) from None
        finally:
            await lock.release()
            if nodes is not None:
                await nodes.done()
        elapsed = time.monotonic() - t0
        self._views.set_state("ready")
        self._progress("ready", f"ready after {elapsed:.1f} s", t0)
        return elapsed

    async def _wait_port(self, spec: LaunchSpec, t0: float) -> None:
        """The stop waited for the old group to be gone, so a listener left on the port is a stranger's
        (or a process that escaped the group): give it PORT_HELD_S to close, not the whole deadline."""
        self._progress("port", f"waiting for port {spec.port} to be free", t0)
        deadline = time.monotonic() + PORT_HELD_S
        while not await self._port_free(spec):
            if time.monotonic() > deadline:
                raise RestartFailed(
                    f"port {spec.port} is still in use {PORT_HELD_S:.0f} s after the server stopped: another "
                    f"process listens on it (see `ss -ltnp 'sport = :{spec.port}'` on the host)"
                )
            await asyncio.sleep(0.25)

    async def _port_free(self, spec: LaunchSpec) -> bool:
        return await self.port_free(spec.bind_host, spec.port)

    async def port_free(self, bind_host: str, port: int) -> bool:
        """Whether nothing listens on the host's `bind_host`:`port` (a bind there succeeds)."""
        argv = [self._host.python, "-c", _PORT_FREE, bind_host, str(port)]
        res = await self._host.run(argv, timeout=20)
        return res.stdout.strip() == "free"

    async def _launch(self, spec: LaunchSpec, reason: str, t0: float) -> tuple[int, int]:
        """Follow the log, start the server detached: (the launch number of `RunState`, its pgid)."""
        assert spec.log_path is not None
        self._progress("launching", "launching: " + " ".join(spec.argv[:6]) + " ...", t0)
        cwd = spec.cwd or str(Path(spec.log_path).parent)
        pgid = await self._host.spawn_detached(list(spec.argv), cwd=cwd, env=spec.env, log_path=spec.log_path,
                                                 clear_env=spec.env_whole)
        self._started = pgid
        # The host rotated the old log before the launch: a fresh follow of the new file from its
        # first byte, with nothing read from the old file left in flight, is this launch's log alone.
        # (Following on and waiting for a LogSwitched is not enough: a follow opened just before
        # the launch reports "opened" on the *old* file, whose last lines would count for this one.)
        self._feed.start(spec.log_path, start="begin", fresh=True)
        launch = self._tracker.dispatch(Launched(rotates=False)).launch
        self._views.set_server(self._views.server.with_process(pgid, pgid, time.time())
                               .with_launch(spec.port, spec.log_path, spec.argv)
                               .with_state("starting", f"{reason}: loading"))
        self._on_launched(spec, pgid, reason)
        return launch, pgid

    def _failed(self, launch: int) -> RestartFailed | None:
        f = self._tracker.state.failure_of(launch)
        return RestartFailed(f"the server failed to start: {f.kind}: {f.last_line}") if f is not None else None

    async def _wait_ready(self, launch: int, t0: float, pgid: int) -> None:
        deadline = time.monotonic() + self._profile.restart_deadline_s
        client = await self._client()
        last_alive_check = 0.0
        self._progress("loading", "waiting for the ready line and /health", t0)
        while True:
            self._feed.flush_if_quiet()
            failed = self._failed(launch)
            if failed is not None:
                raise failed
            if self._tracker.state.outcome(launch) == "ready" and await client.health(timeout=10):
                return
            now = time.monotonic()
            if now > deadline:
                raise RestartFailed(
                    f"the server was not ready within {self._profile.restart_deadline_s:.0f} s (restart deadline)"
                )
            if now - last_alive_check > ALIVE_CHECK_S:
                last_alive_check = now
                if self.nodes is not None:
                    await self.nodes.check_others()  # a node that exits fails the restart now, not at the deadline
                if not await self._host.group_alive(pgid):
                    await asyncio.sleep(LAST_LINES_GRACE_S)
                    await self._feed.settle()
                    raise self._failed(launch) or RestartFailed("the server exited during start-up")
            await asyncio.sleep(POLL_S)

    def _lock_age_s(self) -> float:
        """Longer than any restart can last: a lock older than this was left by a dead one."""
        return STOP_GRACE_S + PORT_HELD_S + self._profile.restart_deadline_s + 60.0

    async def _fail(self, message: str, spec: LaunchSpec, t0: float, *, tail: tuple[str, ...] | None = None) -> None:
        """The failed state with the log tail (a node's own when a node failed); what this start launched stopped."""
        if tail is None:
            tail = await log_tail(self._host, spec.log_path or self._views.server.log_path, self._feed)
        if self.nodes is not None:
            await self.nodes.stop_launched(t0)
        if self._started is not None:  # a start that failed stops what it started
            with contextlib.suppress(UserError):
                outcome = await self._host.stop_group(self._started, grace=FAILED_STOP_GRACE_S)
                self._progress("failed", f"stopped what this start launched (group {self._started}: {outcome})", t0)
            self._views.set_server(self._views.server.without_process())
        self._views.set_state("failed", message, log_tail=tail)
        self._progress("failed", message, t0)
        self._views.notice(message, "error")
