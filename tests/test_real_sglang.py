"""The session and the CLI against real SGLang 0.5.23 serving the demo world on this CPU (`pytest -m real_sglang`).

One EAGLE-3 server (`real_sglang`, started as a user starts one: `python -m sglang.launch_server ... 2>
server.log`) is shared by the tests that do not restart it; the tests that restart, kill or break a server
start their own. Nothing here is mocked: SGLang's scheduler, EAGLE-3 worker, layer capture, log, /metrics
and /server_info are SGLang's own; only the CPU kernels are the pure-torch stand-in
(engines/sglang/cpu_support). Numbers asserted are relations or come from the world's own metrics.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

import httpx
import pytest

from eagle3_tui.profile import Profile
from eagle3_tui.session import Session
from tests.plugins.real_sglang import RealServer, start_real_sglang

pytestmark = pytest.mark.real_sglang

PROMPTS = ["def fibonacci(n):\n    ", "The quick brown fox", "import numpy as np\n", "class Stack:\n    def "]


def _profile(server: RealServer, tmp_path: Path, world, **kw) -> Profile:
    return Profile(name="real", local=True, port=server.port, state_dir=str(tmp_path / "state"),
                   data_glob=str(world.data_glob), data_slots=tuple(world.slot_boundaries), **kw)


def _generate(server: RealServer, prompt: str, n: int = 48) -> dict:
    r = httpx.post(server.base_url + "/generate", timeout=300, json={
        "text": prompt, "sampling_params": {"max_new_tokens": n, "temperature": 0}})
    r.raise_for_status()
    return r.json()


def _cli(server: RealServer, world, tmp_path: Path, *argv: str) -> str:
    """`eagle3-tui ARGV --local --profile P` (P names the port) in this process; its stdout (exit status 0 asserted)."""
    from eagle3_tui.cli import main

    prof = tmp_path / "hosts.toml"
    prof.write_text(f'[localhost]\nport = {server.port}\ndata_glob = "{world.data_glob}"\n'
                    f'data_slots = {list(world.slot_boundaries)}\nstate_dir = "{tmp_path / "cli-state"}"\n')
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main([*argv, "--local", "--profile", str(prof)])
    assert rc == 0, out.getvalue()
    return out.getvalue()


def _children_titles(pid: int) -> list[str]:
    titles = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            cmd = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
            titles.append(cmd)
    return titles


# ------------------------------------------------------------------ one shared server


async def test_discovery_finds_the_main_process_and_its_sglang_children(real_sglang, demo_world, tmp_path):
    titles = _children_titles(real_sglang.proc.pid)
    assert any(t.startswith("sglang::scheduler") for t in titles), titles
    assert any(t.startswith("sglang::detokenizer") for t in titles), titles
    session = Session(_profile(real_sglang, tmp_path, demo_world))
    try:
        await session.attach()
        s = session.server
        assert s.state == "ready" and s.pid == real_sglang.proc.pid and s.pgid == real_sglang.proc.pid
        assert s.log_path == str(real_sglang.log_path)  # found through /proc/<pid>/fd/2
        assert (s.steps, s.topk, s.draft_tokens) == (3, 1, 4) and s.speculative
        assert s.layer_ids is None  # the draft copy has no layer-id key: SGLang's default wiring
        # the relaunch environment the server needs, read from the untitled main process
        env = session.spec.env
        assert env.get("SGLANG_USE_CPU_ENGINE") == "1" and str(real_sglang.env["PYTHONPATH"]) == env.get("PYTHONPATH")
        info = await session.poll_server_info()
        assert info["version"] == "0.5.23" and info["attention_backend"] == "intel_amx" and info["device"] == "cpu"
    finally:
        await session.close()


async def test_the_log_is_followed_and_the_status_accept_length_is_the_logs(real_sglang, demo_world, tmp_path):
    session = Session(_profile(real_sglang, tmp_path, demo_world))
    try:
        await session.attach()
        seen = len(real_sglang.log_text().splitlines())
        for p in PROMPTS[:2]:
            _generate(real_sglang, p, 64)
        import asyncio

        lines = real_sglang.log_text().splitlines()[seen:]
        decode = [ln for ln in lines if "Decode batch" in ln]
        assert decode and all("cpu graph: False" in ln for ln in decode), decode
        last = float(re.search(r"accept len: ([0-9.]+)", decode[-1]).group(1))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 30
        while session.telemetry.summary().last.get("accept_len") != pytest.approx(last, abs=0.005):
            assert loop.time() < deadline, (session.telemetry.summary().last.get("accept_len"), last)
            await asyncio.sleep(0.2)
    finally:
        await session.close()


def test_watch_reads_real_decode_lines(real_sglang, demo_world, tmp_path):
    import threading

    t = threading.Thread(target=lambda: [_generate(real_sglang, p, 64) for p in PROMPTS[:2]])
    t.start()
    try:
        out = _cli(real_sglang, demo_world, tmp_path, "watch", "--no-ui", "--count", "1", "--duration", "120")
    finally:
        t.join()
    assert "accept len" in out.splitlines()[-1], out


def test_metrics_and_server_info_are_read(real_sglang):
    from eagle3_tui.sglang.client import parse_prometheus

    _generate(real_sglang, PROMPTS[0], 48)
    text = httpx.get(real_sglang.base_url + "/metrics", timeout=30).text
    names = {s.name for s in parse_prometheus(text).samples}
    assert {"sglang:spec_accept_length", "sglang:spec_accept_rate", "sglang:gen_throughput"} <= names, sorted(names)[:20]
    info = httpx.get(real_sglang.base_url + "/server_info", timeout=30).json()
    assert info["internal_states"][0]["avg_spec_accept_length"] >= 1.0
    assert info["speculative_num_draft_tokens"] == 4 and info["speculative_eagle_topk"] == 1


def test_bench_reads_per_request_accept_lengths(real_sglang, demo_world, tmp_path):
    out = _cli(real_sglang, demo_world, tmp_path, "bench", "-n", "2", "-c", "1", "--max-tokens", "32")
    assert "2/2 requests ok" in out and "output tok/s" in out
    meta = _generate(real_sglang, PROMPTS[1], 32)["meta_info"]
    assert meta["spec_verify_ct"] > 0
    assert meta["spec_accept_length"] == pytest.approx(meta["completion_tokens"] / meta["spec_verify_ct"])


def test_sglang_info_local_reads_the_installed_release(real_sglang, demo_world, tmp_path):
    out = _cli(real_sglang, demo_world, tmp_path, "sglang-info", "--json")
    doc = json.loads(out)
    assert doc.get("version", doc.get("release", "")).startswith("0.5.23") or "0.5.23" in out, out[:400]


def test_doctor_data_finds_the_wiring_mismatch(real_sglang, demo_world, tmp_path):
    doc = json.loads(_cli(real_sglang, demo_world, tmp_path, "doctor", "--data", str(demo_world.data_glob), "--json"))
    ids = {f["rule_id"] for f in doc["findings"]}
    assert "wiring-mismatch" in ids, ids


def test_greedy_outputs_equal_sglangs_own_torch_native_path(real_sglang, real_sglang_env, demo_world, tmp_path):
    """float32: SGLang's torch_native attention without speculation and the stand-in's intel_amx path with
    EAGLE-3 give the same tokens (greedy verification must never change the output)."""
    native = start_real_sglang(real_sglang_env, demo_world, tmp_path / "native", speculative=False,
                               extra=("--attention-backend", "torch_native", "--sampling-backend", "pytorch"))
    try:
        info = httpx.get(native.base_url + "/server_info", timeout=30).json()
        assert info["attention_backend"] == "torch_native"
        for p in PROMPTS:
            assert _generate(native, p, 48)["output_ids"] == _generate(real_sglang, p, 48)["output_ids"], p
    finally:
        native.stop()


# ------------------------------------------------------------------ servers of their own


def _own_profile(real, world, tmp_path: Path, **flags) -> Profile:
    """The demo's real-SGLang profile (the seeds' broken flags unless `flags` says otherwise), launched by
    the session's one launch path, its log at state/server.log."""
    from eagle3_tui.session.real_sglang import demo_profile, server_argv
    from tests.plugins.ports import free_port

    profile = demo_profile(world, real, port=free_port(), state_dir=tmp_path / "demo")
    if flags:
        profile.launch_command = server_argv(real, target=world.target_dir, draft=profile.draft_path,
                                             port=profile.port or 0, decode_log_interval=10, **flags)
    profile.demo = False
    return profile


