"""Restarts through the public CLI: after a crash the new launch is judged by its own log; two at
once end with one server and one refusal naming the other; a failed start stops what it started; a
port change with no launch command is refused with the reason."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from eagle3_tui.profile import Profile
from eagle3_tui.session.launch import LaunchSpec
from eagle3_tui.session.store.local import LocalStore
from tests.plugins.world import stop_processes_under
from tests.test_apply_killed_midway import _profile, cli

pytestmark = pytest.mark.slow

CRASH = (
    "[2026-12-01 09:00:00] Scheduler hit an exception: Traceback (most recent call last):\n"
    '  File "scheduler.py", line 1, in event_loop\n'
    "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    "[2026-12-01 09:00:01] Received sigquit from a child process. It usually means the child failed.\n"
)


def _pgid(tmp_path: Path) -> int:
    return int((tmp_path / ".server.log.pid").read_text().strip())


def _alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def _running(pgid: int) -> bool:
    """Whether a process of group `pgid` still runs (a zombie waiting for a reaper does not)."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            return True
    return False


def _crash_then_restart(tmp_path: Path, world, ssh=None) -> None:
    prof, _cfg, alias = _profile(tmp_path, world, ssh=ssh)
    try:
        r = cli(prof, alias, "restart", "--yes")
        assert r.returncode == 0 and "server: ready" in r.stdout, r.stderr
        pgid = _pgid(tmp_path)
        os.killpg(pgid, signal.SIGKILL)  # the server dies; its log ends with the crash
        with open(tmp_path / "server.log", "a") as f:
            f.write(CRASH)
        deadline = time.monotonic() + 60
        while _running(pgid):
            assert time.monotonic() < deadline, f"process group {pgid} outlived SIGKILL"
            time.sleep(0.05)
        r = cli(prof, alias, "restart", "--yes")
        assert "Traceback" not in r.stderr and "failed to start" not in r.stderr, r.stderr
        assert r.returncode == 0 and "server: ready" in r.stdout, r.stderr
        assert _alive(_pgid(tmp_path))
        assert "Scheduler hit an exception" not in (tmp_path / "server.log").read_text()
    finally:
        stop_processes_under(tmp_path)


def test_restart_after_a_crash_is_judged_by_the_new_log(tmp_path, demo_world):
    _crash_then_restart(tmp_path, demo_world)


def test_restart_after_a_crash_over_ssh(tmp_path, demo_world, sshd):
    _crash_then_restart(tmp_path, demo_world, ssh=sshd)


def test_two_restarts_at_once_one_server_one_clear_refusal(tmp_path, demo_world):
    """The first restart is held in its loading phase (the lock taken, the new server not ready) by
    the sim's ready gate, a FIFO, until the second has been refused: no timing decides who wins."""
    prof, _cfg, alias = _profile(tmp_path, demo_world)
    gate = tmp_path / "ready-gate"
    os.mkfifo(gate)
    text = prof.read_text()
    argv_line = next(line for line in text.splitlines() if line.startswith("launch_command = "))
    gated = [*json.loads(argv_line.removeprefix("launch_command = ")), "--sim-ready-gate", str(gate)]
    prof.write_text(text.replace(argv_line, f"launch_command = {json.dumps(gated)}"))
    env = {**os.environ, "EAGLE3_TUI_DATA_DIR": str(tmp_path / "data")}
    env.pop("EAGLE3_TUI_FAULT", None)
    argv = [sys.executable, "-m", "eagle3_tui", "restart", "--yes", "--host", alias, "--profile", str(prof)]
    first = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        writer = _open_gate(gate, first)  # the new server is at its gate: the first restart holds the lock
        try:
            assert (tmp_path / ".server.log.restart-lock").exists()
            second = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=180)
        finally:
            os.close(writer)  # the server reads the pipe to its end and announces readiness
        out, err = first.communicate(timeout=180)
        assert first.returncode == 0 and "server: ready" in out, err
        assert second.returncode == 2, second.stderr
        refusal = second.stderr.strip()
        assert refusal.count("\n") == 0 and "Traceback" not in refusal
        assert f"another restart is running on this host: pid {first.pid}" in refusal and "since" in refusal
        assert _alive(_pgid(tmp_path)) and not (tmp_path / ".server.log.restart-lock").exists()
    finally:
        if first.poll() is None:
            first.kill()
            first.communicate()
        stop_processes_under(tmp_path)


def _open_gate(gate: Path, first: subprocess.Popen[str]) -> int:
    """Open the FIFO for writing: returns once the gated server opened it for reading. Fails at once if
    the restart ends first (no reader would ever come)."""
    got: list[int] = []
    opener = threading.Thread(target=lambda: got.append(os.open(gate, os.O_WRONLY)), daemon=True)
    opener.start()
    while opener.is_alive():
        opener.join(0.2)
        if first.poll() is not None and opener.is_alive():
            # unblock the opener with a reader of our own, then fail with what the restart said
            os.close(os.open(gate, os.O_RDONLY | os.O_NONBLOCK))
            opener.join()
            out, err = first.communicate()
            raise AssertionError(f"the restart ended before its server reached the gate:\n{out}\n{err}")
    return got[0]


