"""A server in a container: its engine's log decoded, its files seen as it sees them, restarts by its engine.

- The engine's log file holds one record per line: Docker's json-file driver writes
  `{"log": "text\\n", "stream": "stderr", "time": "..."}` (a line over 16 KiB is split into records
  whose `log` does not end in a newline); Podman's k8s-file and the kubelet write CRI lines
  `<time> <stream> <F|P> <text>` (P: partial). `EngineLogDecoder` turns both back into the server's
  own lines, so the one log feed and its one parser read them; anything else passes unchanged.
- `FileView` is the host with every absolute path mapped through `/proc/<pid>/root`: the draft
  config, the model, the checkpoint are read (and a config edit written) where the container has them.
- `ContainerRestart` restarts through `docker restart <id>` / `podman restart <id>`: relaunching the
  argv on the host would start a second server outside the container.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from eagle3_tui.remote.host import Host
from eagle3_tui.session.events import RestartFailed

if TYPE_CHECKING:
    from eagle3_tui.remote.stream import ProcChannel
    from eagle3_tui.remote.types import FileStat, RunResult, WriteResult
    from eagle3_tui.session.host.deployment import Deployment
    from eagle3_tui.session.host.discovery import ServerProcess
    from eagle3_tui.session.launch import LaunchSpec
    from eagle3_tui.session.restart.strategy import Parts

_CRI = re.compile(r"^\d{4}-\d\d-\d\dT\S+ (?:stdout|stderr) ([FP]) (.*)$")
ENGINE_TIMEOUT_S = 120.0
MAX_PARTIAL = 1 << 20  # a record stream that never ends its line is cut here


class EngineLogDecoder:
    """Engine log records -> the server's lines (partial records joined). Stateful: one per followed log."""

    def __init__(self) -> None:
        self._partial = ""

    def __call__(self, lines: Sequence[str]) -> list[str]:
        out: list[str] = []
        for raw in lines:
            text, complete = self._record(raw)
            if text is None:
                out.append(raw)
                continue
            self._partial += text
            if complete or len(self._partial) > MAX_PARTIAL:
                out.append(self._partial)
                self._partial = ""
        return out

    @staticmethod
    def _record(raw: str) -> tuple[str | None, bool]:
        """(text, line complete) of one record; (None, True) when `raw` is not an engine record."""
        if raw.startswith("{"):
            try:
                rec = json.loads(raw)
            except ValueError:
                return None, True
            log = rec.get("log") if isinstance(rec, dict) else None
            if not isinstance(log, str):
                return None, True
            complete = log.endswith("\n")
            return log.rstrip("\n").rstrip("\r") if complete else log, complete
        m = _CRI.match(raw)
        if m is None:
            return None, True
        return m.group(2), m.group(1) == "F"


class FileView(Host):
    """`host` with absolute paths read and written as the deployment's process sees them."""

    def __init__(self, host: Host, deployment: Deployment) -> None:
        super().__init__()
        self._host = host
        self._dep = deployment
        self.python = host.python
        self.name = host.name

    def map(self, path: str) -> str:
        return self._dep.host_path(path)

    async def run(self, argv: Sequence[str], *, cwd: str | None = None, timeout: float = 60.0,
                  check: bool = False) -> RunResult:
        return await self._host.run(argv, cwd=cwd, timeout=timeout, check=check)

    async def open_channel(self, argv: Sequence[str], *, cwd: str | None = None) -> ProcChannel:
        return await self._host.open_channel(argv, cwd=cwd)

    async def read_bytes(self, path: str) -> bytes:
        return await self._host.read_bytes(self.map(path))

    async def stat(self, path: str) -> FileStat:
        return await self._host.stat(self.map(path))

    async def glob(self, pattern: str) -> list[str]:
        return await self._host.glob(self.map(pattern))

    async def write_atomic(self, path: str, data: bytes | str, *, expect_sha256: str | None) -> WriteResult:
        return await self._host.write_atomic(self.map(path), data, expect_sha256=expect_sha256)

    async def forward(self, remote_port: int) -> int:
        return await self._host.forward(remote_port)

    async def close(self) -> None:
        """The view owns nothing: closing it leaves the host open."""
        return None


class ContainerRestart:
    """Stop and restart by the container engine; the restart path waits for the new server's readiness."""

    def __init__(self, parts: Parts, deployment: Deployment) -> None:
        self._parts = parts
        self._dep = deployment

    def _refused(self, action: str) -> None:
        why = self._dep.refusal(action)
        if why is not None:
            raise RestartFailed(why)

    async def _engine(self, verb: str, t0: float) -> None:
        dep = self._dep
        assert dep.engine is not None and dep.id is not None
        self._parts.progress("stopping" if verb == "stop" else "launching", f"{dep.engine} {verb} {dep.id[:12]}", t0)
        res = await self._parts.host.run([dep.engine, verb, dep.id], timeout=ENGINE_TIMEOUT_S)
        if res.exit_code != 0:
            why = (res.stderr or res.stdout).strip()[-300:] or f"exit {res.exit_code}"
            raise RestartFailed(f"{dep.engine} {verb} {dep.id[:12]} failed: {why}")

    async def stop(self, t0: float) -> None:
        self._refused("stop")
        await self._engine("stop", t0)

    async def relaunch(self, spec: LaunchSpec, reason: str, t0: float) -> tuple[int, int] | None:
        self._refused("restart")
        dep = self._dep
        launch = self._parts.follow_fresh(dep.log)
        await self._engine("restart", t0)

        def same_container(proc: ServerProcess) -> bool:
            return proc.deployment.id == dep.id

        proc = await self._parts.find_server(same_container, dep.pid, t0)
        self._parts.started(proc, reason, dep.log)
        if dep.log is None:
            await self._parts.wait_health(lambda: self._parts.host.group_alive(proc.pgid), t0)
            return None
        return launch, proc.pgid
