"""Pure pieces of the host layer: quoting, target parsing, and the shipped scripts' Python level."""

from __future__ import annotations

import ast
import shlex
import subprocess
from pathlib import Path

import pytest

from eagle3_tui.remote import HostError, scripts
from eagle3_tui.remote.ssh import _split_target, command_line, quote_argv


def test_command_line_quotes_every_argument_and_reports_the_group() -> None:
    line = command_line(["echo", "a b", "$(touch x)", "it's"], "/tmp/dir with space", report_pgid=True)
    assert line == (
        "printf '%s\\n' \"$$\" && cd -- '/tmp/dir with space' && exec echo 'a b' '$(touch x)' 'it'\"'\"'s'"
    )
    out = subprocess.run(["sh", "-c", command_line(["printf", "%s|", "a;b", "$HOME", "x\ny"], None, report_pgid=False)],
                         capture_output=True, text=True, check=True).stdout
    assert out == "a;b|$HOME|x\ny|"
    with pytest.raises(HostError):
        quote_argv([])
    assert shlex.split(quote_argv(["a b", ""])) == ["a b", ""]


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        ("gpu-box", ("gpu-box", None, None)),
        ("root@gpu-box.lan", ("gpu-box.lan", "root", None)),
        ("ubuntu@gpu:2222", ("gpu", "ubuntu", 2222)),
        ("[::1]:2200", ("::1", None, 2200)),
        ("fe80::1", ("fe80::1", None, None)),
    ],
)
def test_split_target(target: str, expected: tuple[str, str | None, int | None]) -> None:
    assert _split_target(target) == expected


def test_shipped_python_runs_on_python_3_6() -> None:
    """GPU hosts run whatever python3 they have: the follower and helpers must parse as 3.6."""
    for name, source in (("follower", scripts.FOLLOWER), ("watchdog", scripts.WATCHDOG), ("ps", scripts.PROCESSES)):
        ast.parse(source, filename=name, feature_version=(3, 6))


def test_default_pidfile_is_outside_the_rotation_names() -> None:
    assert scripts.default_pidfile("/var/log/sglang/server.log") == "/var/log/sglang/.server.log.pid"
    assert not scripts.default_pidfile("server.log").startswith("server.log.")


def test_shell_scripts_parse_in_dash() -> None:
    for script in (scripts.SPAWN, scripts.STOP):
        subprocess.run(["sh", "-n", "-c", script], check=True)


def test_spawn_without_setsid_uses_python(tmp_path: Path) -> None:
    """Where setsid(1) is missing (macOS), the launch script starts the session with Python."""
    import os
    import signal
    import sys
    import time

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for d in ("/usr/local/bin", "/usr/bin", "/bin"):
        for name in os.listdir(d) if os.path.isdir(d) else []:
            if name != "setsid" and not (bin_dir / name).exists():
                (bin_dir / name).symlink_to(os.path.join(d, name))
    env = dict(os.environ, PATH=str(bin_dir))
    out = subprocess.run(
        ["/bin/sh", "-c", scripts.SPAWN, "sh", str(tmp_path), str(tmp_path / "s.log"), str(tmp_path / "s.pid"),
         sys.executable, "sleep", "30"],
        env=env, capture_output=True, text=True, timeout=30,
    )
    assert out.stdout.startswith("STARTED "), out.stderr
    pgid = int(out.stdout.split()[1])
    try:
        for _ in range(50):
            stat = open(f"/proc/{pgid}/stat").read().rsplit(")", 1)[1].split()
            if open(f"/proc/{pgid}/cmdline").read().startswith("sleep"):
                break
            time.sleep(0.02)
        assert int(stat[2]) == pgid and int(stat[3]) == pgid  # its own group and session
        assert open(f"/proc/{pgid}/cmdline").read().split("\0")[:2] == ["sleep", "30"]
    finally:
        os.killpg(pgid, signal.SIGKILL)


def test_process_list_from_ps_matches_proc() -> None:
    import json
    import os
    import sys

    def listing(*extra: str) -> dict[int, dict]:
        raw = subprocess.check_output([sys.executable, "-c", scripts.PROCESSES, *extra], text=True)
        return {p["pid"]: p for p in map(json.loads, raw.splitlines())}

    proc, ps = listing(), listing("--ps")
    me = os.getpid()
    assert " ".join(ps[me]["argv"]) == " ".join(proc[me]["argv"])  # ps can only split on spaces
    assert proc[me]["pgid"] == ps[me]["pgid"] == os.getpgid(0)
    assert abs(proc[me]["start"] - ps[me]["start"]) <= 1.5  # ps shows whole seconds
