"""The server started, stopped, restarted and relaunched: every entry point that changes what runs begins
with `changing` (read-only refused with `ReadOnlyError`, the deployment asked, the restart claimed:
`UserError` for a second one while one runs), then acts on the server the user named (`check_target`)
through the one restart path (`restart/restarter.py`)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING

from eagle3_tui.errors import EXIT_CONNECTION_LOST, UserError
from eagle3_tui.remote.errors import ConnectionLost
from eagle3_tui.remote.procgroup import pid_alive
from eagle3_tui.session.actions import refuse_readonly
from eagle3_tui.session.events import RestartFailed
from eagle3_tui.session.host.discovery import wanted_port, with_log_path

if TYPE_CHECKING:
    from eagle3_tui.profile import Profile
    from eagle3_tui.remote.host import Host
    from eagle3_tui.session.attached.known import Known
    from eagle3_tui.session.attached.recorder import Recorder
    from eagle3_tui.session.attached.survey import Survey
    from eagle3_tui.session.claim import RestartClaim
    from eagle3_tui.session.deploy.part import DeploymentPart
    from eagle3_tui.session.launch import LaunchSpec
    from eagle3_tui.session.live.monitor import ServerMonitor
    from eagle3_tui.session.restart.restarter import Restarter
    from eagle3_tui.session.store.local import LocalStore
    from eagle3_tui.session.tasks import TaskSet
    from eagle3_tui.session.views import Views


def _other_process_alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid == os.getpid():
        return False
    return pid_alive(pid)


class ServerControl:
    """Start, stop, restart, relaunch (see the module docstring)."""

    def __init__(self, host: Host, profile: Profile, views: Views, known: Known, survey: Survey,
                 monitor: ServerMonitor, restarter: Restarter, deploy: DeploymentPart, store: LocalStore,
                 claim: RestartClaim, tasks: TaskSet, recorder: Recorder, *, readonly: bool) -> None:
        self._host = host
        self._profile = profile
        self._views = views
        self._known = known
        self._survey = survey
        self._monitor = monitor
        self._restarter = restarter
        self._deploy = deploy
        self._store = store
        self._claim = claim
        self._tasks = tasks
        self._recorder = recorder
        self._readonly = readonly

    def check_writable(self, action: str, detail: str = "") -> None:
        if self._readonly and not (self._profile.demo and action in ("start", "stop")):  # the demo's own sim server
            raise refuse_readonly(action, detail, how="the session was started with --readonly")

    @contextlib.asynccontextmanager
    async def changing(self, action: str, needs: str | None, *, detail: str = "",
                       into_log: bool = False) -> AsyncIterator[None]:
        """What every entry point that changes what runs does first: refuse when read-only, ask the
        deployment (`needs`: what it must allow), and hold the one restart for the block."""
        self.check_writable(action, detail)
        if needs is not None:
            self._deploy.check(needs, into_log=into_log)
        async with self._claim:
            yield

    async def start(self) -> None:
        """Start the server with the profile's launch command (or the last known one)."""
        async with self.changing("start", None):
            if self._known.spec is None:
                self._known.spec = self._survey.remembered_spec()
            if self._known.spec is None:
                raise UserError("no launch command: set launch_command in the profile")
            await self.check_target(self._known.spec, "start the server")
            await self.run(reason="start")

    async def stop(self) -> None:
        self.check_writable("stop")
        self._deploy.check("stop")
        await self._restarter.stop()

    async def restart(self, *, into_log: bool = False) -> None:
        """Stop, wait for the port, relaunch with the same argv/cwd/env, wait until ready.

        `into_log`: a server in a terminal pane or a pipe is relaunched detached into a log file."""
        async with self.changing("restart", "restart", into_log=into_log):
            if into_log:
                self._deploy.release_to_log()
            await self.check_target(self._known.spec, "restart the server")
            if self._known.spec is None:
                raise UserError("no server to restart: none was found and the profile has no launch command")
            await self.run(reason="restart")

    async def relaunch(self, argv: Sequence[str], *, reason: str) -> None:
        """Restart with `argv` as the launch command, through the one restart path, without an undo
        record: the flag sweep keeps one record (its first change) for all its steps and restores
        through `rollback`."""
        async with self.changing("restart", "flags"):
            await self.check_target(self._known.spec, "restart the server")
            if self._known.spec is None:
                raise UserError("no server to restart: none was found and the profile has no launch command")
            self._known.spec = self._known.spec.with_argv(tuple(argv))
            self._store.save_launch(self._known.spec)
            self._survey.update_served()
            await self.run(reason=reason)

    async def check_target(self, spec: LaunchSpec | None, what: str) -> None:
        """Refuse, naming what was found, unless `what` acts on the server the user named: the one on the
        port asked for (`--port`, the profile's port, its launch command's), else, with none named, the
        only one running. A server not running may be started only on the port asked for, and only when
        nothing else holds that port. Called before anything on the host changes."""
        want = wanted_port(self._profile)
        servers, server = self._survey.servers, self._views.server
        found = "; ".join(s.label for s in servers) or "none"
        adopted = server.pid is not None and any(s.pid == server.pid for s in servers)
        if want is None:
            if not adopted and len(servers) > 1:
                raise UserError(f"refusing to {what}: several servers (SGLang or vLLM) run here ({found}) and none was "
                                "named: give --port (or set the port in the profile); nothing was changed")
            return
        if adopted and server.port == want:
            return
        if spec is not None and spec.port != want:
            raise UserError(
                f"refusing to {what}: no SGLang or vLLM server this console recognises runs on port {want} (servers "
                f"found: {found}), and the launch command known serves port {spec.port}, not {want}; nothing "
                f"was changed (set launch_command in the profile to start one on port {want})")
        if spec is not None and not await self._restarter.port_free(spec.bind_host, want):
            raise UserError(
                f"refusing to {what}: port {want} is in use, but not by an SGLang or vLLM server this console "
                f"recognises (servers found: {found}); nothing was changed (see `ss -ltnp 'sport = :{want}'` "
                "on the host)")

    async def run(self, *, reason: str) -> None:
        """The restart (the caller holds the claim), then what the new server says about itself."""
        assert self._known.spec is not None
        spec = self._known.spec = with_log_path(self._known.spec, self._profile.log_path)
        self._deploy.fit_remembered(spec)
        self._store.begin_restart({"reason": reason, "since": time.time(), "port": spec.port,
                                   "pgid_before": self._views.server.pgid, "pid": os.getpid()})
        try:
            seconds = await self._restarter.run(spec, reason=reason)
        except RestartFailed as err:
            # The host may already be back when the failure lands: the cause, not the state, says "lost".
            lost = isinstance(err.__context__, ConnectionLost) or not (
                self._host.state.kind == "connected" or self._profile.local)
            if lost:  # the record stays (the next attach says it too); once the host is back, say where it stands
                err.exit_code = EXIT_CONNECTION_LOST  # a command ends on it with the lost connection's status
                self._tasks.spawn(self._cut_off())
            else:
                self._store.end_restart()  # a stated outcome
            self._recorder.record("restart", {"ok": False, "error": str(err)}, "failed")
            raise
        self._store.end_restart()
        with contextlib.suppress(UserError):
            await self._monitor.poll_server_info()
        await self._survey.refresh_servers()
        await self._survey.read_launch_facts()
        with contextlib.suppress(Exception):
            await self._survey.refresh_findings()
        self._recorder.record("restart", {"ok": True, "seconds": round(seconds, 2)}, reason)

    def recover(self) -> str | None:
        """A restart cut off (connection lost, command killed) between its stop and its outcome: say where it stands."""
        rec = self._store.unfinished_restart()
        if rec is None or _other_process_alive(rec.get("pid")):
            return None  # none, or still running in another process of this machine (its lock refuses a second)
        when = time.strftime("%H:%M:%S", time.localtime(float(rec.get("since") or 0)))
        what = f"a restart ({rec.get('reason')}) begun at {when} was cut off before it ended"
        server = self._views.server
        if server.state == "ready" and server.pgid:
            self._store.end_restart()
            note = f"{what}; a server runs now (pid {server.pid}), watched as found"
        else:
            note = (f"{what}: no server runs now; `restart` finishes it"
                    + (", `rollback` undoes the last preset and restarts" if self._store.rollback_preset() else ""))
        recovered = self._known.recovered
        self._known.recovered = f"{recovered}; {note}" if recovered else note
        self._views.notice(note, "warning")
        return note

    async def _cut_off(self) -> None:
        """A restart lost its connection midway: when the host is back, look again and say where the
        server stands (a server found is watched; none: `restart` finishes it)."""
        with contextlib.suppress(UserError):  # the session closed first: the next attach says it
            await self._host.wait_connected()
            if self._claim.busy:
                return  # a new restart already runs; it states its own outcome
            await self._survey.refresh_servers()
            note = self.recover()
            server = self._views.server
            if note and server.state == "failed":  # failed by the lost connection; nothing runs now
                self._views.set_server(server.without_process().with_state("stopped", note))

