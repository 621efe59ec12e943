"""The fleet put together: the HTTP client, the tunnels and the right reader for what was asked."""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import Any

from eagle3_tui.fleet.poller import DirectFleet, Fleet, PrometheusFleet, Tunnels
from eagle3_tui.fleet.promapi import PrometheusReader
from eagle3_tui.fleet.spec import FleetSpec


def make_fleet(spec: FleetSpec | None, *, prometheus: str | None = None, tunnels: Tunnels | None = None,
               ) -> tuple[Fleet, Callable[[], Coroutine[Any, Any, None]]]:
    """The fleet (Prometheus when `prometheus` is given, the fleet file's entries only labelling its
    instances; else each server directly) and the coroutine that closes what it opened."""
    import httpx

    # every server read at once, each connection kept for the next interval (httpx keeps 20 by default)
    n = max(50, 2 * len(spec.servers)) if spec is not None else 200
    http = httpx.AsyncClient(follow_redirects=True,
                             limits=httpx.Limits(max_connections=n, max_keepalive_connections=n))
    fleet: Fleet
    if prometheus is not None:
        window = spec.window_s if spec is not None else 300.0
        timeout = spec.timeout_s if spec is not None else 5.0
        fleet = PrometheusFleet(PrometheusReader(prometheus, http, window_s=window, timeout_s=timeout), labels=spec)
    else:
        assert spec is not None
        fleet = DirectFleet(spec, http, tunnels=tunnels)

    async def close() -> None:
        try:
            await fleet.aclose()
        finally:
            await http.aclose()

    return fleet, close
