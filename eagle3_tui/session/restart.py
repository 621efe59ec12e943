"""The one restart path (start, restart, apply, rollback, the demo and the tests all use it).

Stop the process group (TERM, grace, KILL), wait until the port is free, relaunch detached with the
same argv, cwd and whitelisted env (the host layer rotates the log), follow the new log, and call it
ready when the log says "The server is fired up and ready to roll!" and `/health` answers, within the
profile's deadline. On failure: state `failed`, the failure event, and the last 40 log lines.

A mixin of `Session`: it works on the session's state and events.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import posixpath
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle3_tui.errors import UserError
from eagle3_tui.session.discovery import LaunchSpec, default_log_path
from eagle3_tui.session.events import RestartFailed, RestartProgress

if TYPE_CHECKING:
    from eagle3_tui.profile import Profile
    from eagle3_tui.session.events import ServerView

LOG_TAIL_LINES = 40
STOP_GRACE_S = 30.0
PORT_WAIT_S = 60.0

_PORT_FREE = (
    "import socket,sys\n"
    "s=socket.socket(socket.AF_INET6 if ':' in sys.argv[1] else socket.AF_INET)\n"
    "s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n"
    "try:\n s.bind((sys.argv[1],int(sys.argv[2])))\nexcept OSError:\n print('busy')\nelse:\n print('free')\n"
)


_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "fish", "ksh", "tmux", "screen", "sshd", "login", "su", "sudo"})


def _is_foreign(argv: list[str]) -> bool:
    """A process a restart must never signal: a shell, a multiplexer, sshd."""
    if not argv:
        return False
    name = posixpath.basename(argv[0]).lstrip("-")
    return name in _SHELLS or name.startswith(("tmux", "screen"))


class RestartMixin:
    """start_server, stop_server, restart and the shared `_restart` path."""

    profile: Profile
    server: ServerView
    host: Any
    _spec: LaunchSpec | None
    _restarting: bool

    # ------------------------------------------------------------ restart

    def _check_not_restarting(self) -> None:
        if self._restarting:
            raise UserError("a restart is already running; wait for it to finish")

    @property
    def restarting(self) -> bool:
        return self._restarting

    async def start_server(self) -> None:
        """Start the server with the profile's launch command (or the last known one)."""
        if not self.profile.demo:  # the demo's own sim server is started even when read-only
            self._check_writable("start the server")
        self._check_not_restarting()
        if self._spec is None:
            self._spec = self._spec_from_profile_or_state()
        if self._spec is None:
            raise UserError("no launch command: set launch_command in the profile")
        self._restarting = True
        await self._restart(reason="start")

    async def stop_server(self) -> None:
        if not self.profile.demo:
            self._check_writable("stop the server")
        self._check_not_restarting()
        self._restarting = True
        try:
            await self._stop_current(time.monotonic())
            self._set_server(state="stopped", pid=None, pgid=None, message="stopped")
        finally:
            self._restarting = False

    async def restart(self) -> None:
        """Stop, wait for the port, relaunch with the same argv/cwd/env, wait until ready."""
        self._check_writable("restart the server")
        self._check_not_restarting()
        if self._spec is None:
            raise UserError("no server to restart: none was found and the profile has no launch command")
        self._restarting = True
        await self._restart(reason="restart")

    def _progress(self, phase: str, message: str, t0: float) -> None:
        self._emit(RestartProgress(phase, message, time.monotonic() - t0))

    async def _stop_current(self, t0: float) -> None:
        """TERM the server's process group (grace, then KILL); a group shared with a shell is not signalled."""
        pgid = self.server.pgid
        if pgid is None:
            return
        self._progress("stopping", f"stopping process group {pgid}", t0)
        procs = await self.host.processes()
        foreign = [p for p in procs if p.pgid == pgid and _is_foreign(p.argv)]
        if foreign and self.server.pid:
            outcome = await self._stop_pid(self.server.pid)
            shown = posixpath.basename(foreign[0].argv[0]) if foreign[0].argv else "?"
            self._progress("stopping", f"pid {self.server.pid} (its group {pgid} also holds {shown}): {outcome}", t0)
            return
        outcome = await self.host.stop_group(pgid, grace=STOP_GRACE_S)
        self._progress("stopping", f"process group {pgid}: {outcome}", t0)

    async def _stop_pid(self, pid: int) -> str:
        """TERM one process, wait for it to go, KILL after the grace (shared group: spare the rest)."""
        await self.host.run(["kill", "-s", "TERM", str(pid)], timeout=20)
        deadline = time.monotonic() + STOP_GRACE_S
        while time.monotonic() < deadline:
            if not any(p.pid == pid for p in await self.host.processes()):
                return "stopped"
            await asyncio.sleep(0.3)
        await self.host.run(["kill", "-s", "KILL", str(pid)], timeout=20)
        return "killed"

    async def _port_free(self, spec: LaunchSpec) -> bool:
        res = await self.host.run([self.host.python, "-c", _PORT_FREE, spec.bind_host, str(spec.port)], timeout=20)
        return res.stdout.strip() == "free"

    async def _restart(self, *, reason: str) -> None:
        """The one restart path (start, restart, apply, rollback). The caller has set `_restarting`."""
        assert self._spec is not None
        self._restarting = True
        self._restart_epoch += 1
        epoch = self._restart_epoch
        t0 = time.monotonic()
        spec = self._spec
        try:
            if spec.log_path is None:
                spec = dataclasses.replace(spec, log_path=self.profile.log_path or default_log_path(spec.port))
                self._spec = spec
            await self._stop_current(t0)
            self._set_server(state="stopped", pid=None, pgid=None, log_tail=(), message="")
            self._progress("port", f"waiting for port {spec.port} to be free", t0)
            deadline = time.monotonic() + PORT_WAIT_S
            while not await self._port_free(spec):
                if time.monotonic() > deadline:
                    raise RestartFailed(f"port {spec.port} is still in use {PORT_WAIT_S:.0f} s after the stop")
                await asyncio.sleep(0.25)
            self._progress("launching", "launching: " + " ".join(spec.argv[:6]) + " ...", t0)
            assert spec.log_path is not None
            self._start_follow(spec.log_path, start="end")
            cwd = spec.cwd or str(Path(spec.log_path).parent)
            rotates = False
            with contextlib.suppress(UserError):
                rotates = (await self.host.stat(spec.log_path)).size > 0
            self._launch_epoch = epoch
            if not rotates:  # no old lines can arrive: whatever the follower reads now is this launch's
                self._log_epoch = epoch
            pgid = await self.host.spawn_detached(list(spec.argv), cwd=cwd, env=spec.env, log_path=spec.log_path)
            self.telemetry.mark(time.time(), reason)
            self._set_server(state="starting", pid=pgid, pgid=pgid, started_at=time.time(), port=spec.port,
                             log_path=spec.log_path, argv=spec.argv, message=f"{reason}: loading")
            self._save_launch(spec)
            self._update_effective()
            await self._wait_ready(spec, epoch, t0, pgid)
        except RestartFailed as err:
            await self._fail(str(err), t0)
            raise
        except UserError as err:
            await self._fail(str(err), t0)
            raise RestartFailed(str(err)) from None
        finally:
            self._restarting = False
        self._set_server(state="ready", message="")
        self._progress("ready", f"ready after {time.monotonic() - t0:.1f} s", t0)
        with contextlib.suppress(UserError):
            await self.poll_server_info()
        await self.refresh_servers()
        await self._read_launch_facts()
        with contextlib.suppress(Exception):
            await self.refresh_findings()
        self._record("restart", results={"ok": True, "seconds": round(time.monotonic() - t0, 2)}, note=reason)

    async def _wait_ready(self, spec: LaunchSpec, epoch: int, t0: float, pgid: int) -> None:
        deadline = time.monotonic() + self.profile.restart_deadline_s
        c = await self.client()
        last_alive_check = 0.0
        self._progress("loading", "waiting for the ready line and /health", t0)
        while True:
            self._flush_if_quiet()
            if self._failure_epoch == epoch and self._failure is not None:
                f = self._failure
                raise RestartFailed(f"the server failed to start: {f.kind}: {f.last_line}")
            if self._ready_epoch == epoch and await c.health(timeout=10):
                return
            now = time.monotonic()
            if now > deadline:
                raise RestartFailed(
                    f"the server was not ready within {self.profile.restart_deadline_s:.0f} s (restart deadline)"
                )
            if now - last_alive_check > 1.0:
                last_alive_check = now
                if not await self._group_alive(pgid):
                    await asyncio.sleep(0.5)  # let the follower deliver the last lines
                    self._flush_if_quiet(force=True)
                    f = self._failure if self._failure_epoch == epoch else None
                    if f is not None:
                        raise RestartFailed(f"the server failed to start: {f.kind}: {f.last_line}")
                    raise RestartFailed("the server exited during start-up")
            await asyncio.sleep(0.2)

    async def _group_alive(self, pgid: int) -> bool:
        procs = await self.host.processes()
        return any(p.pgid == pgid for p in procs)

    async def _log_tail(self) -> tuple[str, ...]:
        """The last 40 lines of the server's log file (else the last lines followed)."""
        tail: tuple[str, ...] = ()
        path = self._spec.log_path if self._spec else self.server.log_path
        if path:
            with contextlib.suppress(Exception):
                res = await self.host.run(["tail", "-n", str(LOG_TAIL_LINES), path], timeout=20)
                if res.exit_code == 0:
                    tail = tuple(res.stdout.splitlines())
        return tail or tuple(self.recent_log(LOG_TAIL_LINES))

    async def _fail(self, message: str, t0: float) -> None:
        tail = await self._log_tail()
        self._set_server(state="failed", log_tail=tail, message=message)
        self._progress("failed", message, t0)
        self._notice(message, "error")
        self._record("restart", results={"ok": False, "error": message}, note="failed")

