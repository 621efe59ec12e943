"""The `Host` contract: what the console needs from the machine that runs the server.

Two implementations share it: `LocalHost` (local.py: the demo, and a console on the GPU box itself)
and `SSHHost` (ssh.py: asyncssh, one supervised connection). Everything that can be shared is
implemented here once, on top of `run` and the transport's process channels: the detached launch,
the group stop, the process list, the follow loop. So the demo, the tests and real hosts take the
same path.

Quick use::

    host = LocalHost()                         # or SSHHost("gpu-alias")
    res = await host.run(["ls", "-l", path])   # RunResult(exit_code, stdout, stderr)
    async with host.follow(log, start="end", last_lines=100) as fol:
        async for item in fol:                 # FollowBatch(lines, cursor) | FollowEvent(kind, path)
            ...
    await host.close()
"""

from __future__ import annotations

import abc
import json
import shlex
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from eagle3_tui.remote import scripts
from eagle3_tui.remote.errors import HostError, RemoteFileNotFound
from eagle3_tui.remote.follow_client import Follow
from eagle3_tui.remote.stream import LineStream, ProcChannel
from eagle3_tui.remote.types import (
    ConnKind,
    ConnState,
    FileStat,
    FollowBatch,
    FollowCursor,
    FollowEvent,
    FollowItem,
    ProcessInfo,
    RunResult,
    StartMode,
    StopOutcome,
    WriteResult,
)

__all__ = [
    "ConnKind",
    "ConnState",
    "FileStat",
    "FollowBatch",
    "FollowCursor",
    "FollowEvent",
    "FollowItem",
    "Host",
    "ProcessInfo",
    "RunResult",
    "StartMode",
    "StateListener",
    "StopOutcome",
    "WriteResult",
]

StateListener = Callable[[ConnState], None]

_STOP_WORDS: dict[str, StopOutcome] = {"STOPPED": "stopped", "KILLED": "killed", "NOT_RUNNING": "not-running"}


def _checked_pgid(pgid: int) -> int:
    pgid = int(pgid)
    if pgid < 2:
        raise HostError(f"Refusing to signal process group {pgid}.")
    return pgid


@dataclass
class _Listeners:
    fns: list[StateListener] = field(default_factory=list)

    def emit(self, state: ConnState) -> None:
        for fn in list(self.fns):
            fn(state)


