"""The fleet over sim SGLang servers (real HTTP, real speculative decoding on tiny CPU models): rows from
their own /metrics and /server_info; a server killed mid-run and one answering garbage mark their rows
while the others keep refreshing; `eagle3-tui fleet FILE --once --json` prints the same rows."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from eagle3_tui.fleet import DirectFleet, parse_fleet
from tests.fleet_fakes import fake_server

# SGLang sets its accept-length gauge at each decode log: every 5 decode steps, so that the two requests of
# `generate` log on any world (at the default 40, a draft accepting 3 a step finishes them unlogged)
SPEC = ("--speculative-algorithm", "EAGLE3", "--speculative-eagle-topk", "1", "--enable-metrics",
        "--decode-log-interval", "5")
ROOT = Path(__file__).resolve().parents[1]


async def generate(http: httpx.AsyncClient, base_url: str, n: int = 2) -> None:
    for _ in range(n):
        r = await http.post(f"{base_url}/generate", json={
            "text": "The capital city of France is", "sampling_params": {"max_new_tokens": 32, "temperature": 0}},
            timeout=120)
        r.raise_for_status()


async def test_fleet_over_sim_servers_with_one_killed_and_one_garbage(sim_server: Callable[..., Any]) -> None:
    a = sim_server(*SPEC, "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "4")
    b = sim_server(*SPEC, "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "4")
    c = sim_server(*SPEC, "--speculative-num-steps", "1", "--speculative-num-draft-tokens", "16")
    with fake_server() as bad:
        bad.set("/metrics", "sglang:spec_accept_length{tp_rank=\"0\"} 2.\x00\x00garbage\n")
        spec = parse_fleet({"timeout_s": 5, "window_s": 300, "server": [
            {"name": n, "base_url": s.base_url, "engine": "sglang"} for n, s in (("a", a), ("b", b), ("c", c))
        ] + [{"name": "bad", "base_url": bad.base_url, "engine": "sglang"}]})
        async with httpx.AsyncClient() as http:
            await asyncio.gather(*(generate(http, s.base_url) for s in (a, b, c)))
            fleet = DirectFleet(spec, http)
            rows = {r.name: r for r in await fleet.refresh()}
            for name in "abc":
                r = rows[name]
                assert r.status == "ok", r
                assert r.release == "0.5.6" and r.draft == "draft" and r.accept_now is not None and r.accept_now > 1
            assert (rows["a"].steps, rows["a"].topk, rows["a"].draft_tokens) == (3, 1, 4)
            assert (rows["c"].steps, rows["c"].draft_tokens) == (1, 2)  # what SGLang serves for 1/1/16
            assert rows["bad"].status == "garbage" and "\n" not in rows["bad"].reason

            b.stop()  # killed mid-run
            await asyncio.gather(*(generate(http, s.base_url) for s in (a, c)))
            before = {n: rows[n].updated for n in "ac"}
            rows = {r.name: r for r in await fleet.refresh()}
            assert rows["b"].status == "down" and rows["b"].reason.startswith("not reachable")
            assert rows["b"].accept_window is not None  # its last values stay on the marked row
            for name in "ac":
                assert rows[name].status == "ok" and rows[name].updated > before[name]  # type: ignore[operator]
                assert rows[name].tok_s is not None and rows[name].tok_s > 0
            # the same draft with one step accepts less than with three: the row the fleet compares it by
            assert rows["c"].accept_window is not None and rows["a"].accept_window is not None
            assert rows["c"].accept_window < rows["a"].accept_window


def test_cli_fleet_once_over_sim_servers(sim_server: Callable[..., Any], tmp_path: Path) -> None:
    a = sim_server(*SPEC, "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "4")
    path = tmp_path / "fleet.toml"
    path.write_text(f'[[server]]\nname = "a"\nbase_url = "{a.base_url}"\nengine = "sglang"\n'
                    f'[[server]]\nname = "gone"\nbase_url = "http://127.0.0.1:9"\nengine = "vllm"\n')
    asyncio.run(_warm(a.base_url))
    done = subprocess.run([sys.executable, "-m", "eagle3_tui", "fleet", str(path), "--once", "--json"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    rows = {r["name"]: r for r in json.loads(done.stdout)}
    assert rows["a"]["status"] == "ok" and rows["a"]["accept_window"] > 1 and rows["a"]["release"] == "0.5.6"
    assert rows["gone"]["status"] == "down"
    table = subprocess.run([sys.executable, "-m", "eagle3_tui", "fleet", str(path), "--once", "--settle", "0"],
                           capture_output=True, text=True, timeout=120, cwd=ROOT)
    header = table.stdout.splitlines()[0].split()
    assert header[:3] == ["server", "status", "engine"]
    assert "gone: down: not reachable" in table.stdout  # the reason, in the notes under the table


async def _warm(base_url: str) -> None:
    async with httpx.AsyncClient() as http:
        await generate(http, base_url, 3)


def test_cli_bad_inputs_are_one_line(tmp_path: Path) -> None:
    cases = [
        ([str(tmp_path / "missing.toml")], "no such fleet file"),
        ([str(tmp_path / "bad.toml")], "not valid TOML"),
        ([str(tmp_path / "engine.toml")], "unknown engine 'triton'"),
        ([], "no servers: give a fleet file"),
    ]
    (tmp_path / "bad.toml").write_text("[[server]\n")
    (tmp_path / "engine.toml").write_text('[[server]]\nbase_url = "http://127.0.0.1:9"\nengine = "triton"\n')
    for argv, says in cases:
        done = subprocess.run([sys.executable, "-m", "eagle3_tui", "fleet", *argv, "--once"],
                              capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert done.returncode == 2, (argv, done.stderr)
        assert done.stderr.count("\n") == 1 and says in done.stderr and "Traceback" not in done.stderr
        assert done.stdout == ""
