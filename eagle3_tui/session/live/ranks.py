"""Data-parallel ranks as one server: each DP rank logs its own Decode line with its own throughput, so
the live tok/s is the sum over ranks and the accept length their throughput-weighted mean.

`RankMerger.merge` turns each rank's line into the server's totals as of that line (the newest line of
every rank seen within `stale_s`); a line without a DP tag passes through unchanged.
"""

from __future__ import annotations

import dataclasses
import time

from eagle3_tui.sglang.logline import DecodeStats

STALE_S = 30.0
"""A rank whose last Decode line is older than this has stopped logging (idle, or a restart)."""


class RankMerger:
    def __init__(self, stale_s: float = STALE_S) -> None:
        self.stale_s = stale_s
        self._latest: dict[int, tuple[float, DecodeStats]] = {}

    def merge(self, ev: DecodeStats, now: float | None = None) -> DecodeStats:
        """`ev` as the whole server's line: throughput and requests summed, accept length weighted."""
        dp = ev.ranks.get("DP")
        if dp is None:
            return ev
        t = ev.timestamp if ev.timestamp is not None else (now if now is not None else time.time())
        self._latest[dp] = (t, ev)
        live = [e for seen, e in self._latest.values() if t - seen <= self.stale_s]
        if len(live) < 2:
            return ev
        from eagle3_tui.sglang.client import aggregate_ranks  # httpx's module: only once ranks are seen
        accept, tps = aggregate_ranks([(e.accept_len, e.gen_throughput) for e in live])
        return dataclasses.replace(
            ev,
            gen_throughput=tps,
            accept_len=accept,
            running_req=_total([e.running_req for e in live]),
            queue_req=_total([e.queue_req for e in live]),
        )

    def reset(self) -> None:
        self._latest.clear()


def _total(values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None
