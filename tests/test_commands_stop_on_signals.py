"""Long commands stop on ctrl-C, SIGTERM and SIGHUP at a chosen moment of their work, with one line and
their own status, and leave nothing of theirs running (what they started on the host: a follower, a
check job) or in TMPDIR (a check's `eagle3-check-*`).

Moments: `bench` while its requests run (the server logs their decode batches), `check --host` over
the real sshd while the job computes, `apply` while the restart it began waits for the new server.
The server a restart launched is the user's and stays; the deadline for "it stopped" is generous.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

import pytest

from tests.plugins.proctable import descends_from, process_table
from tests.plugins.signals import sigint_as_at_a_prompt
from tests.plugins.world import SPEC_ARGS, check_fields, make_draft_dir, stop_processes_under

pytestmark = pytest.mark.slow

WORDS = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated", signal.SIGHUP: "hung up"}
SIGNALS = list(WORDS)
STOPPED_WITHIN_S = 30.0


def _run_and_signal(argv: list[str], env: dict[str, str], ready: Callable[[], bool], sig: int) -> tuple[int, str]:
    """Start the command, wait for `ready()`, send `sig`; what it started (its descendants, the user's
    sim server aside) must be gone once it exits."""
    p = subprocess.Popen([sys.executable, "-m", "eagle3_tui", *argv], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env=env, preexec_fn=sigint_as_at_a_prompt)
    seen: dict[tuple[int, int], str] = {}

    def sample() -> None:
        table = process_table()
        for pid, proc in table.items():
            if descends_from(table, pid, p.pid) and "eagle3_tui.sim.server" not in proc.cmd:
                seen[(pid, proc.start)] = proc.cmd[:200]

    try:
        deadline = time.monotonic() + 180
        while not ready():
            assert p.poll() is None, p.stderr.read() if p.stderr else ""
            assert time.monotonic() < deadline, "the command never got to the moment"
            sample()
            time.sleep(0.02)
        sample()
        p.send_signal(sig)
        _out, err = p.communicate(timeout=STOPPED_WITHIN_S)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    end = time.monotonic() + STOPPED_WITHIN_S
    while time.monotonic() < end:
        table = process_table()
        left = {k: c for k, c in seen.items() if k[0] in table and table[k[0]].start == k[1]}
        if not left:
            break
        time.sleep(0.1)
    assert left == {}, left
    return p.returncode, err


def _one_line(rc: int, err: str, sig: int) -> None:
    assert rc == 128 + sig, (rc, err)
    assert err == f"eagle3-tui: {WORDS[sig]}\n", err


@pytest.mark.parametrize("sig", SIGNALS)
def test_bench_stops_while_its_requests_run(tmp_path, demo_world, sim_server, sig):
    server = sim_server(*SPEC_ARGS, "--sim-background-load", "0", "--decode-log-interval", "1")
    prof = tmp_path / "hosts.toml"
    prof.write_text(f'["localhost"]\nremote_python = "{sys.executable}"\nstate_dir = "{tmp_path}/state"\n')
    mark = server.log_text().count("Decode batch")
    env = {**os.environ, "EAGLE3_TUI_DATA_DIR": str(tmp_path / "data")}
    rc, err = _run_and_signal(["bench", "--local", "--port", str(server.port), "--profile", str(prof), "-n", "400",
                               "-c", "2", "--max-tokens", "256"], env,
                              lambda: server.log_text().count("Decode batch") > mark + 5, sig)
    _one_line(rc, err, sig)
    assert server.proc.poll() is None  # the server is the user's: it runs on


@pytest.mark.parametrize("sig", SIGNALS)
def test_check_over_ssh_stops_while_the_job_computes(tmp_path, demo_world, sshd, sig):
    prof = sshd.write_profile(tmp_path / "hosts.toml", **check_fields(demo_world), state_dir=tmp_path / "state")
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "eagle3-check-*")))

    def computing() -> bool:
        ours = set(glob.glob(os.path.join(tempfile.gettempdir(), "eagle3-check-*"))) - before
        return any(any(f + "/" in c for f in ours) for c in (q.cmd for q in process_table().values()))

    env = {**os.environ, "EAGLE3_TUI_DATA_DIR": str(tmp_path / "data")}
    rc, err = _run_and_signal(["check", "--host", sshd.alias, "--profile", str(prof), "--samples", "100000",
                               "--threads", "1", "--json"], env, computing, sig)
    _one_line(rc, err, sig)
    end = time.monotonic() + STOPPED_WITHIN_S
    while time.monotonic() < end and set(glob.glob(os.path.join(tempfile.gettempdir(), "eagle3-check-*"))) - before:
        time.sleep(0.1)
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "eagle3-check-*"))) - before == set()


@pytest.mark.parametrize("sig", SIGNALS)
def test_apply_stops_while_its_restart_waits_for_the_server(tmp_path, demo_world, sig):
    from tests.plugins.world import free_port

    draft = make_draft_dir(demo_world, tmp_path / "draft")
    port = free_port()
    argv = [sys.executable, "-m", "eagle3_tui.sim.server", "--model-path", str(demo_world.target_dir),
            "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(draft),
            "--speculative-num-steps", "1", "--speculative-num-draft-tokens", "2", "--speculative-eagle-topk", "1",
            "--host", "127.0.0.1", "--port", str(port), "--sim-background-load", "0", "--sim-embed-capture-patch"]
    prof = tmp_path / "hosts.toml"
    prof.write_text(f'["localhost"]\nlaunch_command = {json.dumps(argv)}\nlaunch_cwd = "{tmp_path}"\n'
                    f'log_path = "{tmp_path}/server.log"\nremote_python = "{sys.executable}"\n'
                    f'state_dir = "{tmp_path}/state"\nport = {port}\nrestart_deadline_s = 120\n'
                    f"data_slots = {json.dumps(list(demo_world.slot_boundaries))}\n")
    env = {**os.environ, "EAGLE3_TUI_DATA_DIR": str(tmp_path / "data")}
    lock = tmp_path / ".server.log.restart-lock"
    try:
        rc, err = _run_and_signal(["apply", "train-[:-1]", "--yes", "--local", "--profile", str(prof)], env,
                                  lambda: lock.exists() and (tmp_path / ".server.log.pid").exists(), sig)
        _one_line(rc, err, sig)
        assert not lock.exists()  # the one-restart lock is released
    finally:
        stop_processes_under(tmp_path)
