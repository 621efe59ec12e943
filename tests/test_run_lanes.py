"""make test's two runs (tests/run_lanes): a failing suite never hides the real-SGLang lane, nor the lane the
suite; both closing lines are printed at the end and either failure fails the whole.

The two pytest runs are stood in for by a script that prints a closing line and exits as told: what is
tested here is the runner, not the suite (which would run itself)."""

from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

RUN_LANES = Path(__file__).with_name("run_lanes")


def fake_python(tmp_path: Path, suite_rc: int, lane_rc: int) -> Path:
    """A 'python' whose `-m pytest` prints a -q closing line and exits with the run's code; it logs its args."""
    script = tmp_path / "python"
    script.write_text(f"""#!/usr/bin/env bash
echo "$@" >> {tmp_path}/calls
case "$*" in
  *"not real_sglang"*) rc={suite_rc}; echo "1100 passed, 1 failed in 500.00s"; [ {suite_rc} = 0 ] && echo "1101 passed in 500.00s";;
  *) rc={lane_rc}; echo "REQUIRE=$EAGLE3_TUI_REQUIRE_REAL_SGLANG"; echo "15 passed in 260.00s";;
esac
exit $rc
""")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def run_lanes(tmp_path: Path, suite_rc: int, lane_rc: int) -> subprocess.CompletedProcess[str]:
    python = fake_python(tmp_path, suite_rc, lane_rc)
    env = {k: v for k, v in os.environ.items() if k != "EAGLE3_TUI_REQUIRE_REAL_SGLANG"}
    return subprocess.run(["bash", str(RUN_LANES), str(python), "2"], capture_output=True, text=True, env=env,
                          timeout=60, check=False)


def test_a_failing_suite_still_runs_the_real_sglang_lane_and_fails_the_whole(tmp_path: Path) -> None:
    out = run_lanes(tmp_path, suite_rc=1, lane_rc=0)
    calls = (tmp_path / "calls").read_text().splitlines()
    assert len(calls) == 2 and "not real_sglang" in calls[0] and calls[1].endswith("-m real_sglang")
    assert "-n 2" in calls[0] and "-n 0" in calls[1]
    assert out.returncode != 0
    tail = out.stdout.split("== make test: both runs ==")[1]
    assert "suite        exit 1  1100 passed, 1 failed in 500.00s" in tail
    assert "real_sglang  exit 0  15 passed in 260.00s" in tail
    assert "REQUIRE=1" in out.stdout  # the lane is required to find its venv, as before


@pytest.mark.parametrize(("suite_rc", "lane_rc", "ok"), [(0, 1, False), (0, 0, True), (0, 5, False)])
def test_the_lane_decides_too(tmp_path: Path, suite_rc: int, lane_rc: int, ok: bool) -> None:
    out = run_lanes(tmp_path, suite_rc, lane_rc)
    assert (out.returncode == 0) is ok
    assert f"real_sglang  exit {lane_rc}" in out.stdout
    assert len((tmp_path / "calls").read_text().splitlines()) == 2
