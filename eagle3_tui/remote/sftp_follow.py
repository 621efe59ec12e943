"""Following a log over SFTP polling, for hosts where the Python follower cannot run.

It yields the same records as follower.py (so `Follow` treats both alike) and splits lines with
the same `Reader`. SFTP v3 has no inode, so the inode comes from `stat -L -c %i` (checked when the
file stops growing or shrinks, at most once a second) and a rotated file is found again with
`find DIR -maxdepth 1 -inum N`. Compared with the Python follower: one SFTP round trip per poll
(~0.25 s latency), no grace period for late writes to a rotated file, and only the one rotated
file named by the cursor is drained after a reconnect.
"""

from __future__ import annotations

import asyncio
import posixpath
import time
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

import asyncssh

from eagle3_tui.remote.errors import ConnectionLost
from eagle3_tui.remote.follower import CHUNK, Reader
from eagle3_tui.remote.host import FollowCursor

if TYPE_CHECKING:
    from eagle3_tui.remote.ssh import SSHHost

POLL_S = 0.25
INODE_CHECK_S = 1.0


class SftpPoller:
    def __init__(self, host: SSHHost, path: str, cursor: FollowCursor | None, mode: str, last_n: int) -> None:
        self.host = host
        self.path = path
        self.cursor = cursor
        self.mode = mode
        self.last_n = last_n
        self.inode_support = True

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
    def _rec(reader: Reader, **extra: Any) -> dict[str, Any]:
        rec = {"i": reader.ino, "o": reader.pos, "pi": 0, "po": 0}
        rec.update(extra)
        return rec

    async def _tail_offset(self, f: Any, size: int, n: int) -> int:
        need, pos = n + 1, size
        while pos > 0:
            step = min(CHUNK, pos)
            pos -= step
            data = await f.read(step, pos)
            end = len(data)
            while (nl := data.rfind(b"\n", 0, end)) >= 0:
                need -= 1
                if need == 0:
                    return pos + nl + 1
                end = nl
        return 0

    async def records(self) -> AsyncIterator[dict[str, Any]]:
        try:
            async for rec in self._records():
                yield rec
        except (asyncssh.ConnectionLost, asyncssh.DisconnectError, asyncssh.ChannelOpenError, ConnectionError) as exc:
            raise ConnectionLost(f"Lost the connection to {self.host.name}.") from exc

    async def _drain(self, f: Any, reader: Reader) -> AsyncIterator[dict[str, Any]]:
        while data := await f.read(CHUNK, reader.read_end()):
            if lines := reader.feed(data):
                yield self._rec(reader, l=lines)

    async def _records(self) -> AsyncIterator[dict[str, Any]]:
        sftp = await self.host._sftp()
        cur = self.cursor
        ino = await self._inode(self.path)
        f: Any = None
        reader: Reader | None = None
        if cur is not None and cur.inode and ino is not None and ino not in (0, cur.inode):
            old = await self._find_inode(cur.inode)
            if old is not None:
                async with sftp.open(old, "rb") as of:
                    r = Reader(None, cur.inode, cur.offset)
                    async for rec in self._drain(of, r):
                        yield rec
            cur = None
            self.mode = "begin"
            rotated = True
        else:
            rotated = False
        while ino is None:
            yield {"e": "waiting", "i": 0, "o": 0, "pi": 0, "po": 0}
            self.mode = "begin"
            while ino is None:
                await asyncio.sleep(POLL_S)
                if await sftp.exists(self.path):
                    ino = await self._inode(self.path)
        f = await sftp.open(self.path, "rb")
        try:
            size = (await f.stat()).size or 0
            if cur is not None and (cur.inode == ino or not ino):
                reader = Reader(None, ino, 0)
                if size < cur.offset:
                    yield self._rec(reader, e="truncated")
                else:
                    reader.reset(cur.offset)
                    yield self._rec(reader, e="opened")
            else:
                start = 0 if self.mode == "begin" else await self._tail_offset(f, size, self.last_n)
                reader = Reader(None, ino, start)
                yield self._rec(reader, e="rotated" if rotated else "opened")
            checked = time.monotonic()
            while True:
                got = False
                async for rec in self._drain(f, reader):
                    got = True
                    yield rec
                if got:
                    continue
                await asyncio.sleep(POLL_S)
                try:
                    st = await sftp.stat(self.path)
                    size_now: int | None = st.size or 0
                except asyncssh.SFTPNoSuchFile:
                    size_now = None
                shrunk = size_now is not None and size_now < reader.read_end()
                if not (shrunk or time.monotonic() - checked > INODE_CHECK_S):
                    continue
                checked = time.monotonic()
                now = await self._inode(self.path) if size_now is not None else None
                if now and reader.ino and now != reader.ino:  # rotated: finish the old file, start the new
                    async for rec in self._drain(f, reader):
                        yield rec
                    await f.close()
                    f = await sftp.open(self.path, "rb")
                    reader = Reader(None, now, 0)
                    yield self._rec(reader, e="rotated")
                elif shrunk:
                    reader.reset(0)
                    yield self._rec(reader, e="truncated")
        finally:
            if f is not None:
                try:
                    await asyncio.wait_for(f.close(), 2)
                except Exception:
                    pass
