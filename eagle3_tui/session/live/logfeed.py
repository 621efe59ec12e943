"""The server log, from the host to the listeners: follow -> LogReader -> run state -> emit.

Lines arrive from `Host.follow` in batches. Each batch is parsed in a worker thread (the regexes are
the expensive part, and 20,000 lines/s must not stall the UI's event loop); the worker also picks out
the few events the loop acts on (`NOTABLE`: decode stats, failures, warnings, server args, the ready
line; a busy server's log is mostly access lines and request dumps) and merges the DP ranks' decode
stats, so the loop's work per batch is proportional to what matters, not to the lines. Back on the
loop, those events move the run state (`state.RunTracker`) and the telemetry at once, so the restart
sees a ready or failure line as soon as it is read. What the listeners hear is batched: one `LogBatch`
(every line and every event, in order) and one `StatsUpdated` when decode stats came, at most every
`EMIT_INTERVAL_S`.

The telemetry is filed on the loop, not in the worker: its rings are read by the UI on the loop
between two points of one reading, so a writer in another thread could tear a read.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from eagle3_tui.engines import Failed, Ready, SpecStats, Started
from eagle3_tui.engines.base import LogFeed as EngineLogFeed
from eagle3_tui.errors import UserError
from eagle3_tui.session.events import AnyLogEvent, LogBatch, StatsUpdated
from eagle3_tui.session.live.ranks import RankMerger
from eagle3_tui.session.live.runstate import LogSwitched, RunTracker
from eagle3_tui.sglang.logline import (
    DecodeStats,
    Failure,
    LogReader,
    ServerArgs,
    ServerReady,
    ServerWarning,
)
from eagle3_tui.sglang.requests import finished_accept_lengths

if TYPE_CHECKING:
    from eagle3_tui.remote.host import Host
    from eagle3_tui.session.views import Views
    from eagle3_tui.telemetry.metrics import Telemetry

EMIT_INTERVAL_S = 0.1  # at most 10 LogBatch events a second
QUIET_FLUSH_S = 1.5  # a failure held for its traceback is delivered once the log is quiet this long
RETRY_S = 2.0
RECENT_LINES = 400
MAX_WARNINGS = 50

FailureHook = Callable[[Failure | Failed], None]
Reader = LogReader | EngineLogFeed
"""SGLang's own reader (its events carry DP ranks, warnings, prefill stats), or another engine's feed
through the seam (`Engine.log_feed`: SpecStats, Ready, Failed, Started)."""

NOTABLE: frozenset[type] = frozenset({DecodeStats, Failure, ServerArgs, ServerWarning, ServerReady,
                                      SpecStats, Failed, Ready, Started})
"""The event types the feed acts on (the run state takes failures and the ready line); the others
(access lines, request dumps, Prefill stats, anything else) only travel to the listeners."""


LOG_TAIL_LINES = 40
"""The log's last lines a failed server or restart shows."""


async def log_tail(host: Host, path: str | None, feed: LogFeed) -> tuple[str, ...]:
    """The last lines of the server's log file (else the last lines followed)."""
    tail: tuple[str, ...] = ()
    if path and feed.decode is None:  # an engine's log file holds records: the decoded lines followed serve
        tail = await host.tail_lines(path, LOG_TAIL_LINES)
    return tail or tuple(feed.recent(LOG_TAIL_LINES))


@dataclass
class Parsed:
    """One batch as the worker leaves it: every event, and the notable ones with DP ranks merged."""

    events: list[AnyLogEvent] = field(default_factory=list)
    """SGLang's `LogEvent`s, or another engine's `EngineEvent`s."""
    notable: list[AnyLogEvent] = field(default_factory=list)
    """`events` of the NOTABLE types, in order; a DecodeStats as the whole server's line (RankMerger)."""
    requests: list[float] = field(default_factory=list)
    """The accept length of each request a `--log-requests` finish line reports (`sglang.requests`)."""


