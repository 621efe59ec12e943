"""Scale-out: the fleet read from a Prometheus server's HTTP API instead of each server's `/metrics`.

One instant query (`/api/v1/query`) and one range query (`/api/v1/query_range`) per refresh, each a
selector over every metric name a row uses (both engines', and `up`), answer the whole fleet: one row per
`instance` label. The answers are parsed here (pure) into the same `Reading`s the direct path makes, so a
row is derived one way. Answers are read as Prometheus writes them: `{"status": "success", "data":
{"resultType": "vector"|"matrix", "result": [{"metric": {...}, "value": [t, "v"]} | "values": [[t, "v"], ...]]}}`,
and `{"status": "error", "errorType": ..., "error": ...}` with a 4xx/5xx status.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from eagle3_tui.errors import UserError
from eagle3_tui.fleet.readings import ALL_NAMES, engine_of, reading_from_samples
from eagle3_tui.fleet.rows import Point
from eagle3_tui.formats.promtext import MetricSample

UP = "up"
SELECTOR = '{__name__=~"' + "|".join(re.escape(n).replace("\\:", ":") for n in (*ALL_NAMES, UP)) + '"}'
"""Every family a row uses, in one query (Prometheus anchors the regex)."""


class PrometheusError(UserError):
    """The Prometheus server refused the query or answered something that is not its API."""


@dataclass(frozen=True)
class InstanceRead:
    """One `instance` as the queries saw it: its engine, its reads in time order, whether Prometheus
    could scrape it last time (`up`; None: no `up` series)."""

    instance: str
    engine: str
    points: tuple[Point, ...]
    up: bool | None


def _result(body: Any, expect: str) -> list[Mapping[str, Any]]:
    if not isinstance(body, Mapping) or "status" not in body:
        raise PrometheusError("the answer is not Prometheus's HTTP API (no status field)")
    if body["status"] == "error":
        raise PrometheusError(f"Prometheus refused the query: {body.get('errorType', 'error')}: "
                              f"{body.get('error', 'no reason given')}")
    data = body.get("data")
    if body["status"] != "success" or not isinstance(data, Mapping):
        raise PrometheusError(f"the answer's status is {body['status']!r} without data")
    if data.get("resultType") != expect:
        raise PrometheusError(f"expected a {expect} answer, got {data.get('resultType')!r}")
    result = data.get("result")
    if not isinstance(result, list):
        raise PrometheusError("the answer's data has no result list")
    return [r for r in result if isinstance(r, Mapping) and isinstance(r.get("metric"), Mapping)]


def _value(pair: Any) -> tuple[float, float] | None:
    if not isinstance(pair, list) or len(pair) != 2:
        return None
    try:
        t, v = float(pair[0]), float(pair[1])  # Prometheus writes values as strings ("NaN", "+Inf" too)
    except (TypeError, ValueError):
        return None
    return (t, v) if math.isfinite(t) else None


def _sample(metric: Mapping[str, Any], value: float) -> tuple[str, MetricSample] | None:
    name, instance = metric.get("__name__"), metric.get("instance")
    if not isinstance(name, str) or not isinstance(instance, str):
        return None
    labels = {str(k): str(v) for k, v in metric.items() if k != "__name__"}
    return instance, MetricSample(name, labels, value)


def vector_by_instance(body: Any) -> dict[str, tuple[float, list[MetricSample]]]:
    """An instant query's answer: per instance, its evaluation time and samples."""
    out: dict[str, tuple[float, list[MetricSample]]] = {}
    for r in _result(body, "vector"):
        tv = _value(r.get("value"))
        got = _sample(r["metric"], tv[1]) if tv is not None else None
        if tv is None or got is None:
            continue
        t, samples = out.get(got[0], (tv[0], []))
        samples.append(got[1])
        out[got[0]] = (max(t, tv[0]), samples)
    return out


