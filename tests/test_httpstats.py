"""Charts from HTTP when the server's output is not a file: /metrics read with prometheus_client's parser
(SGLang's own names and labels), /server_info as the fallback, a garbage or failing /metrics said once
while polling goes on; against the real sim with its output to a pipe; `watch --no-ui` marks such lines.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from eagle3_tui.errors import UserError
from eagle3_tui.session.events import HttpSample, Notice, ServerView, StatsUpdated
from eagle3_tui.session.host.deployment import Deployment
from eagle3_tui.session.live.httpstats import (
    HttpCharts,
    HttpReading,
    NoLog,
    is_new,
    no_log,
    reading_from_metrics,
    reading_from_server_info,
)
from eagle3_tui.session.views import Views
from eagle3_tui.sglang.client import parse_prometheus
from eagle3_tui.sglang.promtext import MetricsUnreadable, read_samples
from eagle3_tui.telemetry.metrics import Telemetry
from tests.plugins.world import SPEC_ARGS, free_port

# The shape SGLang 0.5.6 serves with --enable-metrics --dp-size 2 (collector.py names, the labels of
# scheduler_metrics_mixin.py; the histogram and counter families come from the tokenizer manager).
LABELS = 'model_name="Qwen/Qwen3-8B",engine_type="unified",tp_rank="0",pp_rank="0"'
REAL = f"""# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{{{LABELS},dp_rank="0"}} 3.0
sglang:num_running_reqs{{{LABELS},dp_rank="1"}} 2.0
# HELP sglang:gen_throughput The generation throughput (token/s).
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{{{LABELS},dp_rank="0"}} 300.0
sglang:gen_throughput{{{LABELS},dp_rank="1"}} 100.0
# HELP sglang:spec_accept_length The average acceptance length of speculative decoding.
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{{{LABELS},dp_rank="0"}} 3.0
sglang:spec_accept_length{{{LABELS},dp_rank="1"}} 2.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{{{LABELS},dp_rank="0"}} 0.25
sglang:token_usage{{{LABELS},dp_rank="1"}} 0.75
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{{model_name="Qwen/Qwen3-8B"}} 12345.0
# HELP sglang:e2e_request_latency_seconds Histogram of End-to-end request latency in seconds
# TYPE sglang:e2e_request_latency_seconds histogram
sglang:e2e_request_latency_seconds_bucket{{le="0.1",model_name="Qwen/Qwen3-8B"}} 0.0
sglang:e2e_request_latency_seconds_bucket{{le="+Inf",model_name="Qwen/Qwen3-8B"}} 7.0
sglang:e2e_request_latency_seconds_count{{model_name="Qwen/Qwen3-8B"}} 7.0
sglang:e2e_request_latency_seconds_sum{{model_name="Qwen/Qwen3-8B"}} 9.5
"""


def test_real_sglang_metrics_text_is_the_whole_servers_numbers() -> None:
    r = reading_from_metrics(REAL)
    assert r.source == "/metrics" and r.gen_tps == 400.0  # DP ranks add up
    assert r.accept_len == pytest.approx(2.75)  # weighted by each rank's throughput, as the log's lines
    assert (r.running, r.token_usage, r.accept_rate, r.queue) == (5, 0.5, None, None)  # missing families: None
    no_dp = REAL.replace(',dp_rank="1"', ',moe_ep_rank="1"').replace(',dp_rank="0"', "")
    assert reading_from_metrics(no_dp).gen_tps == 200.0  # one rank, label sets averaged (TP ranks)


def test_nan_missing_families_and_garbage() -> None:
    line = f'sglang:spec_accept_length{{{LABELS},dp_rank="0"}} '
    nan = REAL.replace(line + "3.0", line + "NaN")
    assert math.isclose(reading_from_metrics(nan).accept_len or 0, 2.0)  # the NaN rank is left out
    assert reading_from_metrics("# nothing here\n").empty
    zero = reading_from_metrics(f"sglang:spec_accept_length{{{LABELS}}} 0.0\nsglang:gen_throughput{{{LABELS}}} 9\n")
    assert (zero.accept_len, zero.gen_tps) == (None, 9.0)  # 0 before the first verify: no measurement
    for garbage in ("<html><body>502 Bad Gateway</body></html>", "sglang:gen_throughput{x=1} 3\n", "\x00\xff"):
        with pytest.raises(MetricsUnreadable) as err:
            read_samples(garbage)
        assert "not Prometheus text" in str(err.value) and "\n" not in str(err.value)
    lenient = parse_prometheus(REAL + "garbage line here\n")  # the client's lenient reader skips a bad line
    assert lenient.total("sglang:gen_throughput") == 400.0


def test_server_info_reading_and_when_a_point_is_new() -> None:
    info = {"internal_states": [{"avg_spec_accept_length": 2.0, "last_gen_throughput": 100.0},
                                {"avg_spec_accept_length": 3.0, "last_gen_throughput": 300.0}]}
    r = reading_from_server_info(info)
    assert (r.source, r.accept_len, r.gen_tps) == ("/server_info", 2.75, 400.0)
    assert reading_from_server_info({"avg_spec_accept_length": 1.5}).accept_len == 1.5
    assert reading_from_server_info({}).empty
    assert is_new(None, r) and not is_new(r, r) and is_new(r, dataclasses.replace(r, gen_tps=1.0))
    assert is_new(r, dataclasses.replace(r, running=2))  # busy: a point even when the gauges held still
    assert not is_new(None, HttpReading("/metrics"))
    ev = r.as_decode(10.0)
    assert (ev.timestamp, ev.accept_len, ev.gen_throughput, ev.line) == (10.0, 2.75, 400.0, "(from /server_info)")


def test_which_servers_are_charted_from_http() -> None:
    assert no_log(Deployment("pane", terminal="tmux"), None) == NoLog("tmux pane", True)
    assert no_log(Deployment("pipe"), None) == NoLog("output into a pipe", True)
    assert no_log(Deployment("process"), None) == NoLog("its output is not a file", False)  # e.g. /dev/null
    assert no_log(Deployment("process"), "/var/log/sglang.log") is None
    assert no_log(Deployment("systemd", unit="sglang", source="journalctl -u sglang"), None) is None


class FakeClient:
    def __init__(self, answers: list[tuple[int, str] | Exception]) -> None:
        self.answers = answers
        self.asked = 0

    async def metrics_text(self) -> tuple[int, str]:
        self.asked += 1
        a = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(a, Exception):
            raise a
        return a


INFO = {"internal_states": [{"avg_spec_accept_length": 1.8, "last_gen_throughput": 50.0}]}


def _charts() -> tuple[HttpCharts, Views, Telemetry, list[object]]:
    from eagle3_tui.session.events import ConnView

    views, tel = Views(ConnView("local"), ServerView(state="ready", deployment="tmux pane")), Telemetry()
    heard: list[object] = []
    views.add_listener(heard.append)
    clock = iter(range(100, 200))
    return HttpCharts(views, tel, clock=lambda: float(next(clock))), views, tel, heard


async def test_a_failing_or_garbage_metrics_is_said_once_and_polling_goes_on() -> None:
    from eagle3_tui.ui import viewmodel as vm

    charts, views, tel, heard = _charts()
    why = NoLog("tmux pane", True)
    client = FakeClient([(500, "Internal Server Error"), (500, "Internal Server Error"), (200, "<html>oops</html>"),
                         UserError("cannot reach the server"), (200, REAL)])
    for _ in range(5):
        await charts.poll(client, INFO, why)  # type: ignore[arg-type]
    warnings = [e.message for e in heard if isinstance(e, Notice)]
    assert warnings[0] == "/metrics answered HTTP 500; charts from /server_info, still polling"
    assert len(warnings) == 3 and "not Prometheus text" in warnings[1] and "cannot reach" in warnings[2]
    assert [p for _, p in tel.series["gen_tps"]] == [50.0, 400.0]  # /server_info once (then unchanged), /metrics
    assert views.server.charts_from == "/metrics" and views.server.charts_note is None
    assert vm.charts_text(views.server) == ("charts from /metrics (no log file: tmux pane); "
                                           "R restarts it into a log file")
    assert sum(isinstance(e, HttpSample) for e in heard) == 2 and any(isinstance(e, StatsUpdated) for e in heard)
    await charts.poll(FakeClient([(500, "x")]), INFO, why)  # type: ignore[arg-type]
    assert vm.charts_text(views.server) == ("charts from /server_info (no log file: tmux pane); /metrics answered "
                                           "HTTP 500; R restarts it into a log file")
    assert "$warning" in " ".join(vm.status_parts(_snap(views, tel), now=0.0).bottom)


async def test_a_server_without_metrics_is_asked_once_then_charted_from_server_info() -> None:
    charts, views, tel, heard = _charts()
    client = FakeClient([(404, "Not Found")])
    for info in (INFO, INFO, {"internal_states": [{"avg_spec_accept_length": 1.9, "last_gen_throughput": 60.0}]}):
        await charts.poll(client, info, NoLog("output into a pipe", False))  # type: ignore[arg-type]
    assert client.asked == 1 and not any(isinstance(e, Notice) for e in heard)
    assert [p for _, p in tel.series["accept_len"]] == [1.8, 1.9]
    charts.reset()
    assert views.server.charts_from is None


def _snap(views: Views, tel: Telemetry) -> Any:
    from eagle3_tui.ui import viewmodel as vm

    return vm.Snapshot(host="h", conn=views.conn, server=views.server, telemetry=tel)


# ---------------------------------------------------------------- the real sim, its output into a pipe


@pytest.fixture(scope="module")
def piped_sim(demo_world: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A sim server with --enable-metrics and load whose stdout and stderr go into a pipe we drain."""
    port = free_port()
    argv = [sys.executable, "-m", "eagle3_tui.sim.server", "--model-path", str(demo_world.target_dir),
            "--speculative-draft-model-path", str(demo_world.draft_dir), *SPEC_ARGS, "--enable-metrics",
            "--sim-background-load", "1", "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    out: list[bytes] = []
    threading.Thread(target=lambda: out.extend(iter(lambda: proc.stdout.read(4096), b"")),  # type: ignore[union-attr]
                     daemon=True).start()
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, b"".join(out)[-2000:]
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        yield {"port": port, "tmp": tmp_path_factory.mktemp("piped")}
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(15)


async def test_a_piped_server_is_charted_from_metrics(piped_sim: dict[str, Any],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import eagle3_tui.session.live.monitor as monitor
    from eagle3_tui.profile import Profile
    from eagle3_tui.session import Session
    from eagle3_tui.ui import viewmodel as vm

    monkeypatch.setattr(monitor, "POLL_INTERVAL_S", 0.2)
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(piped_sim["tmp"] / "data"))
    prof = Profile(name="localhost", local=True, port=piped_sim["port"], state_dir=str(piped_sim["tmp"] / "state"))
    async with Session(prof) as session:
        assert session.deployment.kind == "pipe" and session.server.log_path is None
        heard: list[HttpSample] = []
        session.add_listener(lambda e: heard.append(e) if isinstance(e, HttpSample) else None)
        deadline = time.monotonic() + 20
        while (len(heard) < 2 or session.telemetry.summary().accept_len is None) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)  # the gauge is 0 (no point's accept length) until the first verify
        assert len(heard) >= 2 and {e.source for e in heard} == {"/metrics"}
        summary = session.telemetry.summary()
        assert summary.accept_len is not None and 1.0 <= summary.accept_len <= 4.0  # 3 steps: at most 4
        assert summary.gen_tps is not None and summary.gen_tps > 0
        text = vm.charts_text(session.server)
        assert text == "charts from /metrics (no log file: output into a pipe); R restarts it into a log file"
        assert any(text in seg for seg in vm.status_parts(vm.snapshot_of(session), now=time.time()).bottom)


