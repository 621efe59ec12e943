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
    for name, source in (("follower", scripts.FOLLOWER), ("watchdog", scripts.WATCHDOG), ("ps", scripts.PROCESSES),
                         ("procgroup", scripts.PROCGROUP)):
        ast.parse(source, filename=name, feature_version=(3, 6))


def test_default_pidfile_is_outside_the_rotation_names() -> None:
    assert scripts.default_pidfile("/var/log/sglang/server.log") == "/var/log/sglang/.server.log.pid"
    assert not scripts.default_pidfile("server.log").startswith("server.log.")


def test_shell_scripts_parse_in_dash() -> None:
    for script in (scripts.SPAWN, scripts.STOP, scripts.ALIVE):
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


def test_no_import_cycle_in_remote() -> None:
    """Every import counts (function-level and TYPE_CHECKING ones too): the follower drives a
    transport protocol, the SFTP poller gets an SFTP factory; neither imports a host."""
    root = Path(__file__).resolve().parents[1]
    pkg = root / "eagle3_tui" / "remote"
    mods = {".".join(p.relative_to(root).with_suffix("").parts): p for p in pkg.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                deps.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module:
                deps.add(node.module)
                deps.update(f"{node.module}.{a.name}" for a in node.names)
        graph[name] = {d for d in deps if d in mods and d != name and not d.endswith("__init__")}

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(d == goal or (d not in seen and not seen.add(d) and reaches(d, goal, seen)) for d in graph[start])

    cyclic = sorted(m for m in graph if not m.endswith("__init__") and reaches(m, m, set()))
    assert cyclic == []


def test_tail_offset_reads_the_same_over_an_fd_and_a_generator(tmp_path: Path) -> None:
    import os

    from eagle3_tui.remote.follow_on_host import CHUNK, tail_offset, tail_offset_reads

    data = b"".join(b"line %d %s\n" % (i, b"x" * (i * 37 % 900)) for i in range(400)) + b"partial"
    path = tmp_path / "log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    try:
        for n in (0, 1, 5, 120, 399, 400, 1000):
            want = 0 if n >= 400 else len(b"".join(data.split(b"\n")[: 400 - n])) + (400 - n)
            assert tail_offset(fd, len(data), n) == want, n
            reads = tail_offset_reads(len(data), n)  # driven by hand, as the SFTP poller does
            try:
                pos, length = next(reads)
                while True:
                    assert length <= CHUNK
                    pos, length = reads.send(data[pos : pos + length])
            except StopIteration as done:
                assert done.value == want
    finally:
        os.close(fd)


def test_procgroup_counts_a_zombie_group_as_gone_and_refuses_small_ids() -> None:
    import os
    import signal
    import sys
    import time

    from eagle3_tui.remote import procgroup

    child = subprocess.Popen([sys.executable, "-c", "pass"], start_new_session=True)
    try:
        for _ in range(200):  # exited but not reaped: a zombie, its group still "exists"
            if open(f"/proc/{child.pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z":
                break
            time.sleep(0.01)
        os.killpg(child.pid, 0)  # the kernel still knows the group
        assert not procgroup.group_alive(child.pid)
        assert procgroup.wait_group_gone(child.pid, 0.0)
        assert procgroup.stop_group(child.pid, 1.0) == "not-running"
    finally:
        child.wait()
    assert not procgroup.signal_group(child.pid, signal.SIGTERM)
    with pytest.raises(ValueError):
        procgroup.signal_group(1, signal.SIGTERM)
