"""The SGLang HTTP client against a real (tiny, stdlib) HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from eagle3_tui.errors import UserError
from eagle3_tui.sglang.client import (
    ServerUnavailable,
    SGLangClient,
    Unauthorized,
    aggregate_ranks,
    base_url,
    load_prompts,
    parse_prometheus,
    percentile,
    rank_stats,
    run_benchmark,
    server_accept_length,
)

PROM = """# HELP sglang:spec_accept_length The average acceptance length.
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{model_name="m",tp_rank="0"} 2.5
sglang:spec_accept_length{model_name="m",tp_rank="1"} 3.5
sglang:gen_throughput{model_name="a,b\\"c"} 41.0 1700000000
garbage line here
sglang:num_requests_total 12
"""


class FakeSGLang(BaseHTTPRequestHandler):
    """Old-style server: only /get_server_info; spec fields on /generate; counts calls."""

    calls: list[str]

    def log_message(self, *a):  # keep test output clean
        pass

    def _send(self, code, body, ctype="application/json"):
        data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        self.server.calls.append("GET " + self.path)
        if self.path == "/health":
            self._send(200, "")
        elif self.path == "/get_server_info":
            self._send(200, {"decode": [{"speculative_num_steps": 3,
                                         "internal_states": [{"avg_spec_accept_length": 2.75}]}]})
        elif self.path == "/metrics":
            self._send(200, PROM, "text/plain")
        else:
            self._send(404, {"detail": "Not Found"})

    def do_POST(self):
        self.server.calls.append("POST " + self.path)
        n = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(n) or b"{}")
        if self.path == "/generate":
            if body.get("text") == "fail":
                self._send(500, "boom", "text/plain")
                return
            m = body["sampling_params"]["max_new_tokens"]
            self._send(200, {"text": "x" * m, "meta_info": {"completion_tokens": m, "spec_verify_ct": m // 2,
                                                           "e2e_latency": 0.01 * len(body["text"])}})
        elif self.path == "/flush_cache":
            self._send(200, "Cache flushed.", "text/plain")
        else:
            self._send(404, {"detail": "Not Found"})


@pytest.fixture
def fake_server():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), FakeSGLang)
    srv.calls = []
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def url(srv) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}"


def test_parse_prometheus_labels_escapes_and_mean():
    m = parse_prometheus(PROM)
    assert m.get("sglang:spec_accept_length") == 3.0
    s = next(x for x in m.samples if x.name == "sglang:gen_throughput")
    assert s.labels == {"model_name": 'a,b"c'} and s.value == 41.0
    assert m.get("sglang:num_requests_total") == 12
    assert m.get("missing") is None and len(m.samples) == 4


def test_server_accept_length_new_and_old_layouts():
    assert server_accept_length({"internal_states": [{"avg_spec_accept_length": 1.5}]}) == 1.5
    assert server_accept_length({"avg_spec_accept_length": 2}) == 2.0
    assert server_accept_length({"internal_states": [{}]}) is None


def test_percentile_matches_linear_interpolation():
    assert percentile([], 50) is None
    assert percentile([3.0], 90) == 3.0
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile([10, 0, 5], 90) == pytest.approx(9.0)


def test_load_prompts_formats():
    assert load_prompts("a\n\nb\n") == ["a", "b"]
    assert load_prompts('{"prompt": "x"}\n{"text": "y"}\n') == ["x", "y"]
    assert load_prompts('["p", {"text": "q"}]') == ["p", "q"]
    with pytest.raises(UserError, match="empty"):
        load_prompts("  ")
    with pytest.raises(UserError, match="line 2"):
        load_prompts('{"prompt": "x"}\n{bad\n')


async def test_server_info_falls_back_and_unwraps(fake_server):
    async with SGLangClient(url(fake_server)) as c:
        info = await c.server_info()
        assert info["speculative_num_steps"] == 3
        await c.server_info()
    # the fallback is remembered: /server_info asked once only
    assert fake_server.calls.count("GET /server_info") == 1
    assert fake_server.calls.count("GET /get_server_info") == 2


async def test_health_generate_metrics_flush(fake_server):
    async with SGLangClient(url(fake_server)) as c:
        assert await c.health()
        r = await c.generate("hello", max_new_tokens=8)
        assert r.completion_tokens == 8 and r.spec_verify_ct == 4 and r.spec_accept_length == 2.0
        assert (await c.metrics()).get("sglang:spec_accept_length") == 3.0
        assert await c.flush_cache()
        with pytest.raises(ServerUnavailable, match="HTTP 500"):
            await c.generate("fail")


async def test_unreachable_server_is_clear(unused_tcp_port):
    async with SGLangClient(f"http://127.0.0.1:{unused_tcp_port}", timeout=2) as c:
        assert not await c.health()
        with pytest.raises(ServerUnavailable, match="cannot reach"):
            await c.server_info()


async def test_benchmark_counts_tokens_latency_and_failures(fake_server):
    progress = []
    async with SGLangClient(url(fake_server)) as c:
        res = await run_benchmark(c, ["a", "bb", "fail", "dddd"], num_prompts=6, concurrency=3,
                                  max_tokens=10, on_progress=lambda d, t: progress.append((d, t)))
    # prompts cycle: a, bb, fail, dddd, a, bb -> one failure
    assert res.ok == 5 and res.errors == 1 and res.num_prompts == 6
    assert res.output_tokens == 50 and res.spec_verify_ct == 25
    assert res.accept_len_client == 2.0 and res.accept_len_server == 2.75
    assert res.latency_p50_s == pytest.approx(0.02)
    assert res.output_tps > 0 and progress[-1] == (6, 6)
    assert "POST /flush_cache" in fake_server.calls
    assert res.as_dict()["accept_len"] == 2.0


async def test_benchmark_all_failed_raises(fake_server):
    async with SGLangClient(url(fake_server)) as c:
        with pytest.raises(ServerUnavailable, match="every benchmark request failed"):
            await run_benchmark(c, ["fail"], num_prompts=2, concurrency=1, max_tokens=4, flush=False)


# --- --api-key, TLS, several DP ranks ------------------------------------------------------------------


class KeyedSGLang(FakeSGLang):
    """As SGLang with --api-key: 401 everywhere but /health and /metrics without `Authorization: Bearer`."""

    def _authorised(self) -> bool:
        if self.path in ("/health", "/metrics"):
            return True
        if self.headers.get("Authorization") == "Bearer sekret":
            return True
        self._send(401, {"error": "Unauthorized"})
        return False

    def do_GET(self):
        if self._authorised():
            super().do_GET()

    def do_POST(self):
        if self._authorised():
            super().do_POST()


def _serve(handler, *, tls_dir=None):
    srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.calls = []
    if tls_dir is not None:
        import ssl

        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(tls_dir / "cert.pem", tls_dir / "key.pem")
        srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv


async def test_api_key_is_sent_as_a_bearer_token():
    srv = _serve(KeyedSGLang)
    try:
        async with SGLangClient(url(srv)) as anonymous:
            assert await anonymous.health()
            with pytest.raises(Unauthorized, match="--api-key"):
                await anonymous.server_info()
        async with SGLangClient(url(srv), api_key="sekret") as keyed:
            assert (await keyed.server_info())["speculative_num_steps"] == 3
            result = await run_benchmark(keyed, ["hello there"], num_prompts=2, concurrency=1, max_tokens=8)
            assert result.ok == 2 and result.errors == 0
    finally:
        srv.shutdown()
        srv.server_close()


@pytest.fixture
def self_signed(tmp_path):
    import subprocess

    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-keyout", str(tmp_path / "key.pem"), "-out", str(tmp_path / "cert.pem")],
                   check=True, capture_output=True, timeout=60)
    return tmp_path


async def test_tls_server_with_verification_off_only_when_asked(self_signed):
    srv = _serve(FakeSGLang, tls_dir=self_signed)
    port = srv.server_address[1]
    try:
        assert base_url("127.0.0.1", port, tls=True) == f"https://127.0.0.1:{port}"
        async with SGLangClient(base_url("127.0.0.1", port, tls=True)) as strict:
            with pytest.raises(ServerUnavailable):
                await strict.server_info()
        async with SGLangClient(base_url("127.0.0.1", port, tls=True), verify=False) as lax:
            assert (await lax.server_info())["speculative_num_steps"] == 3
    finally:
        srv.shutdown()
        srv.server_close()


def test_dp_ranks_add_throughput_and_weight_accept_length():
    info = {"internal_states": [{"avg_spec_accept_length": 2.0, "last_gen_throughput": 100.0},
                                {"avg_spec_accept_length": 3.0, "last_gen_throughput": 300.0}]}
    assert rank_stats(info) == [(2.0, 100.0), (3.0, 300.0)]
    assert aggregate_ranks(rank_stats(info)) == (2.75, 400.0)
    assert server_accept_length(info) == 2.75
    assert aggregate_ranks([(2.0, None), (3.0, None)]) == (2.5, None)
    assert parse_prometheus(PROM).total("sglang:spec_accept_length") == 6.0
    assert base_url("::1", 30000) == "http://[::1]:30000"
