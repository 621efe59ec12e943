"""`doctor --local` run to the end leaves nothing running: the log followers it started on the host
(the server's log, and uvicorn's access log when stdout is its own file) are gone when it returns.

The process table is read right after the command exits: any process whose command line names the
server's log files (the follower gets the path as an argument) and was not there before is a leak.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.plugins.world import READY, free_port

pytestmark = pytest.mark.slow


def _naming(paths: list[Path]) -> dict[int, str]:
    marks = [str(p).encode() for p in paths]
    out: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if any(m in cmd for m in marks):
            out[int(entry.name)] = cmd.replace(b"\0", b" ").decode(errors="replace")[:200]
    return out


@pytest.mark.parametrize("split", [False, True], ids=["one-log", "access-log-apart"])
def test_doctor_local_leaves_no_follower_running(tmp_path, demo_world, split):
    port = free_port()
    log, access = tmp_path / "server.log", tmp_path / "access.log"
    argv = [sys.executable, "-m", "eagle3_tui.sim.server", "--model-path", str(demo_world.target_dir),
            "--host", "127.0.0.1", "--port", str(port), "--sim-background-load", "2", "--decode-log-interval", "1"]
    with open(log, "wb") as err, open(access if split else log, "ab") as out:
        server = subprocess.Popen(argv, stdout=out, stderr=err, start_new_session=True, cwd=tmp_path)
    try:
        for _ in range(1200):
            if READY in log.read_text(errors="replace") or server.poll() is not None:
                break
            subprocess.run(["sleep", "0.05"])
        before = _naming([log, access])
        env = {**os.environ, "EAGLE3_TUI_DATA_DIR": str(tmp_path / "data")}
        data = f"{demo_world.root}/data/*"  # the data's first file is read: the follower has time to start
        for _ in range(2):
            doctor = subprocess.Popen([sys.executable, "-m", "eagle3_tui", "doctor", "--local", "--port", str(port),
                                       "--data", data], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                      env=env)
            seen: dict[int, str] = {}
            while doctor.poll() is None:  # what ran meanwhile: the followers
                seen.update({p: c for p, c in _naming([log, access]).items() if p not in before})
                time.sleep(0.01)
            out, err = doctor.communicate()
            assert doctor.returncode == 0 and "server: ready" in out, out + err
            assert any("-c" in c for c in seen.values()), "no follower was seen running: the test saw nothing"
            left = {pid: cmd for pid, cmd in _naming([log, access]).items() if pid not in before}
            assert left == {}, left
    finally:
        server.terminate()
        server.wait(15)
