"""Replay on logs the sim server really wrote: two server runs (the seeds' broken flags, then the
steps fix) appended into one file, as a log that survives a restart looks."""

from __future__ import annotations

import io
import json
import time
from pathlib import Path
from typing import Any

import pytest

from eagle3_tui.cli import main
from eagle3_tui.sglang.scan import scan
from eagle3_tui.telemetry.runs import RunSplitter

pytestmark = pytest.mark.slow

BROKEN = ("--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "1",
          "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "16")
FIXED = ("--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
         "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4")
LOAD = ("--sim-background-load", "2", "--decode-log-interval", "4")


def _run_until_decode_lines(sim_server: Any, args: tuple[str, ...], n: int = 4) -> str:
    server = sim_server(*args, *LOAD)
    deadline = time.monotonic() + 90
    while server.log_text().count("Decode batch") < n and time.monotonic() < deadline:
        time.sleep(0.2)
    server.stop()
    text = server.log_text()
    assert text.count("Decode batch") >= n, text[-2000:]
    return text


def test_replay_of_two_sim_server_runs(sim_server: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "server.log"
    log.write_text(_run_until_decode_lines(sim_server, BROKEN) + _run_until_decode_lines(sim_server, FIXED))
    data = log.read_bytes()

    runs = []
    for fast in (True, False):
        sp = RunSplitter()
        assert scan(io.BytesIO(data), sp, fast=fast).recognized
        runs.append(sp.finish())
    assert runs[0] == runs[1]  # the fast path reads the sim's real log as parse_line does

    assert main(["replay", "--json", str(log)]) == 0
    broken, fixed = json.loads(capsys.readouterr().out)["logs"][0]["runs"]
    assert broken["started_by"] == fixed["started_by"] == "server-args"
    assert broken["spec"]["num_steps"] == 1 and broken["spec"]["num_draft_tokens"] == 2  # adjusted
    assert any("is adjusted to" in w["message"] for w in broken["warnings"])
    assert fixed["spec"]["num_steps"] == 3 and fixed["spec"]["num_draft_tokens"] == 4
    for run, steps in ((broken, 1), (fixed, 3)):
        assert run["decode_lines"] >= 4 and run["ready_at"] is not None
        assert 1.0 <= run["accept_len"]["mean"] <= steps + 1
        assert run["gen_tps"]["mean"] > 0
        assert run["failures"] == []
        guess = run["rate_guess"]
        assert guess is not None and guess["num_draft_tokens"] == steps + 1, guess
        assert guess["definition"] == "bonus-included"  # the sim prints SGLang 0.5.6 rates
        assert run["accept_rate_tool"] == pytest.approx((run["accept_len"]["mean"] - 1) / steps)
