"""Runs tests/e2e/tmux_demo.sh (the console in a real terminal through tmux) inside pytest, so CI's
single pytest command runs it."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("tmux_demo.sh")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (.ci/run installs it)")
@pytest.mark.timeout(600)
def test_tmux_demo(demo_world):
    # demo_world builds (or finds) the cached world first, so the script only waits for the server:
    # a console that never starts it fails in minutes, not after the script's world-build allowance.
    binary = Path(sys.executable).with_name("eagle3-tui")
    env = {**os.environ, "E2E_BUILD_TIMEOUT": "240"}
    proc = subprocess.run(["bash", str(SCRIPT), str(binary)], capture_output=True, text=True, timeout=540, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.startswith("OK:")
