"""The sim SGLang server over real HTTP on loopback, its log read by the project's own parser."""

from __future__ import annotations

import argparse

import httpx
import pytest

from eagle3_tui.sglang.logline import (
    DecodeStats,
    Failure,
    HttpAccess,
    LogReader,
    Other,
    PrefillStats,
    ServerArgs,
    ServerReady,
    parse_line,
)
from eagle3_tui.sim.engine import plan_capture
from eagle3_tui.sim.flags import build_parser, effective_args
from eagle3_tui.sim.logfmt import DecodeStats as SimDecodeStats
from eagle3_tui.sim.logfmt import decode_message, prefill_message
from tests.plugins.world import SPEC_ARGS

PROMPTS = [
    "def dedent(text):\n",
    "class TextWrapper:\n",
    "import re\n\n__all__ = [",
    "    def _split(self, text):",
]


def _events(text: str) -> list[object]:
    reader = LogReader()
    out: list[object] = []
    for line in text.splitlines():
        out += reader.feed(line)
    return out + reader.flush()


def _ns(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(["--model-path", "m", *argv])


def test_speculative_flag_rules() -> None:
    a = effective_args(_ns("--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "1",
                           "--speculative-num-draft-tokens", "16", "--speculative-eagle-topk", "1"), "LlamaForCausalLM")  # fmt: skip
    assert (a.speculative_num_steps, a.speculative_eagle_topk, a.speculative_num_draft_tokens) == (1, 1, 2)
    assert any("adjusted to speculative_num_steps + 1" in w for w in a.warnings)
    auto = effective_args(_ns("--speculative-algorithm", "EAGLE3"), "LlamaForCausalLM")
    assert (auto.speculative_num_steps, auto.speculative_eagle_topk, auto.speculative_num_draft_tokens) == (
        5,
        4,
        8,
    )
    assert auto.max_running_requests == 48
    with pytest.raises(AssertionError):
        effective_args(
            _ns("--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "1"), "LlamaForCausalLM"
        )
    plain = effective_args(_ns(), "LlamaForCausalLM")
    assert plain.speculative_algorithm is None and plain.warnings == []


def test_layer_id_capture_rules() -> None:
    n = 12
    assert plan_capture({}, n, embed_patch=False).boundaries == (2, 6, 9)
    # SGLang reads only the nested key; a top-level (vLLM-style) key falls back to the default
    assert plan_capture({"eagle_aux_hidden_state_layer_ids": [-1, 1, 5]}, n, embed_patch=True).boundaries == (
        2,
        6,
        9,
    )
    nested = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [5, 1, -1]}}
    assert plan_capture(nested, n, embed_patch=True).boundaries == (0, 2, 6)
    assert plan_capture(
        {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 6, 9]}}, n, embed_patch=False
    ).boundaries == (3, 7, 10)
    # an id whose boundary is N is never captured
    assert plan_capture(
        {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 5, 11]}}, n, embed_patch=False
    ).boundaries == (2, 6)


@pytest.mark.parametrize("style", ["0.5.6", "0.4.6", "0.4.1-tp0"])
def test_log_styles_parse(style: str) -> None:
    from eagle3_tui.sim.logfmt import LogWriter

    class Sink:
        text = ""

        def write(self, s: str) -> None:
            Sink.text += s

        def flush(self) -> None:
            pass

    w = LogWriter(Sink(), style=style)  # type: ignore[arg-type]
    w.write(decode_message(SimDecodeStats(3, 412, 0.01, 2.5, 0.62, 123.45, 1), style), scheduler=True)
    w.write(prefill_message(2, 50, 0, 0.0, 1, 0, style), scheduler=True)
    decode, prefill = (parse_line(line) for line in Sink.text.splitlines())
    assert isinstance(decode, DecodeStats) and isinstance(prefill, PrefillStats)
    assert decode.accept_len == 2.5 and decode.running_req == 3 and decode.gen_throughput == 123.45
    assert decode.queue_req == 1
    assert decode.accept_rate == (0.62 if style == "0.5.6" else None)
    assert decode.ranks == ({"TP": 0} if style == "0.4.1-tp0" else {})
    assert prefill.new_seq == 2 and prefill.new_token == 50


