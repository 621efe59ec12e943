"""The scale-out path: the fleet read from a Prometheus HTTP API, served on loopback by a stand-in that
answers `/api/v1/query` and `/api/v1/query_range` field for field as Prometheus writes them (values as
strings, `[unix_seconds, "value"]` pairs, `instance` and `job` labels added by the scrape, a 400 with
`status: error` for a bad query). It evaluates the one form of query the fleet sends, a `__name__` regex
selector, over the series it holds."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from eagle3_tui.cli import main
from eagle3_tui.fleet import PrometheusFleet, PrometheusReader
from tests.fleet_fakes import Answer, FakeServer, fake_server

NOW = 1_796_400_000.0
SGL = {"engine_type": "unified", "model_name": "/models/kimi", "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}
VLLM = {"engine": "0", "model_name": "/models/llama"}


def series(instance: str, name: str, labels: dict[str, str], points: list[tuple[float, float]]) -> dict[str, Any]:
    return {"metric": {"__name__": name, "instance": instance, "job": "eagle3", **labels}, "points": points}


def sglang_series(instance: str, accepts: list[float], job_up: float = 1.0, now: float = NOW) -> list[dict[str, Any]]:
    ts = [now - 15 * (len(accepts) - 1 - i) for i in range(len(accepts))]
    return [
        series(instance, "sglang:spec_accept_length", SGL, list(zip(ts, accepts, strict=True))),
        series(instance, "sglang:generation_tokens_total", SGL, [(t, 1000.0 + 600 * i) for i, t in enumerate(ts)]),
        series(instance, "sglang:num_running_reqs", SGL, [(t, 4.0) for t in ts]),
        series(instance, "sglang:spec_num_steps", SGL, [(t, 3.0) for t in ts]),
        series(instance, "sglang:spec_num_draft_tokens", SGL, [(t, 4.0) for t in ts]),
        series(instance, "up", {}, [(t, job_up) for t in ts]),
    ]


def vllm_series(instance: str, now: float = NOW) -> list[dict[str, Any]]:
    ts = [now - 60 + 15 * i for i in range(5)]
    per_pos = [series(instance, "vllm:spec_decode_num_accepted_tokens_per_pos_total", {**VLLM, "position": str(p)},
                      [(t, (100.0 - 20 * p) * (i + 1)) for i, t in enumerate(ts)]) for p in range(3)]
    return [
        series(instance, "vllm:spec_decode_num_drafts_total", VLLM, [(t, 200.0 * (i + 1)) for i, t in enumerate(ts)]),
        series(instance, "vllm:spec_decode_num_accepted_tokens_total", VLLM, [(t, 240.0 * (i + 1)) for i, t in enumerate(ts)]),
        series(instance, "vllm:spec_decode_num_draft_tokens_total", VLLM, [(t, 600.0 * (i + 1)) for i, t in enumerate(ts)]),
        series(instance, "vllm:generation_tokens_total", VLLM, [(t, 450.0 * (i + 1)) for i, t in enumerate(ts)]),
        series(instance, "vllm:num_requests_running", VLLM, [(t, 2.0) for t in ts]),
        *per_pos,
        series(instance, "up", {}, [(t, 1.0) for t in ts]),
    ]


def other_exporter(instance: str) -> list[dict[str, Any]]:
    return [series(instance, "up", {}, [(NOW, 1.0)]), series(instance, "node_load1", {}, [(NOW, 0.5)])]


def fmt(v: float) -> str:
    return repr(float(v)) if v == v else "NaN"


def evaluate(held: list[dict[str, Any]], path: str, q: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
    """What Prometheus answers for `{__name__=~"..."}` at `time`, or over `start`..`end` by `step`."""
    query = q.get("query", [""])[0]
    m = re.fullmatch(r'\{__name__=~"(.*)"\}', query)
    if m is None:
        return 400, {"status": "error", "errorType": "bad_data",
                     "error": f'invalid parameter "query": 1:1: parse error: unexpected {query[:1]!r}'}
    pattern = re.compile(m.group(1))
    chosen = [s for s in held if pattern.fullmatch(s["metric"]["__name__"])]
    if path == "/api/v1/query":
        t = float(q["time"][0])
        result = []
        for s in chosen:
            before = [p for p in s["points"] if p[0] <= t and t - p[0] <= 300]  # the 5-minute lookback
            if before:
                result.append({"metric": s["metric"], "value": [t, fmt(before[-1][1])]})
        return 200, {"status": "success", "data": {"resultType": "vector", "result": result}}
    start, end, step = float(q["start"][0]), float(q["end"][0]), float(q["step"][0])
    result = []
    for s in chosen:
        values = []
        t = start
        while t <= end + 1e-9:
            before = [p for p in s["points"] if p[0] <= t and t - p[0] <= 300]
            if before:
                values.append([round(t, 3), fmt(before[-1][1])])
            t += step
        if values:
            result.append({"metric": s["metric"], "values": values})
    return 200, {"status": "success", "data": {"resultType": "matrix", "result": result}}


@contextmanager
def prometheus(held: list[dict[str, Any]]) -> Iterator[FakeServer]:
    """A loopback Prometheus over `held`; each GET is evaluated as it arrives."""
    with fake_server() as fake:
        original = fake.routes

        class Routes(dict):  # type: ignore[type-arg]
            def get(self, path: str, default: Any = None) -> Any:
                if path not in ("/api/v1/query", "/api/v1/query_range"):
                    return original.get(path, default)
                status, body = evaluate(held, path, fake.queries[-1][1])
                return Answer(status, json.dumps(body).encode(), "application/json")

        fake.routes = Routes()
        yield fake


async def read(url: str, window_s: float = 60.0) -> PrometheusFleet:
    async with httpx.AsyncClient() as http:
        fleet = PrometheusFleet(PrometheusReader(url, http, window_s=window_s, timeout_s=5.0), clock=lambda: NOW)
        await fleet.refresh()
    return fleet


async def test_one_row_per_instance_for_both_engines() -> None:
    held = [*sglang_series("127.0.0.1:30001", [2.4, 2.5, 2.4, 2.5, 2.4]),
            *sglang_series("127.0.0.1:30002", [2.5, 2.4, 2.5, 2.4, 2.5]),
            *sglang_series("127.0.0.1:30003", [1.3, 1.2, 1.3, 1.2, 1.3]),
            *vllm_series("127.0.0.1:8000"), *other_exporter("127.0.0.1:9100")]
    with prometheus(held) as prom:
        fleet = await read(prom.base_url)
        paths = [p for p, _ in prom.queries]
    assert fleet.problem is None
    assert paths == ["/api/v1/query", "/api/v1/query_range"]
    rows = {r.name: r for r in fleet.rows}
    assert set(rows) == {"127.0.0.1:30001", "127.0.0.1:30002", "127.0.0.1:30003", "127.0.0.1:8000"}  # not 9100
    s1, s3, v = rows["127.0.0.1:30001"], rows["127.0.0.1:30003"], rows["127.0.0.1:8000"]
    # the gauge's mean over the window's steps (each scrape held until the next, as Prometheus resamples)
    assert s1.status == "ok" and s1.accept_now == 2.4 and s1.accept_window == pytest.approx(2.445, abs=0.005)
    assert (s1.steps, s1.draft_tokens, s1.running, s1.model) == (3, 4, 4.0, "/models/kimi")
    assert s1.tok_s == pytest.approx(600 / 15)
    assert s3.outlier and not s1.outlier  # the replica well below its siblings on the same model
    assert v.engine == "vllm" and v.accept_window == pytest.approx(1 + 240 / 200)
    assert v.per_position == pytest.approx((0.5, 0.4, 0.3)) and (v.steps, v.topk, v.draft_tokens) == (3, 1, 4)
    assert v.tok_s == pytest.approx(450 / 15)
    assert fleet.entry_for("127.0.0.1:8000") is not None


async def test_an_instance_prometheus_cannot_scrape_is_marked_down() -> None:
    held = [*sglang_series("127.0.0.1:30001", [2.4, 2.5]), *sglang_series("127.0.0.1:30002", [2.4, 2.5], job_up=0.0)]
    with prometheus(held) as prom:
        fleet = await read(prom.base_url)
    rows = {r.name: r for r in fleet.rows}
    assert rows["127.0.0.1:30001"].status == "ok"
    assert rows["127.0.0.1:30002"].status == "down" and "up == 0" in rows["127.0.0.1:30002"].reason


async def test_prometheus_error_answer_is_one_line() -> None:
    with fake_server() as prom:
        prom.set("/api/v1/query", {"status": "error", "errorType": "bad_data",
                                   "error": "invalid parameter \"query\": 1:1: parse error"}, status=400)
        fleet = await read(prom.base_url)
    assert fleet.problem is not None and "bad_data" in fleet.problem and "\n" not in fleet.problem
    assert fleet.rows == []


async def test_prometheus_answering_html_is_one_line() -> None:
    with fake_server() as prom:
        prom.set("/api/v1/query", "<html>login</html>", content_type="text/html")
        fleet = await read(prom.base_url)
    assert fleet.problem is not None and "not JSON" in fleet.problem


def test_cli_prints_the_prometheus_fleet(capsys: pytest.CaptureFixture[str]) -> None:
    now = time.time()
    held = [*sglang_series("127.0.0.1:30001", [2.4, 2.5, 2.4], now=now), *vllm_series("127.0.0.1:8000", now=now)]
    with prometheus(held) as prom:
        code = main(["fleet", "--prometheus", prom.base_url, "--once", "--json", "--settle", "0"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0
    assert {r["name"]: r["engine"] for r in out} == {"127.0.0.1:30001": "sglang", "127.0.0.1:8000": "vllm"}
    assert [r["status"] for r in out] == ["ok", "ok"] and out[1]["per_position"] == pytest.approx([0.5, 0.4, 0.3])


def test_cli_prometheus_error_exits_2_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with fake_server() as prom:
        prom.set("/api/v1/query", {"status": "error", "errorType": "timeout", "error": "query timed out"}, status=503)
        # the console's option given before the subcommand reaches it too
        code = main(["--prometheus", prom.base_url, "fleet", "--once", "--settle", "0"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "timeout: query timed out" in err
