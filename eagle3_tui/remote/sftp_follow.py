"""Following a log over SFTP polling, for hosts where the Python follower cannot run.

It yields the same records as follow_on_host.py (so `Follow` treats both alike) and splits lines with
the same `Reader`. SFTP v3 has no inode, so the inode comes from `stat -L -c %i` (checked when the
file stops growing or shrinks, at most once a second) and a rotated file is found again with
`find DIR -maxdepth 1 -inum N`. Compared with the Python follower: one SFTP round trip per poll
(~0.25 s latency), no grace period for late writes to a rotated file, and only the one rotated
file named by the cursor is drained after a reconnect.

The poller gets what it needs in its constructor (something that runs commands, and a factory of
SFTP clients), so it never imports the SSH host.
"""

from __future__ import annotations

import asyncio
import posixpath
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Protocol

import asyncssh

from eagle3_tui.remote.errors import ConnectionLost
from eagle3_tui.remote.follow_on_host import CHUNK, Reader, tail_offset_reads
from eagle3_tui.remote.types import FollowCursor, RunResult

POLL_S = 0.25
INODE_CHECK_S = 1.0

Record = dict[str, Any]
SftpFactory = Callable[[], Awaitable[asyncssh.SFTPClient]]


class CommandRunner(Protocol):
    """What the poller needs besides SFTP: run a short command on the host."""

    @property
    def name(self) -> str:
        """A short human name, for messages."""

    async def run(
        self, argv: Sequence[str], *, cwd: str | None = None, timeout: float = 60.0, check: bool = False
    ) -> RunResult:
        """Run argv on the host and return its result."""


async def sftp_read(f: asyncssh.SFTPClientFile, size: int = -1, offset: int | None = None) -> bytes:
    """`f.read` of a file opened in binary mode (asyncssh types it as either str or bytes)."""
    data: bytes | str = await f.read(size, offset)
    return data if isinstance(data, bytes) else data.encode("utf-8")


async def sftp_tail_offset(f: asyncssh.SFTPClientFile, size: int, n: int) -> int:
    """Where the last `n` complete lines of the open file start (follow_on_host.py's rule, read over SFTP)."""
    reads = tail_offset_reads(size, n)
    try:
        pos, length = next(reads)
        while True:
            pos, length = reads.send(await sftp_read(f, length, pos))
    except StopIteration as done:
        return int(done.value)