def test_a_failed_start_stops_what_it_started(tmp_path):
    """A server that logs a scheduler exception and hangs on (as SGLang's parent does when a child died)."""
    fake = tmp_path / "fake" / "sglang"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "launch_server.py").write_text(
        "import sys, time\n"
        "print('[2026-12-01 09:00:00] Scheduler hit an exception: boom', file=sys.stderr, flush=True)\n"
        "print('[2026-12-01 09:00:00] next record', file=sys.stderr, flush=True)\n"
        "time.sleep(600)\n")
    argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", str(tmp_path), "--port", "1"]
    prof = tmp_path / "hosts.toml"
    prof.write_text(f'["here"]\nlocal = true\nlaunch_command = {json.dumps(argv)}\nlaunch_cwd = "{fake.parent}"\n'
                    f'log_path = "{tmp_path}/server.log"\nstate_dir = "{tmp_path}/state"\nport = 1\n')
    try:
        r = cli(prof, "here", "restart", "--yes", timeout=120)
        assert r.returncode == 2 and "failed to start: scheduler-exception" in r.stderr, r.stderr
        assert "stopped what this start launched" in r.stdout, r.stdout
        assert not [p for p in Path("/proc").iterdir() if p.name.isdigit() and _cmd_has(p, "sglang.launch_server")
                    and _cmd_has(p, str(tmp_path))]
    finally:
        stop_processes_under(tmp_path)


def _cmd_has(proc: Path, text: str) -> bool:
    try:
        return text.encode() in (proc / "cmdline").read_bytes()
    except OSError:
        return False


def test_a_port_change_without_a_launch_command_is_refused(tmp_path):
    state = tmp_path / "state"
    argv = ["python", "-m", "sglang.launch_server", "--model-path", "/m", "--port", "30001"]
    LocalStore(Profile(name="here", state_dir=str(state))).save_launch(
        LaunchSpec.from_argv(argv, cwd=str(tmp_path), log_path=str(tmp_path / "server.log")))
    prof = tmp_path / "hosts.toml"
    prof.write_text(f'["here"]\nlocal = true\nlog_path = "{tmp_path}/server.log"\nstate_dir = "{state}"\nport = 30002\n')
    r = cli(prof, "here", "restart", "--yes")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "no SGLang or vLLM server this console recognises runs on port 30002" in r.stderr, r.stderr
    assert "serves port 30001" in r.stderr and "launch_command" in r.stderr and "nothing was changed" in r.stderr


def test_a_restart_cut_off_after_the_stop_is_said_and_finished(tmp_path, demo_world):
    # Killed here; the same cut over the real sshd (a lost connection) is tests/test_restart_connection_cut.py.
    prof, _cfg, alias = _profile(tmp_path, demo_world)
    try:
        r = cli(prof, alias, "restart", "--yes")
        assert r.returncode == 0 and "server: ready" in r.stdout, r.stderr
        r = cli(prof, alias, "restart", "--yes", fault="restart-after-stop")
        assert r.returncode == -signal.SIGKILL
        assert (tmp_path / ".server.log.restart-lock").exists(), "the killed restart's lock is left behind"
        r = cli(prof, alias, "presets")
        assert "was cut off before it ended: no server runs now; `restart` finishes it" in r.stderr, r.stderr
        r = cli(prof, alias, "restart", "--yes")  # the dead restart's lock is taken over
        assert r.returncode == 0 and "server: ready" in r.stdout, r.stderr
        r = cli(prof, alias, "presets")
        assert "cut off" not in r.stderr and r.returncode == 0
    finally:
        stop_processes_under(tmp_path)


def test_sigterm_during_a_restart_is_one_line_and_releases_the_lock(tmp_path, demo_world):
    prof, _cfg, alias = _profile(tmp_path, demo_world)
    env = {**os.environ, "EAGLE3_TUI_DATA_DIR": str(tmp_path / "data")}
    env.pop("EAGLE3_TUI_FAULT", None)
    p = subprocess.Popen([sys.executable, "-m", "eagle3_tui", "restart", "--yes", "--host", alias, "--profile", str(prof)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert p.stdout is not None
        for line in p.stdout:
            if "loading:" in line or "] loading" in line:
                break
        p.send_signal(signal.SIGTERM)
        _out, err = p.communicate(timeout=60)
        assert p.returncode == 128 + signal.SIGTERM and err.strip() == "eagle3-tui: terminated", (p.returncode, err)
        assert not (tmp_path / ".server.log.restart-lock").exists()
        r = cli(prof, alias, "presets")
        assert "was cut off before it ended" in r.stderr and "Traceback" not in r.stderr, r.stderr
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        stop_processes_under(tmp_path)


def test_a_port_held_by_another_process_is_refused_before_anything_changes(tmp_path, demo_world):
    """No server of ours runs and a stranger listens on the profile's port: the start is refused up
    front, naming it, instead of launching into a held port. (A stranger that takes the port while a
    restart stops the server fails that restart after PORT_HELD_S: `Restarter._wait_port`.)"""
    import socket

    prof, _cfg, alias = _profile(tmp_path, demo_world)
    port = int(next(line for line in prof.read_text().splitlines() if line.startswith("port = ")).split()[-1])
    stranger = socket.socket()
    stranger.bind(("127.0.0.1", port))
    stranger.listen()
    try:
        r = cli(prof, alias, "restart", "--yes", timeout=120)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert f"port {port} is in use, but not by an SGLang or vLLM server this console recognises" in r.stderr, r.stderr
        assert "nothing was changed" in r.stderr and "[" not in r.stdout  # no restart progress: nothing began
    finally:
        stranger.close()
        stop_processes_under(tmp_path)