async def _stop(session: Session) -> None:
    try:
        if not session.restarting:
            await session.refresh_servers()
        if session.server.pgid and not session.restarting:
            await session.stop_server()
    finally:
        await session.close()


@pytest.mark.timeout(900)  # two real starts and two benchmarks on a shared 2-core machine
async def test_preset_restart_rollback_and_a_killed_scheduler(real_sglang_env, demo_world, tmp_path):
    """The story on 0.5.23: default wiring -> `wiring-mismatch`; `train-[:-1]` applied and the REAL server
    restarted by the one restart path with its environment; the accept length rises as the check predicts;
    rollback restores the draft config byte for byte; a SIGKILLed scheduler is named from SGLang's lines."""
    import os
    import signal

    session = Session(_own_profile(real_sglang_env, demo_world, tmp_path, steps=3, topk=1, draft_tokens=4))
    bench = {"num_prompts": 2, "concurrency": 2, "max_tokens": 40}
    try:
        await session.attach()
        await session.start_server()
        assert session.server.state == "ready" and session.server.version == "0.5.23"
        by_id = {f.rule_id: f for f in await session.refresh_findings()}
        assert "wiring-mismatch" in by_id, sorted(by_id)
        config = Path(session.target.draft_config_path)
        original = config.read_bytes()
        before = await session.benchmark(**bench)

        plan = await session.plan_apply("train-[:-1]")
        assert plan.ok, plan.problems
        await session.apply(plan)
        s = session.server
        assert s.state == "ready" and s.boundaries == tuple(demo_world.slot_boundaries[:-1])
        # the relaunch kept what the server needs: still EAGLE-3 on intel_amx (not torch_native)
        info = await session.poll_server_info()
        assert info["attention_backend"] == "intel_amx", "the relaunch lost SGLANG_*/PYTHONPATH/OMP_NUM_THREADS"
        assert "wiring-mismatch" not in {f.rule_id for f in await session.refresh_findings()}
        after = await session.benchmark(**bench)
        assert after.accept_len > before.accept_len, (before.accept_len, after.accept_len)
        # the check's prediction for the trained wiring vs the default one points the same way
        m = demo_world.metrics
        assert m["trained"]["predicted_accept_len"] > m["default"]["predicted_accept_len"]
        assert after.accept_len == pytest.approx(m["trained"]["predicted_accept_len"], rel=0.15)
        assert before.accept_len == pytest.approx(m["default"]["predicted_accept_len"], rel=0.15)
        print(f"\nreal 0.5.23 accept length {before.accept_len:.2f} -> {after.accept_len:.2f} "
              f"(check predicts {m['default']['predicted_accept_len']:.2f} -> {m['trained']['predicted_accept_len']:.2f})")

        await session.rollback()
        assert session.server.state == "ready" and config.read_bytes() == original

        # the scheduler child SIGKILLed: SGLang's own lines name the failure
        sched = [int(c) for t in Path(f"/proc/{session.server.pid}/task").iterdir()
                 for c in (t / "children").read_text().split()
                 if Path(f"/proc/{c}/cmdline").read_bytes().startswith(b"sglang::scheduler")]
        assert sched
        events: list = []
        session.add_listener(events.append)
        os.kill(sched[0], signal.SIGKILL)
        import asyncio

        loop = asyncio.get_running_loop()
        deadline = loop.time() + 90
        while session.server.state != "failed":
            assert loop.time() < deadline, session.server
            await asyncio.sleep(0.3)
        assert session.server.message and session.server.log_tail
        # SGLang 0.5.23's own line names it: "Subprocess scheduler_0 (pid=N) crashed with exit code -9. ..."
        said = " ".join(map(str, events)) + " ".join(session.server.log_tail)
        assert "crashed with exit code -9" in said, said[-2000:]
        assert any("sigquit: Subprocess scheduler_0" in str(e) for e in events) or "crashed" in session.server.message
    finally:
        await _stop(session)
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and _in_group(p, session.server.pgid)]


