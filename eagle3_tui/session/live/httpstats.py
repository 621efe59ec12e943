"""Charts from HTTP for a server whose output is not a file (a tmux pane, a pipe, /dev/null).

(vLLM: its /metrics counters through the engine seam, `Engine.metrics_feed`; the rest of this says SGLang.)

With no log to follow there are no Decode lines, so the live accept length and tok/s come from what
the server answers over HTTP: `/metrics` when it runs with `--enable-metrics` (SGLang's own gauges,
sglang/promtext.py), else `/server_info` (each DP rank's `internal_states`: `last_gen_throughput`, and
`avg_spec_accept_length`, which SGLang keeps since the start or the last cache flush, so it moves
slowly). DP ranks add up as in the log (ranks.py): tok/s summed, accept length throughput-weighted.

A reading becomes one chart point (a `DecodeStats` marked as from HTTP) when the server is busy or
the numbers moved since the last poll: an idle server adds no points, as its log would add no lines.
A /metrics answer that cannot be read is said once, the poll falls back to /server_info, and polling
goes on.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

from eagle3_tui.errors import UserError
from eagle3_tui.session.events import HttpSample, StatsUpdated
from eagle3_tui.session.host.deployment import Deployment
from eagle3_tui.sglang import promtext
from eagle3_tui.sglang.logline import DecodeStats

if TYPE_CHECKING:
    from eagle3_tui.engines.base import MetricsFeed
    from eagle3_tui.session.views import Views
    from eagle3_tui.sglang.client import SGLangClient
    from eagle3_tui.telemetry.metrics import Telemetry

Source = Literal["/metrics", "/server_info"]


@dataclass(frozen=True)
class NoLog:
    """Why there is no log file to follow, and whether a restart into one is offered."""

    reason: str  # "tmux pane", "output into a pipe", "its output is not a file"
    offer_log: bool


def no_log(dep: Deployment, log_path: str | None) -> NoLog | None:
    """None when the server's log is followed (a file, or a source like the journal)."""
    if log_path or dep.source or dep.log:
        return None
    return NoLog(dep.label or "its output is not a file", dep.restarts_into_log)


@dataclass(frozen=True)
class HttpReading:
    """What one HTTP poll says of the whole server (every DP rank together)."""

    source: Source
    accept_len: float | None = None
    gen_tps: float | None = None
    accept_rate: float | None = None
    running: int | None = None
    queue: int | None = None
    token_usage: float | None = None

    @property
    def empty(self) -> bool:
        return self.accept_len is None and self.gen_tps is None

    def as_decode(self, t: float) -> DecodeStats:
        """The reading as a decode stat, so telemetry, charts and rules take it as they take a log line."""
        return DecodeStats(timestamp=t, ranks={}, running_req=self.running, queue_req=self.queue,
                           token_usage=self.token_usage, accept_len=self.accept_len, accept_rate=self.accept_rate,
                           gen_throughput=self.gen_tps, graph=None, extra={"source": self.source},
                           line=f"(from {self.source})")


def _accept(v: float | None) -> float | None:
    """An accept length below 1 is no measurement (SGLang's gauge is 0 before the first verify)."""
    return v if v is not None and v >= 1.0 else None


def _count(per_rank: Mapping[str, float]) -> int | None:
    return int(sum(per_rank.values())) if per_rank else None


def _mean(per_rank: Mapping[str, float]) -> float | None:
    return sum(per_rank.values()) / len(per_rank) if per_rank else None


def reading_from_metrics(text: str) -> HttpReading:
    """SGLang's /metrics text as one reading; a family it lacks is None (MetricsUnreadable: not Prometheus)."""
    from eagle3_tui.sglang.client import aggregate_ranks

    samples = promtext.read_samples(text)
    acc = promtext.by_rank(samples, promtext.SPEC_ACCEPT_LENGTH)
    tps = promtext.by_rank(samples, promtext.GEN_THROUGHPUT)
    ranks = sorted(set(acc) | set(tps))
    accept, total = aggregate_ranks([(_accept(acc.get(r)), tps.get(r)) for r in ranks])
    return HttpReading("/metrics", accept_len=accept, gen_tps=total,
                       accept_rate=_mean(promtext.by_rank(samples, promtext.SPEC_ACCEPT_RATE)),
                       running=_count(promtext.by_rank(samples, promtext.NUM_RUNNING)),
                       queue=_count(promtext.by_rank(samples, promtext.NUM_QUEUE)),
                       token_usage=_mean(promtext.by_rank(samples, promtext.TOKEN_USAGE)))


def reading_from_server_info(info: Mapping[str, Any]) -> HttpReading:
    """/server_info as one reading: the DP ranks' `internal_states` (older builds: the top-level key)."""
    from eagle3_tui.sglang.client import aggregate_ranks, rank_stats, server_accept_length

    ranks = rank_stats(info)
    accept, tps = aggregate_ranks(ranks) if ranks else (server_accept_length(info), None)
    return HttpReading("/server_info", accept_len=_accept(accept), gen_tps=tps)


