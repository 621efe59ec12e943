"""The client side of following a log: start the follower on the host, turn its records into
`FollowBatch`/`FollowEvent`, and resume from the last cursor whenever the transport drops.

`Follow` needs only the small `FollowTransport` below, which both hosts implement; it never
imports a host.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any, Protocol

from eagle3_tui.remote import scripts
from eagle3_tui.remote.errors import ConnectionLost, HostError
from eagle3_tui.remote.stream import ProcChannel
from eagle3_tui.remote.types import FollowBatch, FollowCursor, FollowEvent, FollowItem, StartMode


class FollowTransport(Protocol):
    """What a follow needs from a host: a process channel, a way to wait out a dropped
    connection, and (hosts that set `can_poll_files`) follower records without the follower."""

    @property
    def python(self) -> str:
        """The host's interpreter that runs the shipped follower."""

    @property
    def name(self) -> str:
        """A short human name, for messages."""

    @property
    def closed(self) -> bool:
        """True once the host was closed: a follow then ends quietly."""

    @property
    def can_poll_files(self) -> bool:
        """Whether `poll_records` works where the follower cannot run (no Python on the host)."""

    async def open_channel(self, argv: Sequence[str], *, cwd: str | None = None) -> ProcChannel:
        """Start argv with piped output; the process ends when the channel is closed."""

    def poll_records(
        self, path: str, cursor: FollowCursor | None, mode: str, last_lines: int
    ) -> AsyncIterator[dict[str, Any]]:
        """The follower's records, produced without it."""

    async def wait_connected(self) -> None:
        """Return once the transport is usable again."""


class Follow:
    """Async iterator of `FollowBatch | FollowEvent`; `cursor` is the position after the last batch.

    Use `async with host.follow(path) as fol: async for item in fol: ...` (or `await fol.aclose()`);
    closing ends the follower on the host.
    """

    def __init__(
        self,
        host: FollowTransport,
        path: str,
        cursor: FollowCursor | None,
        *,
        start: StartMode = "end",
        last_lines: int = 0,
    ) -> None:
        if start not in ("end", "begin"):
            raise HostError(f"Unknown follow start {start!r}: use 'end' or 'begin'.")
        self.host = host
        self.path = path
        self.cursor = cursor
        self._mode: StartMode = start
        self._last_lines = max(0, int(last_lines))
        self._polling = False
        self._gen = self._run()

    def __aiter__(self) -> Follow:
        return self

    async def __anext__(self) -> FollowItem:
        return await self._gen.__anext__()

    async def aclose(self) -> None:
        await self._gen.aclose()

    async def __aenter__(self) -> Follow:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _argv(self) -> list[str]:
        c = self.cursor or FollowCursor(0, 0)
        return [
            self.host.python,
            "-u",
            "-c",
            scripts.FOLLOWER,
            self.path,
            str(c.inode),
            str(c.offset),
            str(c.prev_inode),
            str(c.prev_offset),
            self._mode,
            str(self._last_lines),
        ]

    def _item(self, rec: dict[str, Any]) -> FollowItem:
        cur = FollowCursor(rec["i"], rec["o"], rec["pi"], rec["po"])
        if cur.inode:
            self.cursor = cur
        lines = rec.get("l")
        if lines is not None:
            return FollowBatch(lines, cur)
        kind = rec["e"]
        if kind == "waiting":
            self._mode = "begin"  # whatever appears later is new: read it whole
        return FollowEvent(kind, self.path)

    async def _run(self) -> AsyncGenerator[FollowItem, None]:
        try:
            async for item in self._items():
                yield item
        except HostError:
            if not self.host.closed:
                raise  # the host was closed under us: the follow simply ends

    async def _items(self) -> AsyncGenerator[FollowItem, None]:
        while True:
            if self._polling:
                try:
                    poll = self.host.poll_records(self.path, self.cursor, self._mode, self._last_lines)
                    async for rec in poll:
                        yield self._item(rec)
                except ConnectionLost:
                    pass
                await self.host.wait_connected()
                continue
            try:
                chan = await self.host.open_channel(self._argv())
            except ConnectionLost:
                await self.host.wait_connected()
                continue
            try:
                while True:
                    try:
                        line = await chan.readline()
                    except ConnectionLost:
                        break
                    if not line:
                        rc = await chan.wait()
                        if rc == 127 and self.host.can_poll_files:  # no Python there: poll over SFTP
                            self._polling = True
                            break
                        err = chan.stderr_text().strip()
                        raise HostError(
                            f"The log follower for {self.path} on {self.host.name} stopped "
                            f"(exit {rc}){': ' + err[-500:] if err else ''}."
                        )
                    yield self._item(json.loads(line))
            finally:
                await chan.close()
            if not self._polling:
                await self.host.wait_connected()
