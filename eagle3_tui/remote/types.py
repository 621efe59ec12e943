"""The values the host layer hands out: command results, follow cursors and batches, file facts,
process rows and the connection state. Plain frozen dataclasses, shared by every host module
(kept apart from `Host` so the follower, the SFTP poller and the hosts import them without
importing each other)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

StopOutcome = Literal["stopped", "killed", "not-running"]
ConnKind = Literal["connecting", "connected", "reconnecting", "failed", "closed"]
StartMode = Literal["end", "begin"]


@dataclass(frozen=True, slots=True)
class RunResult:
    """What a finished command gave back (output decoded as UTF-8, invalid bytes replaced)."""

    exit_code: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@dataclass(frozen=True, slots=True)
class FollowCursor:
    """Where a follow stands: the file (inode) and the byte offset just after the last line delivered.

    `prev_inode`/`prev_offset` name a rotated file still being watched for late writes (0 when none).
    Pass the cursor back to `follow` to resume with every line exactly once.
    """

    inode: int
    offset: int
    prev_inode: int = 0
    prev_offset: int = 0


@dataclass(frozen=True, slots=True)
class FollowBatch:
    """Complete lines (without their newline) and the cursor just after the last of them."""

    lines: list[str]
    cursor: FollowCursor


@dataclass(frozen=True, slots=True)
class FollowEvent:
    """`opened` (following a file), `rotated` (switched to the next file), `truncated` (restarted at 0),
    `waiting` (the file does not exist yet)."""

    kind: Literal["opened", "rotated", "truncated", "waiting"]
    path: str


FollowItem = FollowBatch | FollowEvent


@dataclass(frozen=True, slots=True)
class FileStat:
    """The few stat fields the console uses."""

    path: str
    size: int
    mtime: float
    mode: int  # permission bits only
    is_dir: bool


@dataclass(frozen=True, slots=True)
class WriteResult:
    """`backup_path` is None when the file did not exist before; `sha256` is of the data written."""

    backup_path: str | None
    sha256: str


@dataclass(frozen=True, slots=True)
class ProcessInfo:
    """One process on the host, from /proc. `start_time` is seconds since the epoch."""

    pid: int
    pgid: int
    start_time: float
    argv: list[str]
    cwd: str | None = None


@dataclass(frozen=True, slots=True)
class ConnState:
    """The connection as the UI shows it.

    kind: connecting (first attempt), connected, reconnecting (`attempt` n, next try in `wait_s`),
    failed (`reason`; never retried: host key or authentication), closed (by `close()`).
    `reason` also carries the last transient error while reconnecting.
    """

    kind: ConnKind
    attempt: int = 0
    wait_s: float = 0.0
    reason: str = ""