def test_watch_no_ui_prints_http_lines_for_a_piped_server(piped_sim: dict[str, Any]) -> None:
    tmp: Path = piped_sim["tmp"]
    prof = tmp / "hosts.toml"
    prof.write_text(f'[here]\nlocal = true\nport = {piped_sim["port"]}\nstate_dir = "{tmp}/state-watch"\n')
    env = {**os.environ, "EAGLE3_TUI_DATA_DIR": str(tmp / "data-watch")}
    r = subprocess.run([sys.executable, "-m", "eagle3_tui", "watch", "--no-ui", "--count", "1", "--duration", "30",
                        "--host", "here", "--profile", str(prof)], capture_output=True, text=True, env=env, timeout=90)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("server: ready") and lines[1].startswith("no log file (output into a pipe)")
    assert "accept len" in lines[2] and "tok/s" in lines[2] and lines[2].endswith("(from /metrics)"), lines


@pytest.mark.parametrize(("version", "ep_label"), [("0.5.6", False), ("0.5.23", True)])
def test_the_sims_metrics_are_sglangs_names_and_labels(version: str, ep_label: bool) -> None:
    """The sim's /metrics route, called on a stand-in scheduler, reads as SGLang's does (httpstats)."""
    from types import SimpleNamespace

    from eagle3_tui.sim.routes import _Handler

    sent: list[str] = []
    sched = SimpleNamespace(running=[1, 2], waiting=SimpleNamespace(qsize=lambda: 1), _num_tokens=lambda: 10,
                            last_gen_throughput=123.0, last_accept_len=2.5, last_accept_rate=0.5,
                            prompt_tokens_total=7, generation_tokens_total=9, num_requests_total=2)
    args = SimpleNamespace(served_model_name="m", speculative_algorithm="EAGLE3", sglang_version=version)
    fake = SimpleNamespace(sim=SimpleNamespace(scheduler=sched, args=args),
                           _send=lambda status, body, content_type="": sent.append(body))
    _Handler.metrics(fake)  # type: ignore[arg-type]
    samples = read_samples(sent[0])
    gen = next(s for s in samples if s.name == "sglang:gen_throughput")
    assert ("moe_ep_rank" in gen.labels) == ep_label and gen.labels["tp_rank"] == "0"
    r = reading_from_metrics(sent[0])
    assert (r.accept_len, r.gen_tps, r.running, r.queue, r.accept_rate) == (2.5, 123.0, 2, 1, 0.5)