class LogFeed:
    """Follows one log path at a time; see the module docstring."""

    def __init__(
        self,
        host: Host,
        tracker: RunTracker,
        views: Views,
        telemetry: Telemetry,
        *,
        on_failure: FailureHook | None = None,
        emit_interval_s: float = EMIT_INTERVAL_S,
    ) -> None:
        self._host = host
        self._tracker = tracker
        self._views = views
        self._telemetry = telemetry
        self._ranks = RankMerger()  # DP ranks: one server's totals (ranks.py)
        self._on_failure = on_failure
        self._interval = emit_interval_s
        self._reader_kind = "sglang"
        self._new_reader: Callable[[], Reader] = LogReader
        self._reader: Reader = LogReader()
        self._reader_lock = threading.Lock()  # the reader is fed in a worker thread, flushed on the loop
        self._task: asyncio.Task[None] | None = None
        self._path: str | None = None
        self._closed = False
        self._recent: deque[str] = deque(maxlen=RECENT_LINES)
        self.server_args: dict[str, str] = {}
        self.warnings: deque[str] = deque(maxlen=MAX_WARNINGS)
        self._pending_since: tuple[object, float] | None = None
        self._out_lines: list[str] = []
        self._out_events: list[AnyLogEvent] = []
        self._out_stats = False
        self._last_emit = 0.0
        self._emit_handle: asyncio.TimerHandle | None = None
        self.decode: Callable[[list[str]], list[str]] | None = None
        """Lines as followed -> the server's lines (a container engine's log records); None: as they are."""

    # ------------------------------------------------------------ following

    @property
    def path(self) -> str | None:
        return self._path

    def use_reader(self, kind: str, new_reader: Callable[[], Reader]) -> None:
        """Read the log with the readers `new_reader` makes (the attached engine's: `EngineTerms.log_reader`);
        another `kind` than the one read so far starts a fresh reader."""
        if kind == self._reader_kind:
            return
        with self._reader_lock:
            self._reader_kind, self._new_reader = kind, new_reader
            self._reader = new_reader()

    def start(self, path: str, *, start: Literal["end", "begin"], last_lines: int = 0, fresh: bool = False) -> None:
        """Follow `path` (a no-op when it is already followed, unless `fresh`).

        `fresh`: drop the current follow, any failure held for its traceback and the warnings and start
        line read, so that nothing read from the previous file can reach the run state or the doctor
        after this call (a new launch's log).
        """
        if self._task is not None and self._path == path and not self._task.done() and not fresh:
            return
        if self._task is not None:
            self._task.cancel()
        if fresh:
            with self._reader_lock:
                self._reader = self._new_reader()
            self._pending_since = None
            self.warnings.clear()
            self.server_args = {}
        self._path = path
        self._task = asyncio.ensure_future(self._follow(path, start, last_lines))

    async def _follow(self, path: str, start: Literal["end", "begin"], last_lines: int) -> None:
        from eagle3_tui.remote.host import FollowBatch, FollowEvent

        cursor = None
        while not self._closed:
            try:
                async with self._host.follow(path, cursor, start=start, last_lines=last_lines) as fol:
                    async for item in fol:
                        if isinstance(item, FollowBatch):
                            cursor = item.cursor
                            await self._ingest(item.lines)
                        elif isinstance(item, FollowEvent) and item.kind in ("rotated", "truncated", "opened"):
                            if item.kind != "opened":
                                with self._reader_lock:
                                    self._reader = self._new_reader()
                            self._tracker.dispatch(LogSwitched())  # from here on: the newest launch's log
                return
            except asyncio.CancelledError:
                raise
            except UserError as err:
                self._views.notice(f"log follow of {path}: {err}; retrying", "warning")
                await asyncio.sleep(RETRY_S)

    async def _ingest(self, lines: list[str]) -> None:
        if self.decode is not None:
            lines = self.decode(lines)
        now = time.time()
        parsed = await asyncio.to_thread(self._parse, lines, now)
        self._apply(lines, parsed, now)

    def _parse(self, lines: Sequence[str], now: float | None) -> Parsed:
        events: list[AnyLogEvent] = []
        with self._reader_lock:
            reader = self._reader
            for line in lines:
                events.extend(reader.feed(line))
            parsed = self._pick(events, now)
        parsed.requests = [v for line in lines if "spec_verify_ct" in line for v in finished_accept_lengths(line)]
        return parsed

    def _pick(self, events: Sequence[AnyLogEvent], now: float | None) -> Parsed:
        """The notable events (in order), decode stats merged over the DP ranks; under the reader lock."""
        notable = [ev for ev in events if type(ev) in NOTABLE]
        merge = self._ranks.merge
        for i, ev in enumerate(notable):
            if isinstance(ev, DecodeStats):
                notable[i] = merge(ev, now)
        return Parsed(list(events), notable)

    def ingest_now(self, lines: Sequence[str], *, log_time: bool = False) -> None:
        """Parse and apply lines on the caller's thread and emit at once (a recorded log, a replay).

        `log_time`: file decode stats under the log's own timestamps instead of the wall clock.
        """
        now = None if log_time else time.time()
        self._apply(list(lines), self._parse(lines, now), now)
        self._emit_now()

    # ------------------------------------------------------------ applying

    def _apply(self, lines: list[str], parsed: Parsed, now: float | None) -> None:
        self._recent.extend(lines)
        events = parsed.events
        self._tracker.dispatch_all(parsed.notable)
        stats = bool(parsed.requests)
        if parsed.requests:
            self._telemetry.ingest_requests(parsed.requests)
        for ev in parsed.notable:
            if isinstance(ev, DecodeStats):
                self._telemetry.ingest(ev, now)
                stats = True
            elif isinstance(ev, SpecStats):
                self._telemetry.ingest_spec(ev, now)
                stats = True
            elif isinstance(ev, (Failure, Failed)) and self._on_failure is not None:
                self._on_failure(ev)
            elif isinstance(ev, ServerArgs):
                self.server_args = dict(ev.args)
            elif isinstance(ev, Started):
                self.server_args = {str(k): str(v) for k, v in ev.args.items()}
            elif isinstance(ev, ServerWarning):
                self.warnings.append(ev.message)
        if lines or events:
            self._queue(lines, events, stats)

    def flush_if_quiet(self) -> None:
        """A failure is held until the next record; when the log goes quiet, deliver it anyway."""
        if not self._reader_lock.acquire(blocking=False):
            return  # a batch is being parsed: the log is not quiet
        try:
            pending = self._reader.pending
            if pending is None:
                self._pending_since = None
                return
            now = time.monotonic()
            if self._pending_since is None or self._pending_since[0] is not pending:
                self._pending_since = (pending, now)
            if now - self._pending_since[1] < QUIET_FLUSH_S:
                return
            self._pending_since = None
            now = time.time()
            parsed = self._pick(self._reader.flush(), now)
        finally:
            self._reader_lock.release()
        self._apply([], parsed, now)

    async def settle(self) -> None:
        """Deliver a held failure now (the server is gone: no next record will come) and emit."""
        now = time.time()
        parsed = await asyncio.to_thread(self._flush_locked, now)
        self._apply([], parsed, now)
        self._emit_now()

    def _flush_locked(self, now: float) -> Parsed:
        with self._reader_lock:
            self._pending_since = None
            return self._pick(self._reader.flush(), now)

    def recent(self, n: int) -> list[str]:
        """The last `n` lines followed."""
        return list(self._recent)[-n:]

    # ------------------------------------------------------------ emitting, batched

    def _queue(self, lines: list[str], events: list[AnyLogEvent], stats: bool) -> None:
        self._out_lines.extend(lines)
        self._out_events.extend(events)
        self._out_stats = self._out_stats or stats
        if self._emit_handle is not None:
            return
        delay = max(0.0, self._last_emit + self._interval - time.monotonic())
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # no loop (a synchronous replay): ingest_now emits
        self._emit_handle = loop.call_later(delay, self._emit_now)

    def _emit_now(self) -> None:
        if self._emit_handle is not None:
            self._emit_handle.cancel()
            self._emit_handle = None
        lines, events, stats = self._out_lines, self._out_events, self._out_stats
        self._out_lines, self._out_events, self._out_stats = [], [], False
        self._last_emit = time.monotonic()
        if lines or events:
            self._views.emit(LogBatch(lines, events))
        if stats:
            self._views.emit(StatsUpdated())

    async def close(self) -> None:
        self._closed = True
        if self._emit_handle is not None:
            self._emit_handle.cancel()
            self._emit_handle = None
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(BaseException):
                await self._task