class Host(abc.ABC):
    """A machine the console drives. Paths are the host's; every argv element is passed as data.

    Implementations provide the transport primitives (`run`, `open_channel`, file access,
    `forward`, `close`); the process-group control and the follow loop live here. `open_channel`,
    `poll_records`, `wait_connected`, `python`, `name`, `closed` and `can_poll_files` are the
    `FollowTransport` that `Follow` drives.
    """

    #: the interpreter that runs shipped scripts (follower, process list, stream watchdog)
    python: str
    #: a short human name ("local" or the SSH target), for messages
    name: str
    #: whether `follow` can fall back to polling when the follower cannot run (no Python on the host)
    can_poll_files: bool = False

    def __init__(self) -> None:
        self._listeners = _Listeners()
        self._state = ConnState("connected")

    # ---- connection state ------------------------------------------------------------------
    @property
    def state(self) -> ConnState:
        return self._state

    @property
    def closed(self) -> bool:
        """True once `close()` was called; follows then end quietly."""
        return bool(getattr(self, "_closed", False))

    def add_state_listener(self, fn: StateListener) -> Callable[[], None]:
        """Call `fn(state)` on every change (in the event loop's thread); returns a remover."""
        self._listeners.fns.append(fn)
        return lambda: self._listeners.fns.remove(fn) if fn in self._listeners.fns else None

    def _set_state(self, state: ConnState) -> None:
        if state != self._state:
            self._state = state
            self._listeners.emit(state)

    async def connect(self, timeout: float | None = None) -> None:
        """Make sure the host is reachable (a no-op for LocalHost)."""
        return None

    # ---- transport primitives ----------------------------------------------------------------
    @abc.abstractmethod
    async def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        timeout: float = 60.0,
        check: bool = False,
    ) -> RunResult:
        """Run argv (each element quoted), stdin empty; on timeout the command is stopped on the host
        and `CommandTimeout` raised. `check=True` raises `HostError` on a non-zero exit."""

    @abc.abstractmethod
    async def open_channel(self, argv: Sequence[str], *, cwd: str | None = None) -> ProcChannel:
        """Start argv with piped stdout/stderr; the process must end when the channel is closed."""

    def stream(self, argv: Sequence[str], *, cwd: str | None = None) -> LineStream:
        """Output lines of a long-running command, as they come.

        Use `async with host.stream(argv) as s: async for line in s: ...`; leaving the block (or
        `await s.aclose()`) ends the process on the host; `s.exit_code` and `s.stderr` are set at the end.
        The command runs under a small watchdog in the host's `python` that ends its process group
        when the channel closes or the connection drops (SSH signals cannot be relied on). Over SSH
        a dropped connection raises `ConnectionLost` from the iterator (a stream is not resumed).
        """
        return LineStream(lambda: self.open_channel(self._watchdog_argv(argv), cwd=cwd))

    def _watchdog_argv(self, argv: Sequence[str]) -> list[str]:
        """Wrap argv so it dies (with its group) when the channel's stdin closes."""
        return [self.python, "-u", "-c", scripts.WATCHDOG, *argv]

    @abc.abstractmethod
    async def read_bytes(self, path: str) -> bytes:
        """The file's bytes; `RemoteFileNotFound` if absent."""

    async def read_text(self, path: str) -> str:
        """The file as UTF-8 text (invalid bytes replaced)."""
        return (await self.read_bytes(path)).decode("utf-8", "replace")

    @abc.abstractmethod
    async def stat(self, path: str) -> FileStat:
        """Stat (following symlinks); `RemoteFileNotFound` if absent."""

    async def exists(self, path: str) -> bool:
        try:
            await self.stat(path)
        except RemoteFileNotFound:
            return False
        return True

    async def tail_lines(self, path: str, n: int) -> tuple[str, ...]:
        """The last `n` lines of a file on the host (a failed server's log tail); () when it cannot be read."""
        try:
            res = await self.run(["tail", "-n", str(n), path], timeout=20)
        except Exception:  # gone, unreadable, the connection lost: no tail rather than a second error
            return ()
        return tuple(res.stdout.splitlines()) if res.exit_code == 0 else ()

    @abc.abstractmethod
    async def glob(self, pattern: str) -> list[str]:
        """Sorted paths matching a shell pattern (`*`, `?`, `[...]`, `**`); [] when none."""

    @abc.abstractmethod
    async def write_atomic(self, path: str, data: bytes | str, *, expect_sha256: str | None) -> WriteResult:
        """Replace `path` with `data` so a reader sees the old or the new file, never a mix.

        `expect_sha256` is the SHA-256 (hex) of the content the caller read; if the file now holds
        anything else, `FileChanged` is raised and nothing is touched. `None` means "the file must
        not exist yet". The new file keeps the old one's permission bits; the old content stays
        in a timestamped backup beside it (`<path>.bak-YYYYmmdd-HHMMSS`), returned in the result.
        """

    @abc.abstractmethod
    async def forward(self, remote_port: int) -> int:
        """A local TCP port that reaches 127.0.0.1:`remote_port` on the host (for httpx)."""

    @abc.abstractmethod
    async def close(self) -> None:
        """End every stream, follower and in-flight command this object started on the host."""

    # ---- process groups (shared: one launch path for demo, tests and real hosts) ---------------
    async def spawn_detached(
        self,
        argv: Sequence[str],
        *,
        cwd: str,
        env: Mapping[str, str] | None = None,
        log_path: str,
        pidfile: str | None = None,
        clear_env: bool = False,
    ) -> int:
        """Start argv in a new session (setsid) that outlives this connection; returns its pgid.

        `env` is set on top of the launching shell's environment, or (`clear_env`) is the whole
        environment (`env -i`: a relaunch with exactly what the old process had). stdin is /dev/null, stdout+stderr go to `log_path` (an existing non-empty log is first
        renamed to `<log>.<timestamp>`, so followers see a rotation), the pgid is written to
        `pidfile` (default `.<log name>.pid` beside the log). Refuses if the pidfile's group is alive.
        """
        if not argv:
            raise HostError("Nothing to start: the command is empty.")
        full = list(argv)
        if env or clear_env:
            assigns = []
            for key, value in (env or {}).items():
                if not scripts.ENV_NAME.fullmatch(key):
                    raise HostError(f"Invalid environment variable name {key!r}.")
                assigns.append(f"{key}={value}")
            full = ["env", *(["-i"] if clear_env else []), *assigns, *full]
        pid_path = pidfile or scripts.default_pidfile(log_path)
        res = await self.run(["sh", "-c", scripts.SPAWN, "sh", cwd, log_path, pid_path, self.python, *full], timeout=30)
        out = res.stdout.strip().splitlines()
        last = out[-1] if out else ""
        if last.startswith("STARTED "):
            return int(last.split()[1])
        if last.startswith("ALREADY "):
            raise HostError(f"A process group from {pid_path} is still running (pgid {last.split()[1]}).")
        raise HostError(f"Could not start {shlex.join(argv)} in {cwd}: {(res.stderr or res.stdout).strip()}")

    async def stop_group(self, pgid: int, grace: float = 30.0) -> StopOutcome:
        """TERM the process group, wait up to `grace` s for no live (non-zombie) member, then KILL.

        Runs the host's `sh` (works without Python there). On this machine with no event loop to
        hand, `remote.procgroup.stop_group` is the synchronous equivalent.
        """
        pgid = _checked_pgid(pgid)
        ticks = max(1, round(grace * 10))
        res = await self.run(["sh", "-c", scripts.STOP, "sh", str(pgid), str(ticks)], timeout=grace + 30)
        word = (res.stdout.strip().splitlines()[-1:] or [""])[0]
        outcome = _STOP_WORDS.get(word)
        if outcome is None:
            raise HostError(f"Stopping process group {pgid} failed: {(res.stderr or res.stdout).strip()}")
        return outcome

    async def group_alive(self, pgid: int) -> bool:
        """Whether the process group has a member that is not a zombie (the rule `stop_group` uses)."""
        pgid = _checked_pgid(pgid)
        res = await self.run(["sh", "-c", scripts.ALIVE, "sh", str(pgid)], timeout=30)
        if res.exit_code not in (0, 1):
            raise HostError(f"Checking process group {pgid} on {self.name} failed: {res.stderr.strip()[-300:]}")
        return res.exit_code == 0

    async def processes(self) -> list[ProcessInfo]:
        """Every process the host's /proc shows (pid, pgid, start time, argv, cwd when readable)."""
        res = await self.run([self.python, "-c", scripts.PROCESSES], timeout=60)
        if res.exit_code != 0:
            raise HostError(f"Listing processes on {self.name} failed: {res.stderr.strip()[-300:]}")
        out: list[ProcessInfo] = []
        for line in res.stdout.splitlines():
            rec = json.loads(line)
            out.append(ProcessInfo(rec["pid"], rec["pgid"], rec["start"], rec["argv"], rec.get("cwd")))
        return out

    # ---- follow ----------------------------------------------------------------------------------
    def follow(
        self,
        path: str,
        cursor: FollowCursor | None = None,
        *,
        start: StartMode = "end",
        last_lines: int = 0,
    ) -> Follow:
        """Follow a growing log: batches of complete lines with their cursor, and file events.

        Without a cursor, `start="end"` delivers only new lines (plus the last `last_lines` existing
        ones), `start="begin"` the whole file. With a cursor, delivery resumes exactly after it,
        through rotations (the rotated file is drained first) and truncations. Over SSH, a dropped
        connection is resumed from the cursor once the supervisor reconnects: no line lost, none twice.
        """
        return Follow(self, path, cursor, start=start, last_lines=last_lines)

    def poll_records(
        self, path: str, cursor: FollowCursor | None, mode: str, last_lines: int
    ) -> AsyncIterator[dict[str, Any]]:
        """Follower records without the follower (hosts with `can_poll_files`)."""
        raise HostError(f"{self.name} cannot follow {path}: its Python ({self.python}) is not there.")

    async def wait_connected(self) -> None:
        """Block until the transport is usable again (LocalHost: always is)."""
        return None

    # async context manager sugar
    async def __aenter__(self) -> Host:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

