"""SGLANG_LOG_FORWARD_ITERS in the sim, as real SGLang 0.5.23 prints it: every 0.5 batch line carries the
forward counter (`Decode batch [N], ...`, `Prefill batch [N], ...`), which the log parser reads; a value
SGLang's EnvBool refuses stops the sim with one line. (Held to real SGLang in
tests/test_real_sglang_conformance.py.)"""

from __future__ import annotations

import re

import httpx
import pytest

from eagle3_tui.sglang.logline import DecodeStats, parse_line
from eagle3_tui.sim.logfmt import FORWARD_ITERS_ENV, LogWriter, env_bool


def test_env_bool_is_sglangs():
    assert [env_bool(v) for v in (None, "1", "true", "Y", "0", "no")] == [False, True, True, True, False, False]
    with pytest.raises(ValueError, match='"maybe" is not a valid boolean value'):
        env_bool("maybe")
    on, off = LogWriter(forward_iters=True), LogWriter()
    line = "Decode batch, #running-req: 1, "
    assert on.iterated(line, 7) == "Decode batch [7], #running-req: 1, " and off.iterated(line, 7) == line
    assert on.iterated("Decode batch. #running-req: 1", 7) == "Decode batch. #running-req: 1"  # 0.4 lines: never


def test_the_sim_prints_the_forward_counter(sim_server, monkeypatch):
    monkeypatch.setenv(FORWARD_ITERS_ENV, "1")
    srv = sim_server("--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3", "--speculative-eagle-topk",
                     "1", "--speculative-num-draft-tokens", "4", "--decode-log-interval", "2")
    httpx.post(srv.base_url + "/generate", timeout=60,
               json={"text": "def f(x):", "sampling_params": {"max_new_tokens": 24, "temperature": 0}}).raise_for_status()
    log = srv.log_text()
    counters = [int(n) for n in re.findall(r"Decode batch \[(\d+)\], ", log)]
    assert counters and counters == sorted(counters) and len(set(counters)) == len(counters), log[-1500:]
    assert re.search(r"Prefill batch \[\d+\], #new-seq", log)
    events = [parse_line(ln) for ln in log.splitlines()]
    assert [e.iteration for e in events if isinstance(e, DecodeStats)] == counters


def test_a_bad_value_stops_the_sim_in_one_line(sim_server, monkeypatch):
    monkeypatch.setenv(FORWARD_ITERS_ENV, "maybe")
    srv = sim_server(wait_ready=False)
    assert srv.proc.wait(timeout=120) != 0
    said = [ln for ln in srv.log_text().splitlines() if "ValueError" in ln]
    assert len(said) == 1 and FORWARD_ITERS_ENV in said[0] and "Traceback" not in srv.log_text()