def test_the_sim_writes_logsynths_lines() -> None:
    """One SGLang log writer: the sim's lines are logsynth's, with what a CPU server prints."""
    from eagle3_tui.sglang.logsynth import decode_line, prefill_line

    stats = SimDecodeStats(3, 412, 0.01, 2.5, 0.62, 123.45, 1)
    kw = {"running": 3, "used": 412, "usage": 0.01, "accept_len": 2.5, "num_draft_tokens": 4, "tps": 123.45, "queue": 1}
    sim = decode_message(stats, "0.5.6")
    assert sim == decode_line("0.5.6", **kw, accept_rate=0.62, device="cpu", graph=False)
    assert "cpu graph: False" in sim and sim.endswith(", ")
    assert "cuda graph: True" in decode_line("0.5.6", **kw)  # logsynth's default: a GPU server
    assert decode_message(stats, "0.4.6") == decode_line("0.4.6", **kw, graph=False)
    assert decode_message(stats, "0.4.1-tp0") == decode_line("0.4.1", **kw)
    assert "graph" not in decode_line("0.4.1", **kw) and "accept rate" not in decode_line("0.4.1", **kw)
    pf = {"new_seq": 2, "new_token": 50, "cached": 0, "usage": 0.0, "running": 1, "queue": 0}
    assert prefill_message(2, 50, 0, 0.0, 1, 0, "0.4.6") == prefill_line(**pf, style="0.4.6")
    assert prefill_line(**pf, style="0.4.6").startswith("Prefill batch. ")
    assert prefill_message(2, 50, 0, 0.0, 1, 0, "0.5.6") == prefill_line(**pf)


def test_server_http_api_and_clean_stop(sim_server) -> None:
    srv = sim_server("--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "1",
                     "--speculative-num-draft-tokens", "16", "--speculative-eagle-topk", "1",
                     "--decode-log-interval", "1", "--enable-metrics")  # fmt: skip
    with httpx.Client(base_url=srv.base_url, timeout=30) as c:
        assert c.get("/health").status_code == 200
        info = c.get("/server_info").json()
        assert info["speculative_num_draft_tokens"] == 2 and info["speculative_num_steps"] == 1
        assert info["speculative_algorithm"] == "EAGLE3" and info["version"] == "0.5.6"
        assert c.get("/get_server_info").json()["speculative_eagle_topk"] == 1
        # --dtype auto on the world's float32 configs: float16, as SGLang resolves it
        assert info["dtype"] == "auto" and "type=LlamaForCausalLM, dtype=torch.float16," in srv.log_text()
        assert c.get("/model_info").json()["architectures"] == ["LlamaForCausalLM"]
        assert c.get("/get_model_info").status_code == 200
        assert c.get("/v1/models").json()["data"][0]["id"]
        r = c.post(
            "/generate",
            json={"text": PROMPTS[0], "sampling_params": {"max_new_tokens": 24, "temperature": 0}},
        )
        body = r.json()
        meta = body["meta_info"]
        assert r.status_code == 200 and meta["completion_tokens"] == 24 and len(body["output_ids"]) == 24
        assert meta["spec_verify_ct"] >= 12  # at most 2 tokens per verify with 1 step
        assert meta["spec_accept_length"] == pytest.approx(24 / meta["spec_verify_ct"])
        assert meta["spec_draft_token_num"] == meta["spec_verify_ct"]
        pair = c.post(
            "/generate", json={"text": PROMPTS[:2], "sampling_params": {"max_new_tokens": 5}}
        ).json()
        assert [len(o["output_ids"]) for o in pair] == [5, 5]
        assert c.post("/generate", json={"input_ids": {"a": 1}}).status_code == 400
        comp = c.post("/v1/completions", json={"model": "m", "prompt": PROMPTS[1], "max_tokens": 8}).json()
        assert comp["usage"]["completion_tokens"] == 8 and comp["choices"][0]["text"]
        info = c.get("/server_info").json()
        assert info["internal_states"][0]["avg_spec_accept_length"] >= 1.0
        metrics = c.get("/metrics").text
        assert "sglang:spec_accept_length{" in metrics and "sglang:gen_throughput{" in metrics
        assert c.post("/flush_cache").status_code == 200
        assert "avg_spec_accept_length" not in c.get("/server_info").json()["internal_states"][0]
        # bad requests get SGLang-like errors
        bad = c.post("/generate", content=b"{not json", headers={"content-type": "application/json"})
        assert bad.status_code == 400 and "error" in bad.json()
        assert c.post("/generate", json={"sampling_params": {}}).status_code == 400
        assert c.post("/generate", json={"input_ids": [99999]}).status_code == 400
        assert c.post("/v1/completions", json={}).json()["object"] == "error"
        assert c.get("/nope").status_code == 404
        assert c.get("/generate").status_code == 405
    assert srv.stop() == 0
    events = _events(srv.log_text())
    assert any(isinstance(e, ServerReady) for e in events)
    args = [e for e in events if isinstance(e, ServerArgs)]
    assert args and args[0].get_int("speculative_num_draft_tokens") == 2
    assert args[0].get_str("speculative_algorithm") == "EAGLE3"
    assert any(isinstance(e, HttpAccess) and e.path == "/generate" and e.status == 200 for e in events)
    assert any("adjusted to speculative_num_steps + 1" in getattr(e, "line", "") for e in events)
    decodes = [e for e in events if isinstance(e, DecodeStats)]
    assert decodes and all(1.0 <= (d.accept_len or 0) <= 2.0 for d in decodes)
    assert not any(isinstance(e, Failure) for e in events)
    assert "Shutting down" in srv.log_text()


