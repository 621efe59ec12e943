"""`check --host` over the real sshd: SIGTERM cleans the host's temp folder like ctrl-C does, with one
line and 143; a folder left by a killed job is removed by the next job."""

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

from eagle3_tui.session.check.leftovers import LEFTOVER_AGE_S, is_leftover
from tests.plugins.world import check_fields

pytestmark = pytest.mark.slow


def _running_dirs() -> set[str]:
    """Check folders named by a running process's command line."""
    out = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().decode(errors="replace")
        except OSError:
            continue
        for part in cmd.split("\0"):
            if part.startswith(os.path.join(tempfile.gettempdir(), "eagle3-check-")) and part.endswith("/accuracy.pyz"):
                out.add(os.path.dirname(part))
    return out


def _profile(tmp_path: Path, world, sshd) -> Path:
    return sshd.write_profile(tmp_path / "hosts.toml", **check_fields(world), state_dir=tmp_path / "state", port=1)


def test_sigterm_cleans_the_hosts_temp_folder_and_the_next_job_removes_leftovers(tmp_path, demo_world, sshd):
    leftover = Path(tempfile.gettempdir()) / f"eagle3-check-leftover-{os.getpid()}"
    leftover.mkdir(exist_ok=True)
    (leftover / "accuracy.py").write_text("# a killed job's copy\n")
    old = time.time() - LEFTOVER_AGE_S - 60
    os.utime(leftover, (old, old))
    before = set(glob.glob(os.path.join(tempfile.gettempdir(), "eagle3-check-*")))
    prof = _profile(tmp_path, demo_world, sshd)
    env = {**os.environ, "EAGLE3_TUI_DATA_DIR": str(tmp_path / "data")}
    p = subprocess.Popen([sys.executable, "-m", "eagle3_tui", "check", "--host", sshd.alias, "--profile", str(prof),
                          "--samples", "100000", "--threads", "1", "--json"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        mine: set[str] = set()
        while not mine and time.monotonic() < deadline and p.poll() is None:
            mine = _running_dirs() - before
            time.sleep(0.1)
        assert mine, "the check job started on the host"
        assert not leftover.exists(), "the next job removed the killed job's folder"
        p.send_signal(signal.SIGTERM)
        _out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        if leftover.exists():
            (leftover / "accuracy.py").unlink(missing_ok=True)
            leftover.rmdir()
    assert p.returncode == 128 + signal.SIGTERM and err.strip() == "eagle3-tui: terminated", (p.returncode, err)
    time.sleep(0.5)
    assert not [d for d in mine if os.path.exists(d)], "the job's temp folder is gone from the host"
    assert not (_running_dirs() & mine), "the job's process is gone"


def test_what_counts_as_a_leftover() -> None:
    now = 10_000.0
    d = "/tmp/eagle3-check-abc"
    assert is_leftover(d, mtime=now - 1000, now=now, running_argv=["python -u /tmp/x/accuracy.py"], keep="/tmp/k")
    assert not is_leftover(d, mtime=now - 10, now=now, running_argv=[], keep="/tmp/k")  # just made
    assert not is_leftover(d, mtime=now - 1000, now=now, running_argv=[f"python -u {d}/accuracy.py"], keep="/tmp/k")
    assert not is_leftover(d, mtime=now - 1000, now=now, running_argv=[], keep=d)  # this job's own
    assert not is_leftover("/tmp/other", mtime=0, now=now, running_argv=[], keep="/tmp/k")
