"""A systemd unit whose output goes to the journal (no file to follow): `journalctl -u UNIT -f -o cat`.

The lines go through the session's one log feed (`LogFeed.ingest_now`: the same reader, run state and
telemetry as a followed file), batched at most ten times a second. A journal stream is not resumed
after a dropped connection: the follow starts again from the last lines (`-n`), said as a warning.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from eagle3_tui.errors import UserError
from eagle3_tui.session.host.deployment import journal_argv

if TYPE_CHECKING:
    from eagle3_tui.remote.host import Host
    from eagle3_tui.session.live.logfeed import LogFeed
    from eagle3_tui.session.views import Views

BATCH_S = 0.1
RETRY_S = 2.0


class JournalFollow:
    """Follows one unit's journal into the feed until `stop()`."""

    def __init__(self, host: Host, feed: LogFeed, views: Views, unit: str) -> None:
        self._host = host
        self._feed = feed
        self._views = views
        self._unit = unit
        self._pending: list[str] = []
        self._task: asyncio.Task[Any] | None = None

    @property
    def unit(self) -> str:
        return self._unit

    def start(self, spawn: Callable[[Coroutine[Any, Any, None]], asyncio.Task[Any]]) -> None:
        """Run under `spawn` (the session's task set: closing the session ends it)."""
        if self._task is None or self._task.done():
            self._task = spawn(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task

    async def _run(self) -> None:
        flusher = asyncio.ensure_future(self._flush_loop())
        try:
            while not self._host.closed:
                try:
                    async with self._host.stream(journal_argv(self._unit)) as lines:
                        async for line in lines:
                            self._pending.append(line)
                    why = f"journalctl ended ({(lines.stderr or '').strip()[-200:] or lines.exit_code})"
                except UserError as err:
                    why = str(err)
                self._views.notice(f"journal of {self._unit}: {why}; following again", "warning")
                await asyncio.sleep(RETRY_S)
        finally:
            flusher.cancel()
            self._flush()

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(BATCH_S)
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            batch, self._pending = self._pending, []
            self._feed.ingest_now(batch)
