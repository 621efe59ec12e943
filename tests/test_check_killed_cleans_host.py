"""`check --host` SIGKILLed over the real sshd leaves no `eagle3-check-*` folder and no job on the host,
whether it dies just after the folder was made (its scripts being copied) or while the job runs: the
folder's keeper on the host removes it when the connection dies with the console (checkjob.py)."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.plugins.world import check_fields

pytestmark = pytest.mark.slow

DEADLINE_S = 30.0  # generous: "it was cleaned up", not how fast


def _folders() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "eagle3-check-*")))


def _jobs(folders: set[str]) -> list[str]:
    out = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if any(f + "/" in cmd for f in folders):
                out.append(cmd.replace("\0", " ")[:200])
    return out


@pytest.mark.parametrize("moment", ["folder-made", "job-running"])
def test_a_sigkilled_check_leaves_nothing_on_the_host(tmp_path, demo_world, sshd, moment):
    prof = sshd.write_profile(tmp_path / "hosts.toml", **check_fields(demo_world), state_dir=tmp_path / "state")
    before = _folders()
    env = {**os.environ, "EAGLE3_TUI_DATA_DIR": str(tmp_path / "data")}
    p = subprocess.Popen([sys.executable, "-m", "eagle3_tui", "check", "--host", sshd.alias, "--profile", str(prof),
                          "--samples", "100000", "--threads", "1", "--json"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        deadline = time.monotonic() + 120
        ours: set[str] = set()
        while time.monotonic() < deadline and p.poll() is None:
            ours = _folders() - before
            if ours and (moment == "folder-made" or _jobs(ours)):
                break
            time.sleep(0.005)
        assert ours and p.poll() is None, "the check did not get that far"
        p.send_signal(signal.SIGKILL)
        p.wait(10)
        end = time.monotonic() + DEADLINE_S
        while time.monotonic() < end and (_folders() & ours or _jobs(ours)):
            time.sleep(0.1)
        assert not _folders() & ours, f"left on the host: {_folders() & ours}"
        assert not _jobs(ours), _jobs(ours)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
