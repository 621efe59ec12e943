"""A restart relaunches the server with the environment it ran with, read from its main process.

A sim server is started by hand (no profile launch_command) with a variable of each kind a real
server needs (SGLANG_*, PYTHONPATH, OMP_NUM_THREADS, LD_PRELOAD, LD_LIBRARY_PATH, an arbitrary
FOO_BAR) and a tmux marker; `eagle3-tui restart --yes` through the public CLI, locally and over the
real sshd, relaunches it; the new process's /proc/<pid>/environ holds every one of them (the tmux
marker, which the console must drop, excepted), the profile's `launch_env` on top, and nothing of
the console's or the SSH login's own environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from eagle3_tui.remote.procgroup import stop_group
from eagle3_tui.session.host.discovery import parse_environ
from tests.plugins.world import READY, free_port, stop_processes_under

pytestmark = pytest.mark.slow


def _libm() -> str:
    """A shared library this Python has loaded (harmless to preload again)."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        path = line.split()[-1]
        if "/libm." in path or "/libm-" in path:
            return path
    pytest.skip("no libm mapped in this Python")


def _server_env(tmp_path: Path) -> dict[str, str]:
    extra = tmp_path / "extra-site"
    extra.mkdir()
    return {
        "PATH": os.environ["PATH"],
        "HOME": os.environ.get("HOME", "/root"),
        "TMPDIR": os.environ.get("TMPDIR", "/tmp"),
        "SGLANG_ENABLE_TORCH_COMPILE_TEST": "1",
        "PYTHONPATH": f"{extra}:{os.getcwd()}",
        "OMP_NUM_THREADS": "1",
        "LD_PRELOAD": _libm(),
        "LD_LIBRARY_PATH": str(tmp_path / "libs"),
        "FOO_BAR": "baz qux=1",
        "TMUX": "/tmp/tmux-0/default,1,0",
    }


def _start(tmp_path: Path, world, env: dict[str, str]) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    argv = [sys.executable, "-m", "eagle3_tui.sim.server", "--model-path", str(world.target_dir),
            "--host", "127.0.0.1", "--port", str(port), "--sim-background-load", "0"]
    log = tmp_path / "server.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, start_new_session=True, cwd=tmp_path,
                                env=env)
    for _ in range(1200):
        if READY in log.read_text(errors="replace") or proc.poll() is not None:
            break
        subprocess.run(["sleep", "0.05"])
    assert READY in log.read_text(errors="replace"), log.read_text()[-2000:]
    return proc, port


def _profile(tmp_path: Path, port: int, ssh=None) -> tuple[Path, str]:
    head = ('["here"]\nlocal = true\n', "here") if ssh is None else (
        f'["{ssh.alias}"]\nssh_config = "{ssh.ssh_config}"\n', ssh.alias)
    prof = tmp_path / "hosts.toml"
    prof.write_text(head[0] + f'remote_python = "{sys.executable}"\nstate_dir = "{tmp_path}/state"\n'
                    f"port = {port}\nrestart_deadline_s = 120\n"
                    '[' + head[1] + '.launch_env]\nE3_FROM_PROFILE = "p"\nOMP_NUM_THREADS = "1"\n')
    return prof, head[1]


def _restart_keeps_the_environment(tmp_path: Path, world, ssh=None) -> None:
    env = _server_env(tmp_path)
    first, port = _start(tmp_path, world, env)
    prof, alias = _profile(tmp_path, port, ssh)
    cli_env = {**os.environ, "EAGLE3_TUI_DATA_DIR": str(tmp_path / "data"), "E3_CONSOLE_ONLY": "console"}
    try:
        r = subprocess.run([sys.executable, "-m", "eagle3_tui", "restart", "--yes", "--host", alias,
                            "--profile", str(prof)], capture_output=True, text=True, env=cli_env, timeout=300)
        assert r.returncode == 0 and "server: ready" in r.stdout, r.stdout + r.stderr
        assert first.wait(30) is not None  # the old server was stopped
        pgid = int((tmp_path / ".server.log.pid").read_text())
        got = parse_environ(Path(f"/proc/{pgid}/environ").read_bytes())
        for name in ("SGLANG_ENABLE_TORCH_COMPILE_TEST", "PYTHONPATH", "OMP_NUM_THREADS", "LD_PRELOAD",
                     "LD_LIBRARY_PATH", "FOO_BAR", "PATH", "HOME", "TMPDIR"):
            assert got.get(name) == env[name], (name, got.get(name))
        assert got["E3_FROM_PROFILE"] == "p"  # the profile's launch_env, with no launch_command in it
        assert "TMUX" not in got  # detached now: no pane
        assert "E3_CONSOLE_ONLY" not in got and "SSH_CONNECTION" not in got  # nothing of the launcher's
        saved = json.loads((tmp_path / "state" / "launch.json").read_text())
        assert saved["env"]["FOO_BAR"] == "baz qux=1" and saved.get("env_whole") is True
    finally:
        first.kill()
        first.wait()
        pidfile = tmp_path / ".server.log.pid"
        if pidfile.exists():  # the relaunched server: its command line does not name tmp_path
            stop_group(int(pidfile.read_text()), 10.0)
        stop_processes_under(tmp_path)


def test_a_restart_keeps_the_whole_environment_locally(tmp_path, demo_world):
    _restart_keeps_the_environment(tmp_path, demo_world)


def test_a_restart_keeps_the_whole_environment_over_ssh(tmp_path, demo_world, sshd):
    _restart_keeps_the_environment(tmp_path, demo_world, ssh=sshd)
