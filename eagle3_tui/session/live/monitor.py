"""While attached: read `/server_info` every few seconds, see a loading server become ready, and see a
server's process group gone. A server with no log file to follow is charted from HTTP on the same poll
(httpstats.py).

The monitor reports what it saw (`watch` yields `NewNumbers` and `GroupGone`); the session decides what
follows (the doctor again; a rediscovery that tells a server restarted by someone else from one that
died, which `mark_exited` then states). Nothing here runs while a restart does: the restart path owns
the server's state meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from eagle3_tui.errors import UserError
from eagle3_tui.session.claim import RestartClaim
from eagle3_tui.session.connection import ClientFactory
from eagle3_tui.session.events import Reported
from eagle3_tui.session.live.httpstats import HttpCharts, no_log
from eagle3_tui.session.live.logfeed import log_tail
from eagle3_tui.session.restart_timing import LAST_LINES_GRACE_S

if TYPE_CHECKING:
    from eagle3_tui.remote.host import Host
    from eagle3_tui.session.host.deployment import Deployment
    from eagle3_tui.session.live.logfeed import LogFeed
    from eagle3_tui.session.live.runstate import RunTracker
    from eagle3_tui.session.views import Views
    from eagle3_tui.telemetry.metrics import Telemetry

POLL_INTERVAL_S = 3.0
TICK_S = 0.5



@dataclass(frozen=True)
class NewNumbers:
    """The log brought new live numbers (some doctor rules read them)."""


@dataclass(frozen=True)
class GroupGone:
    """The server stopped answering and its process group `pgid` is gone (died, or restarted by another)."""

    pgid: int


Seen = NewNumbers | GroupGone


class DeploymentNow(Protocol):
    """Where the server runs now (the deployment part)."""

    @property
    def current(self) -> Deployment: ...


def reported(info: dict[str, Any]) -> Reported:
    from eagle3_tui.sglang.client import server_accept_length

    def count(key: str) -> int | None:
        value = info.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    version = info.get("version")
    return Reported(server_accept_length(info), version if isinstance(version, str) else None,
                    count("speculative_num_steps"), count("speculative_eagle_topk"),
                    count("speculative_num_draft_tokens"))


class ServerMonitor:
    """The attached session's poll loop (`watch`)."""

    def __init__(
        self,
        host: Host,
        views: Views,
        feed: LogFeed,
        tracker: RunTracker,
        claim: RestartClaim,
        telemetry: Telemetry,
        client: ClientFactory,
        deployment: DeploymentNow,
    ) -> None:
        """`deployment`: where the server runs, so a server whose log cannot be followed is charted from HTTP."""
        self._host = host
        self._views = views
        self._feed = feed
        self._tracker = tracker
        self._claim = claim
        self._telemetry = telemetry
        self._client = client
        self._deployment = deployment
        self.charts = HttpCharts(views, telemetry)
        self.server_info: dict[str, Any] | None = None
        self.poll_error: str | None = None
        """Why the last /server_info read failed (None: it was read)."""

    async def poll_server_info(self) -> dict[str, Any]:
        """One read of the engine's info (SGLang's /server_info, vLLM's /version) into the server view."""
        client = await self._client()
        if self._views.server.engine not in (None, "sglang"):
            from eagle3_tui.engines import get_engine

            engine = get_engine(self._views.server.engine)
            answer = await client.get_json(engine.info_path)
            info: dict[str, Any] = {"engine": engine.name,
                                    "version": engine.release(answer if isinstance(answer, dict) else {})}
        else:
            info = await client.server_info()
        self.server_info = info
        self._views.set_server(self._views.server.with_reported(reported(info)))
        return info

    async def watch(self) -> AsyncIterator[Seen]:
        """Until cancelled: deliver a held failure when the log is quiet, poll, and say what was seen."""
        last = 0.0
        seen_lines = -1
        while True:
            self._feed.flush_if_quiet()
            now = time.monotonic()
            if now - last >= POLL_INTERVAL_S and not self._claim.busy:
                last = now
                gone = await self._poll_once()
                if gone is not None:
                    yield gone
                if self._telemetry.decode_lines != seen_lines:  # live numbers feed some rules
                    seen_lines = self._telemetry.decode_lines
                    yield NewNumbers()
            await asyncio.sleep(TICK_S)

    async def _poll_once(self) -> GroupGone | None:
        """Ready: read /server_info. Attached while it loads ("starting"): ready once /health answers."""
        server = self._views.server
        with contextlib.suppress(UserError):
            if server.state == "ready":
                try:
                    info = await self.poll_server_info()
                except UserError as err:
                    self._bad_answer(str(err))
                    return await self._gone()
                self._bad_answer(None)
                await self._chart_from_http(info)
            elif server.state == "starting" and server.pgid and await (await self._client()).health(timeout=10):
                self._views.set_state("ready")
                await self._chart_from_http(await self.poll_server_info())
        return None

    async def _chart_from_http(self, info: dict[str, Any]) -> None:
        """No log file to follow: this poll's chart point from /metrics or the /server_info just read."""
        why = no_log(self._deployment.current, self._views.server.log_path)
        if why is None:
            self.charts.reset()
            return
        await self.charts.poll(await self._client(), info, why)

    def _bad_answer(self, why: str | None) -> None:
        """A /server_info answer that cannot be read is said once (a warning) and polling goes on."""
        if why is not None and why != self.poll_error:
            self._views.notice(f"/server_info: {why}; still polling", "warning")
        self.poll_error = why

    async def _gone(self) -> GroupGone | None:
        """The server stopped answering: its process group gone, or None while it still runs."""
        pgid = self._views.server.pgid
        if pgid is None or self._claim.busy or await self._host.group_alive(pgid):
            return None
        return GroupGone(pgid)

    async def mark_exited(self, pgid: int, log_path: str | None) -> None:
        """The server exited (no other took its place): `failed`, with its last log lines and failure."""
        await asyncio.sleep(LAST_LINES_GRACE_S)  # let the follower deliver the last lines
        await self._feed.settle()
        f = self._tracker.state.current_failure
        why = f"{f.kind}: {f.last_line}" if f is not None else "no failure line"
        tail = await log_tail(self._host, log_path, self._feed)
        self._views.set_state("failed", f"the server exited ({why})", log_tail=tail)
        self._views.notice(f"the server (process group {pgid}) exited: {why}", "error")