def is_new(prev: HttpReading | None, cur: HttpReading) -> bool:
    """Whether `cur` is a chart point: it has numbers, and the server is busy or they moved."""
    if cur.empty:
        return False
    if cur.running:
        return True
    return prev is None or (prev.accept_len, prev.gen_tps) != (cur.accept_len, cur.gen_tps)


class HttpCharts:
    """One poll's chart point from HTTP; remembers whether the server serves /metrics."""

    def __init__(self, views: Views, telemetry: Telemetry, clock: Callable[[], float] = time.time) -> None:
        self._views = views
        self._telemetry = telemetry
        self._clock = clock
        self._metrics: bool | None = None  # False: the server answered 404 (no --enable-metrics)
        self._prev: HttpReading | None = None
        self._said: str | None = None
        self._feed: tuple[str, MetricsFeed] | None = None  # another engine's (name, its stateful reader)

    def reset(self) -> None:
        """A new server (or a log to follow now): ask /metrics again, say the next problem again."""
        self._metrics = None
        self._prev = None
        self._said = None
        self._feed = None
        if self._views.server.charts_from is not None:
            self._views.set_server(self._views.server.with_charts(None, None, False))

    async def poll(self, client: SGLangClient, info: Mapping[str, Any], why: NoLog) -> HttpReading:
        """Read /metrics (when served), else take `info` (the /server_info just read); chart what is new."""
        if self._views.server.engine not in (None, "sglang"):
            return await self._poll_engine(client, why)
        reading, note = await self._from_metrics(client)
        if reading is None:
            reading = reading_from_server_info(info)
        if note is not None and note != self._said:
            self._views.notice(f"{note}; charts from /server_info, still polling", "warning")
        self._said = note
        self._views.set_server(self._views.server.with_charts(reading.source, note, why.offer_log))
        if is_new(self._prev, reading):
            ev = reading.as_decode(self._clock())
            self._telemetry.ingest(ev)
            self._views.emit(HttpSample(ev, reading.source))
            self._views.emit(StatsUpdated())
        self._prev = reading
        return reading

    async def _poll_engine(self, client: SGLangClient, why: NoLog) -> HttpReading:
        """Another engine's /metrics through the seam (`Engine.metrics_feed`: vLLM's counters turned into
        rates over a window). An idle window adds no point; counters going backwards are a restart, never
        an error; an answer that cannot be read is said once and polling goes on."""
        from eagle3_tui.engines import get_engine

        engine = get_engine(self._views.server.engine or "")
        if self._feed is None or self._feed[0] != engine.name:
            self._feed = (engine.name, engine.metrics_feed())
        note: str | None = None
        stats = None
        try:
            status, text = await client.metrics_text()
            if status != 200:
                note = f"/metrics answered HTTP {status}"
            else:
                stats = self._feed[1].update(self._clock(), text)
        except (UserError, ValueError) as err:
            note = f"/metrics: {err}"
        if note is not None and note != self._said:
            self._views.notice(f"{note}; still polling", "warning")
        self._said = note
        self._views.set_server(self._views.server.with_charts("/metrics", note, why.offer_log))
        if stats is None:
            return HttpReading("/metrics")
        self._telemetry.ingest_spec(stats, stats.timestamp)
        reading = HttpReading("/metrics", accept_len=stats.mean_acceptance_length, gen_tps=stats.generation_throughput,
                              accept_rate=stats.draft_acceptance_rate, running=stats.running, queue=stats.waiting)
        # the point as a line, for `watch` and the log pane (charted above, with its per-position rates); without
        # SGLang's "accept rate": vLLM's draft acceptance rate is the line's per-draft-token rate already
        line = replace(reading, accept_rate=None).as_decode(stats.timestamp or self._clock())
        self._views.emit(HttpSample(line, reading.source))
        self._views.emit(StatsUpdated())
        return reading

    async def _from_metrics(self, client: SGLangClient) -> tuple[HttpReading | None, str | None]:
        """(the /metrics reading, None) or (None, why it cannot be used; None when it is not served)."""
        if self._metrics is False:
            return None, None
        try:
            status, text = await client.metrics_text()
        except UserError as err:
            return None, f"/metrics: {err}"
        if status == 404:
            self._metrics = False
            return None, None
        if status != 200:
            return None, f"/metrics answered HTTP {status}"
        try:
            reading = reading_from_metrics(text)
        except promtext.MetricsUnreadable as err:
            return None, f"/metrics: {err}"
        if reading.empty:
            return None, f"/metrics has neither {promtext.SPEC_ACCEPT_LENGTH} nor {promtext.GEN_THROUGHPUT}"
        self._metrics = True
        return reading, None
