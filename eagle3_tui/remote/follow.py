"""The client side of following a log: start the follower on the host, turn its records into
`FollowBatch`/`FollowEvent`, and resume from the last cursor whenever the transport drops."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any

from eagle3_tui.remote import scripts
from eagle3_tui.remote.errors import ConnectionLost, HostError
from eagle3_tui.remote.host import FollowBatch, FollowCursor, FollowEvent, FollowItem, StartMode

if TYPE_CHECKING:
    from eagle3_tui.remote.host import Host


class Follow:
    """Async iterator of `FollowBatch | FollowEvent`; `cursor` is the position after the last batch.

    Use `async with host.follow(path) as fol: async for item in fol: ...` (or `await fol.aclose()`);
    closing ends the follower on the host.
    """

    def __init__(
        self,
        host: Host,
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
                    poll = self.host._poll_records(self.path, self.cursor, self._mode, self._last_lines)
                    async for rec in poll:
                        yield self._item(rec)
                except ConnectionLost:
                    pass
                await self.host._wait_connected()
                continue
            try:
                chan = await self.host._open_channel(self._argv())
            except ConnectionLost:
                await self.host._wait_connected()
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
                await self.host._wait_connected()