def test_embed_layer_id_without_patch_fails_like_sglang(sim_server) -> None:
    srv = sim_server(layer_ids=[-1, 1, 5], wait_ready=False)
    assert srv.proc.returncode not in (None, 0)
    failures = [e for e in _events(srv.log_text()) if isinstance(e, Failure)]
    assert failures and failures[0].kind == "scheduler-exception"
    assert "TypeError" in failures[0].last_line and "NoneType" in failures[0].last_line


def _serve_prompts(srv, n_tokens: int = 40) -> tuple[float, list[dict]]:
    metas = []
    with httpx.Client(base_url=srv.base_url, timeout=60) as c:
        for p in PROMPTS:
            metas.append(
                c.post("/generate", json={"text": p, "sampling_params": {"max_new_tokens": n_tokens}}).json()[
                    "meta_info"
                ]
            )
    tokens = sum(m["completion_tokens"] for m in metas)
    verifies = sum(m["spec_verify_ct"] for m in metas)
    return tokens / verifies, metas


@pytest.mark.slow
def test_trained_wiring_accepts_more_than_default_and_log_matches_meta(sim_server) -> None:
    default = sim_server("--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
                         "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
                         "--decode-log-interval", "1")  # fmt: skip
    default_len, default_meta = _serve_prompts(default)
    ready_at = default.log_text().index("ready to roll")
    default.stop()
    fixed = sim_server("--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
                       "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
                       "--sim-embed-capture-patch", layer_ids=[-1, 1, 5])  # fmt: skip
    fixed_len, _ = _serve_prompts(fixed)
    fixed.stop()
    assert fixed_len >= default_len + 0.3, (fixed_len, default_len)
    assert "boundaries [0, 2, 6]" in fixed.log_text() and "boundaries [2, 6, 9]" in default.log_text()
    # one request at a time with decode-log-interval 1: each Decode line is one verify step, so the
    # log's accept lengths add up to what /generate reported (accepted drafts + one bonus per verify)
    decodes = [e for e in _events(default.log_text()[ready_at:]) if isinstance(e, DecodeStats)]
    verify_ct = sum(m["spec_verify_ct"] for m in default_meta)
    accepted = sum(m["spec_accept_token_num"] for m in default_meta)
    assert len(decodes) == verify_ct
    assert sum(d.accept_len for d in decodes) == pytest.approx(verify_ct + accepted)