def _in_group(proc: Path, pgid: int | None) -> bool:
    try:
        return pgid is not None and int((proc / "stat").read_text().rsplit(")", 1)[1].split()[2]) == pgid
    except (OSError, IndexError, ValueError):
        return False


@pytest.mark.parametrize(
    ("case", "expect"),
    [("missing-draft", r"draft|not found|does not exist|No such file"), ("port-in-use", r"address|in use|port")],
)
async def test_a_server_that_fails_at_start_ends_in_one_sentence(real_sglang_env, demo_world, tmp_path, case, expect):
    import socket

    from eagle3_tui.session import RestartFailed

    profile = _own_profile(real_sglang_env, demo_world, tmp_path, steps=3, topk=1, draft_tokens=4)
    argv = list(profile.launch_command or [])
    holder = None
    if case == "missing-draft":
        argv[argv.index("--speculative-draft-model-path") + 1] = str(tmp_path / "no-such-draft")
    else:
        holder = socket.socket()
        holder.bind(("127.0.0.1", profile.port or 0))
        holder.listen()
    profile.launch_command = argv
    session = Session(profile)
    try:
        await session.attach()
        with pytest.raises((RestartFailed, Exception)) as err:
            await session.start_server()
        text = f"{err.value} {session.server.message}"
        assert re.search(expect, text, re.I), text
        assert "\n" not in str(err.value).strip()
    finally:
        await _stop(session)
        if holder is not None:
            holder.close()
    pgid = session.server.pgid
    assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and _in_group(p, pgid)]
