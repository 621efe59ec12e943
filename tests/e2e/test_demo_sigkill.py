"""`eagle3-tui --demo` SIGKILLed in a real terminal (tmux): nothing can run in the console any more, so
its sim server must notice on its own (`--sim-exit-with-pid`) and shut down with its background load."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


def _ppid(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[1])


def _servers_of(pane_pid: int) -> dict[int, int]:
    """{sim server pid: console pid} for the demo servers whose console runs in this pane."""
    out: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        # the server's own interpreter (not a shell or setsid wrapper that carries the same argv)
        is_server = Path(argv[0].decode(errors="replace")).name.startswith("python") and argv[1:3] == [
            b"-m", b"eagle3_tui.sim.server"]
        if is_server and b"--sim-exit-with-pid" in argv:
            console = int(argv[argv.index(b"--sim-exit-with-pid") + 1])
            if _ppid(console) == pane_pid:
                out[int(entry.name)] = console
    return out


def _state(pid: int) -> str:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
        wchan = Path(f"/proc/{pid}/wchan").read_text()
    except OSError:
        return "gone"
    state = next((line for line in status.splitlines() if line.startswith("State:")), "State: ?")
    return f"{state}, wchan {wchan or '?'}"


def _log_tail(root: Path) -> str:
    logs = sorted(root.rglob("server.log"))
    return "\n".join(logs[-1].read_text(errors="replace").splitlines()[-15:]) if logs else "(no server.log)"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")
@pytest.mark.timeout(600)
def test_a_sigkilled_demo_leaves_no_server(demo_world, tmp_path: Path) -> None:
    binary = Path(sys.executable).with_name("eagle3-tui")
    sock = f"eagle3-kill-{os.getpid()}"
    tmux = ["tmux", "-L", sock]
    subprocess.run([*tmux, "new-session", "-d", "-s", "k", "-x", "120", "-y", "40",
                    f"env EAGLE3_TUI_DATA_DIR='{tmp_path}/data' TERM=xterm-256color '{binary}' --demo; sleep 60"],
                   check=True)
    try:
        pane = int(subprocess.run([*tmux, "display", "-p", "-t", "k", "#{pane_pid}"],
                                  capture_output=True, text=True, check=True).stdout)
        deadline = time.monotonic() + 300
        servers: dict[int, int] = {}
        while not servers and time.monotonic() < deadline:
            time.sleep(0.5)
            servers = _servers_of(pane)
        assert servers, "the demo never started its sim server"
        (server, console), = servers.items()
        os.kill(console, signal.SIGKILL)
        # the watcher's poll, then at most its 30 s grace; the rest is room for a loaded CI machine
        deadline = time.monotonic() + 120
        while Path(f"/proc/{server}").exists() and time.monotonic() < deadline:
            zombie = re.search(r"\) Z ", Path(f"/proc/{server}/stat").read_text(errors="replace"))
            if zombie:
                break
            time.sleep(0.5)
        assert not Path(f"/proc/{server}").exists() or zombie, (
            f"sim server {server} outlived its console: {_state(server)}; its log ends:\n{_log_tail(tmp_path)}")
    finally:
        for pid in _servers_of(pane) if "pane" in locals() else {}:
            os.killpg(pid, signal.SIGKILL)
        subprocess.run([*tmux, "kill-server"], check=False)