def matrix_by_instance(body: Any) -> dict[str, dict[float, list[MetricSample]]]:
    """A range query's answer: per instance, its samples at each step (steps align across series)."""
    out: dict[str, dict[float, list[MetricSample]]] = {}
    for r in _result(body, "matrix"):
        values = r.get("values")
        for pair in values if isinstance(values, list) else []:
            tv = _value(pair)
            got = _sample(r["metric"], tv[1]) if tv is not None else None
            if tv is not None and got is not None:
                out.setdefault(got[0], {}).setdefault(tv[0], []).append(got[1])
    return out


def instances(instant: Any, matrix: Any) -> list[InstanceRead]:
    """Both answers, joined per instance; instances with neither engine's metrics are left out (other
    exporters share the Prometheus)."""
    now = vector_by_instance(instant)
    past = matrix_by_instance(matrix)
    out = []
    for inst in sorted(set(now) | set(past)):
        t_now, samples_now = now.get(inst, (None, []))
        by_t = dict(past.get(inst, {}))
        if t_now is not None:
            by_t[t_now] = [s for s in samples_now if s.name != UP]
        engine = engine_of(s for ss in by_t.values() for s in ss)
        if engine is None:
            continue
        up = [s.value for s in samples_now if s.name == UP]
        points = tuple((t, reading_from_samples(engine, ss)) for t, ss in sorted(by_t.items())
                       if any(s.name.startswith(engine) for s in ss))
        out.append(InstanceRead(inst, engine, points, (up[0] == 1.0) if up else None))
    return out


class Http(Protocol):
    """What the reader needs of an HTTP client (httpx.AsyncClient has it)."""

    async def get(self, url: str, *, params: dict[str, str], timeout: float) -> Any: ...


class PrometheusReader:
    """Reads the fleet from the Prometheus at `base_url` (`/api/v1/query` and `/api/v1/query_range`)."""

    def __init__(self, base_url: str, http: Http, *, window_s: float, timeout_s: float) -> None:
        self.base_url = base_url.rstrip("/")
        self._http = http
        self.window_s = window_s
        self.timeout_s = timeout_s
        self.step_s = max(1.0, window_s / 30)
        self.rate_s = min(window_s, max(30.0, 2 * self.step_s))
        """"Now" spans this much: a range query repeats each scrape at every step, so two steps apart may
        hold one scrape (no change) or two; 30 s holds two at Prometheus's default 15 s scrape interval."""

    async def _get(self, path: str, params: dict[str, str]) -> Any:
        try:
            resp = await self._http.get(f"{self.base_url}{path}", params=params, timeout=self.timeout_s)
        except Exception as err:  # httpx's errors, OSError: the Prometheus server is not reachable
            raise PrometheusError(f"Prometheus at {self.base_url} did not answer ({type(err).__name__}: "
                                  f"{str(err) or 'no detail'})") from None
        try:
            body = resp.json()
        except ValueError:
            raise PrometheusError(f"Prometheus at {self.base_url}{path} answered HTTP {resp.status_code} "
                                  "with something that is not JSON") from None
        if isinstance(body, Mapping) and body.get("status") == "error":
            raise PrometheusError(f"Prometheus at {self.base_url} refused the query: "
                                  f"{body.get('errorType', 'error')}: {body.get('error', 'no reason given')}")
        if resp.status_code >= 400:
            raise PrometheusError(f"Prometheus at {self.base_url}{path} answered HTTP {resp.status_code}")
        return body

    async def read(self, now: float) -> list[InstanceRead]:
        step = self.step_s
        instant = await self._get("/api/v1/query", {"query": SELECTOR, "time": f"{now:.3f}"})
        matrix = await self._get("/api/v1/query_range", {
            "query": SELECTOR, "start": f"{now - self.window_s:.3f}", "end": f"{now:.3f}", "step": f"{step:g}"})
        try:
            return instances(instant, matrix)
        except PrometheusError as err:
            raise PrometheusError(f"Prometheus at {self.base_url}: {err}") from None

