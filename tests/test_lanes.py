"""The lanes come from the fixtures a test uses: a test of the demo world is in `world` without a marker
written by hand, the fast lane leaves it out, and the Makefile's fast lane is the plugin's."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.plugins.lanes import FAST, LANES, PARAM_LANES

ROOT = Path(__file__).resolve().parents[1]


def test_every_lane_is_declared_and_the_makefile_fast_lane_leaves_each_out() -> None:
    pyproject = (ROOT / "pyproject.toml").read_text()
    for lane in {*LANES.values(), *PARAM_LANES.values()}:
        assert re.search(rf'^\s*"{lane}: ', pyproject, re.M), lane
    fast = re.search(r"^FAST_LANE := (.+)$", (ROOT / "Makefile").read_text(), re.M)
    assert fast is not None and fast.group(1).strip() == FAST


def _collected(*args: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode in (0, 5), out.stdout[-2000:] + out.stderr[-2000:]
    return [line for line in out.stdout.splitlines() if "::" in line]


def test_markers_follow_the_fixtures_a_test_uses() -> None:
    # test_predict_demo asks for the world through a module fixture; test_remote_contract's `host`
    # runs locally and over the test sshd (any_host's params)
    files = ["tests/test_predict_demo.py", "tests/test_remote_contract.py", "tests/test_predict.py"]
    world = _collected("-m", "world", *files)
    assert world and all(t.startswith("tests/test_predict_demo.py") for t in world)
    sshd = _collected("-m", "sshd", *files)
    assert sshd and all("[ssh]" in t for t in sshd)
    fast = _collected("-m", FAST, *files)
    assert fast and not set(fast) & set(world + sshd)
    assert any("[local]" in t for t in fast) and any(t.startswith("tests/test_predict.py") for t in fast)
