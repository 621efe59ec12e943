"""A server run by a systemd unit: restarted by `systemctl restart UNIT`, its command line changed by a drop-in.

Killing the group would make systemd restart it behind the console's back (or mark the unit failed),
so the unit's manager does it. A preset that changes the command line writes
`/etc/systemd/system/UNIT.service.d/eagle3-tui.conf` (`ExecStart=` empties the list, the next line
sets the new command), atomically with a backup beside it (systemd reads only `*.conf`), then
`systemctl daemon-reload`; when the reload fails the previous drop-in (or none) is put back and
reloaded. `effective_exec_start` merges a unit and its drop-ins the way `systemctl cat` shows them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import posixpath
import re
import shlex
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from eagle3_tui.errors import UserError
from eagle3_tui.remote.errors import RemoteFileNotFound
from eagle3_tui.session.events import RestartFailed

if TYPE_CHECKING:
    from eagle3_tui.session.host.deployment import Deployment
    from eagle3_tui.session.host.discovery import ServerProcess
    from eagle3_tui.session.launch import LaunchSpec
    from eagle3_tui.session.restart.strategy import Parts

UNIT_DIR = "/etc/systemd/system"
DROPIN_NAME = "eagle3-tui.conf"
SYSTEMCTL_TIMEOUT_S = 120.0
_PLAIN = re.compile(r"^[A-Za-z0-9_@%+=:,./-]+$")


def dropin_path(unit: str, unit_dir: str = UNIT_DIR) -> str:
    return posixpath.join(unit_dir, f"{unit}.service.d", DROPIN_NAME)


def quote_exec_arg(arg: str) -> str:
    """One argv word as systemd's ExecStart reads it: `%` and `$` doubled, quoted when not plain."""
    s = arg.replace("%", "%%").replace("$", "$$")
    if s and _PLAIN.match(s):
        return s
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def render_dropin(argv: Sequence[str]) -> str:
    if not argv:
        raise UserError("refusing to write an empty ExecStart")
    return ("# written by eagle3-tui (a preset's command line); delete this file and run "
            "`systemctl daemon-reload` to undo\n"
            "[Service]\nExecStart=\nExecStart=" + " ".join(quote_exec_arg(a) for a in argv) + "\n")


def unquote_exec(value: str) -> list[str]:
    """An ExecStart value back to argv (the inverse of `quote_exec_arg`; `-`/`@` prefixes dropped)."""
    words = shlex.split(value.lstrip("-@:+!"))
    return [w.replace("%%", "%").replace("$$", "$") for w in words]


def effective_exec_start(texts: Sequence[str]) -> list[str]:
    """The ExecStart values of a unit file then its drop-ins in order: an empty one clears the list."""
    values: list[str] = []
    for text in texts:
        section = ""
        for line in text.splitlines():
            line = line.strip()
            if line.startswith("["):
                section = line
            elif section == "[Service]" and line.startswith("ExecStart="):
                value = line[len("ExecStart="):].strip()
                values = [] if not value else [*values, value]
    return values


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class SystemdRestart:
    """Stop/restart by systemd; a changed argv becomes the unit's drop-in first."""

    def __init__(self, parts: Parts, deployment: Deployment, running_argv: Sequence[str], *,
                 unit_dir: str | None = None) -> None:
        assert deployment.unit is not None
        self._parts = parts
        self._dep = deployment
        self._unit = deployment.unit
        self._running = tuple(running_argv)
        self._unit_dir = unit_dir or UNIT_DIR

    async def _systemctl(self, *args: str) -> str:
        res = await self._parts.host.run(["systemctl", *args], timeout=SYSTEMCTL_TIMEOUT_S)
        if res.exit_code != 0:
            why = (res.stderr or res.stdout).strip()[-300:] or f"exit {res.exit_code}"
            raise RestartFailed(f"systemctl {' '.join(args)} failed: {why}")
        return res.stdout

    async def stop(self, t0: float) -> None:
        self._parts.progress("stopping", f"systemctl stop {self._unit}", t0)
        await self._systemctl("stop", self._unit)

    async def write_dropin(self, argv: Sequence[str], t0: float) -> str:
        """Write the drop-in for `argv` and reload; on a failed reload restore the previous state."""
        host = self._parts.host
        path = dropin_path(self._unit, self._unit_dir)
        old: bytes | None = None
        with contextlib.suppress(RemoteFileNotFound):
            old = await host.read_bytes(path)
        new = render_dropin(argv).encode()
        self._parts.progress("launching", f"writing {path}", t0)
        mk = await host.run(["mkdir", "-p", posixpath.dirname(path)], timeout=20)
        if mk.exit_code != 0:
            raise RestartFailed(f"cannot create {posixpath.dirname(path)}: {mk.stderr.strip()[-300:]}")
        await host.write_atomic(path, new, expect_sha256=_sha(old) if old is not None else None)
        try:
            await self._systemctl("daemon-reload")
        except RestartFailed:
            await self._restore(path, old, new)
            raise
        return path

    async def _restore(self, path: str, old: bytes | None, new: bytes) -> None:
        host = self._parts.host
        with contextlib.suppress(UserError):
            if old is None:
                await host.run(["rm", "-f", path], timeout=20)
            else:
                await host.write_atomic(path, old, expect_sha256=_sha(new))
            await self._systemctl("daemon-reload")

    async def relaunch(self, spec: LaunchSpec, reason: str, t0: float) -> tuple[int, int] | None:
        if tuple(spec.argv) != self._running:
            await self.write_dropin(spec.argv, t0)
        launch = self._parts.follow_fresh(self._dep.log)
        self._parts.progress("launching", f"systemctl restart {self._unit}", t0)
        await self._systemctl("restart", self._unit)
        proc = await self._new_server()
        self._parts.started(proc, reason, self._dep.log)
        if self._dep.log is None:
            await self._parts.wait_health(lambda: self._parts.host.group_alive(proc.pgid), t0)
            return None
        return launch, proc.pgid

    async def _new_server(self) -> ServerProcess:
        """The unit's new main process (`systemctl show -p MainPID`), once discovery sees it as a server."""
        from eagle3_tui.session.host.discovery import discover_servers

        deadline = time.monotonic() + self._parts.deadline_s
        while time.monotonic() < deadline:
            out = await self._systemctl("show", "-p", "MainPID", "--value", self._unit)
            main = int(out.strip() or 0) if out.strip().isdigit() else 0
            if main and main != self._dep.pid:
                for proc in await discover_servers(self._parts.host):
                    if main in (proc.pid, proc.pgid):
                        return proc
            await asyncio.sleep(0.3)
        raise RestartFailed(f"unit {self._unit} has no running server {self._parts.deadline_s:.0f} s after the restart")