class SftpPoller:
    """One follow over SFTP: `records()` is the follower's record stream for `path`."""

    def __init__(
        self,
        host: CommandRunner,
        sftp: SftpFactory,
        path: str,
        cursor: FollowCursor | None,
        mode: str,
        last_n: int,
    ) -> None:
        self.host = host
        self._sftp_factory = sftp
        self.path = path
        self.cursor = cursor
        self.mode = mode
        self.last_n = last_n
        self.inode_support = True
        self._file: asyncssh.SFTPClientFile | None = None

    async def _inode(self, path: str) -> int | None:
        """The inode of `path` (None: absent; 0: unknown, `stat` is not there)."""
        if not self.inode_support:
            return 0
        res = await self.host.run(["stat", "-L", "-c", "%i", "--", path], timeout=30)
        if res.exit_code == 0 and res.stdout.strip().isdigit():
            return int(res.stdout.strip())
        if res.exit_code == 127:
            self.inode_support = False
            return 0
        return None

    async def _find_inode(self, ino: int) -> str | None:
        if not ino or not self.inode_support:
            return None
        d = posixpath.dirname(self.path) or "."
        res = await self.host.run(["find", d, "-maxdepth", "1", "-inum", str(ino), "-print", "-quit"], timeout=30)
        found = res.stdout.strip()
        return found or None

    @staticmethod
    def _rec(reader: Reader, **extra: Any) -> Record:
        rec: Record = {"i": reader.ino, "o": reader.pos, "pi": 0, "po": 0}
        rec.update(extra)
        return rec

    async def records(self) -> AsyncIterator[Record]:
        try:
            async for rec in self._records():
                yield rec
        except (asyncssh.ConnectionLost, asyncssh.DisconnectError, asyncssh.ChannelOpenError, ConnectionError) as exc:
            raise ConnectionLost(f"Lost the connection to {self.host.name}.") from exc

    async def _drain(self, f: asyncssh.SFTPClientFile, reader: Reader) -> AsyncIterator[Record]:
        while data := await sftp_read(f, CHUNK, reader.read_end()):
            if lines := reader.feed(data):
                yield self._rec(reader, l=lines)

    async def _records(self) -> AsyncIterator[Record]:
        sftp = await self._sftp_factory()
        cur = self.cursor
        ino = await self._inode(self.path)
        rotated = False
        if cur is not None and cur.inode and ino is not None and ino not in (0, cur.inode):
            async for rec in self._drain_rotated(sftp, cur):  # the file moved away while nobody followed
                yield rec
            cur, self.mode, rotated = None, "begin", True
        if ino is None:
            yield {"e": "waiting", "i": 0, "o": 0, "pi": 0, "po": 0}
            self.mode = "begin"  # whatever appears later is new: read it whole
            ino = await self._wait_for_file(sftp)
        self._file = await sftp.open(self.path, "rb")
        try:
            reader, first = await self._start(self._file, cur, ino, rotated)
            yield first
            async for rec in self._watch(sftp, reader):
                yield rec
        finally:
            await self._close_file()

    async def _drain_rotated(self, sftp: asyncssh.SFTPClient, cur: FollowCursor) -> AsyncIterator[Record]:
        """The rest of the cursor's file, found again by inode under its rotated name (if it is there)."""
        old = await self._find_inode(cur.inode)
        if old is None:
            return
        async with sftp.open(old, "rb") as of:
            async for rec in self._drain(of, Reader(None, cur.inode, cur.offset)):
                yield rec

    async def _wait_for_file(self, sftp: asyncssh.SFTPClient) -> int:
        while True:
            await asyncio.sleep(POLL_S)
            if await sftp.exists(self.path):
                ino = await self._inode(self.path)
                if ino is not None:
                    return ino

    async def _start(
        self, f: asyncssh.SFTPClientFile, cur: FollowCursor | None, ino: int, rotated: bool
    ) -> tuple[Reader, Record]:
        """The reader for the opened file and the event record that announces it."""
        size = (await f.stat()).size or 0
        if cur is not None and (cur.inode == ino or not ino):
            reader = Reader(None, ino, 0)
            if size < cur.offset:
                return reader, self._rec(reader, e="truncated")
            reader.reset(cur.offset)
            return reader, self._rec(reader, e="opened")
        start = 0 if self.mode == "begin" else await sftp_tail_offset(f, size, self.last_n)
        reader = Reader(None, ino, start)
        return reader, self._rec(reader, e="rotated" if rotated else "opened")

    async def _size(self, sftp: asyncssh.SFTPClient) -> int | None:
        try:
            st = await sftp.stat(self.path)
        except asyncssh.SFTPNoSuchFile:
            return None
        return st.size or 0

    async def _watch(self, sftp: asyncssh.SFTPClient, reader: Reader) -> AsyncIterator[Record]:
        """Deliver what the file gains; on rotation finish it and go on with the new file."""
        checked = time.monotonic()
        while True:
            assert self._file is not None
            got = False
            async for rec in self._drain(self._file, reader):
                got = True
                yield rec
            if got:
                continue
            await asyncio.sleep(POLL_S)
            size_now = await self._size(sftp)
            shrunk = size_now is not None and size_now < reader.read_end()
            if not (shrunk or time.monotonic() - checked > INODE_CHECK_S):
                continue
            checked = time.monotonic()
            now = await self._inode(self.path) if size_now is not None else None
            if now and reader.ino and now != reader.ino:  # rotated: finish the old file, start the new
                async for rec in self._drain(self._file, reader):
                    yield rec
                await self._file.close()
                self._file = await sftp.open(self.path, "rb")
                reader = Reader(None, now, 0)
                yield self._rec(reader, e="rotated")
            elif shrunk:
                reader.reset(0)
                yield self._rec(reader, e="truncated")

    async def _close_file(self) -> None:
        f, self._file = self._file, None
        if f is not None:
            try:
                await asyncio.wait_for(f.close(), 2)
            except Exception:
                pass