def test_background_load_keeps_requests_running(sim_server) -> None:
    srv = sim_server("--sim-background-load", "3", "--decode-log-interval", "2", "--sim-log-style", "0.4.6")
    assert srv.wait_for("#running-req: 3,", timeout=60), srv.log_text()[-2000:]
    with httpx.Client(base_url=srv.base_url, timeout=30) as c:
        info = c.get("/server_info").json()
        assert info["speculative_algorithm"] is None and info["internal_states"][0]["last_gen_throughput"] > 0
        # with requests running the cache is not flushed, as SGLang refuses
        assert c.post("/flush_cache").status_code == 400
    assert srv.stop() == 0
    decodes = [e for e in _events(srv.log_text()) if isinstance(e, DecodeStats)]
    assert any(d.running_req == 3 for d in decodes)
    assert all(
        d.accept_len is None and "Decode batch. " in d.line for d in decodes
    )  # plain decoding, old style
    assert "Cache not flushed because there are pending requests" in srv.log_text()


def test_the_demo_server_dies_with_its_console(sim_server) -> None:
    """`--sim-exit-with-pid` (the demo profile passes the console's pid): a console that was SIGKILLed
    cannot stop its server, so the server shuts itself down once that process is gone."""
    import signal
    import subprocess
    import time

    console = subprocess.Popen(["sleep", "600"])
    srv = sim_server(*SPEC_ARGS, "--sim-background-load", "1", "--sim-exit-with-pid", str(console.pid))
    time.sleep(1.5)
    assert srv.proc.poll() is None  # the console lives: so does its server
    console.send_signal(signal.SIGKILL)
    console.wait()
    assert srv.proc.wait(timeout=30) == 0
    assert "is gone: shutting down" in srv.log_text() and "Shutting down" in srv.log_text()


def test_a_server_stuck_in_loading_still_dies_with_its_console(tmp_path) -> None:
    """The watcher's SIGTERM can only act when the main thread runs Python; one stuck in a long C call
    (here: SIGTERM ignored, the main thread asleep) is left behind after the grace: the process exits."""
    import subprocess
    import sys

    gone = subprocess.Popen(["true"])
    gone.wait()
    code = (
        "import signal, sys, time\n"
        "from eagle3_tui.sim.logfmt import LogWriter\n"
        "from eagle3_tui.sim.server import _exit_with\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"_exit_with({gone.pid}, LogWriter(sys.stderr), poll_s=0.1, grace_s=0.5)\n"
        "time.sleep(120)\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    assert "is gone: shutting down" in run.stderr and "exiting at once" in run.stderr


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_log_requests_writes_each_finished_request_as_sglang_does(sim_server, fmt) -> None:
    """`--log-requests` (level 0: no text): a finish line per request with its meta_info, in the text or JSON
    form the product reads; each line's accept length is the one its /generate answer gave."""
    from eagle3_tui.sglang.requests import finished_accept_lengths

    srv = sim_server(*SPEC_ARGS, "--log-requests", "--log-requests-level", "0", "--log-requests-format", fmt)
    with httpx.Client(base_url=srv.base_url, timeout=60) as c:
        answers = [c.post("/generate", json={"text": p, "sampling_params": {"max_new_tokens": 24}}).json()
                   for p in PROMPTS[:2]]
        info = c.get("/server_info").json()
    assert (info["log_requests"], info["log_requests_level"], info["log_requests_format"]) == (True, 0, fmt)
    finish = [ln for ln in srv.log_text().splitlines() if "Finish" in ln or "request.finished" in ln]
    logged = [a for ln in finish for a in finished_accept_lengths(ln)]
    assert logged[-2:] == pytest.approx([a["meta_info"]["spec_accept_length"] for a in answers])
    assert not any(a["text"] and a["text"] in "\n".join(finish) for a in answers)  # level 0 keeps no text
    assert isinstance(parse_line(finish[-1]), Other)  # to the log reader, a line of user data
