"""`eagle3-tui --demo` in a pseudo-terminal stops on q, ctrl-C, SIGTERM and SIGHUP at any moment: while
it builds the demo world, while its sim server boots, and once it runs. After it stopped nothing of its
own runs any more (the world build, the sim server) and nothing of its own is left in TMPDIR (its
`eagle3-tui-demo-*` folder, a `torchinductor_*` cache).

The build is made observable by an empty world cache (EAGLE3_TUI_CACHE_DIR): the demo then builds the
world, which takes minutes, and the test stops it midway. The deadline for "it stopped" is generous: the
test asserts that it stops, not how fast.
"""

from __future__ import annotations

import fcntl
import os
import pty
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from tests.plugins.proctable import descends_from, process_table

pytestmark = pytest.mark.slow

STOPPED_WITHIN_S = 30.0
HOW = {"q": None, "ctrl-c": signal.SIGINT, "sigterm": signal.SIGTERM, "sighup": signal.SIGHUP}


class Demo:
    def __init__(self, tmp_path: Path, cache: Path) -> None:
        self.tmpdir = tmp_path / "tmp"
        self.tmpdir.mkdir()
        env = {**os.environ, "EAGLE3_TUI_DATA_DIR": str(tmp_path / "data"), "TERM": "xterm-256color",
               "TMPDIR": str(self.tmpdir), "EAGLE3_TUI_CACHE_DIR": str(cache)}
        env.pop("TORCHINDUCTOR_CACHE_DIR", None)
        self.master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))  # a terminal's size
        self.p = subprocess.Popen([sys.executable, "-m", "eagle3_tui", "--demo"], stdin=slave, stdout=slave,
                                  stderr=slave, env=env, start_new_session=True)
        os.close(slave)
        self.screen = b""
        self.seen: dict[tuple[int, int], str] = {}  # (pid, start): what ran for this demo

    def read(self, done, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        closed = False
        while not done() and time.monotonic() < deadline:
            if closed:  # the console let go of its terminal: only the exit is left to wait for
                time.sleep(0.02)
            elif select.select([self.master], [], [], 0.02)[0]:
                try:
                    self.screen += os.read(self.master, 65536)
                except OSError:
                    closed = True
        return done()

    def ours(self) -> dict[int, str]:
        """This demo's processes running now: its descendants (seen while it ran, or now), and whatever
        names its sim server's console pid or its TMPDIR."""
        table = process_table()
        mark = f"--sim-exit-with-pid {self.p.pid} "
        for pid, proc in table.items():
            if pid != self.p.pid and (descends_from(table, pid, self.p.pid) or mark in proc.cmd + " "
                                      or str(self.tmpdir) in proc.cmd):
                self.seen[(pid, proc.start)] = proc.cmd[:300]
        return {pid: cmd for (pid, start), cmd in self.seen.items() if pid in table and table[pid].start == start}

    def stop(self, how: str) -> int:
        if HOW[how] is None:
            os.write(self.master, b"q")
        else:
            self.p.send_signal(HOW[how])
        assert self.read(lambda: self.p.poll() is not None, STOPPED_WITHIN_S), f"still running after {how}"
        return self.p.wait()

    def close(self) -> None:
        os.close(self.master)
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()

    def leftovers(self) -> list[str]:
        return sorted(p.name for p in self.tmpdir.iterdir()
                      if p.name.startswith(("eagle3-tui-demo-", "torchinductor_")))


def _after(demo: Demo) -> None:
    end = time.monotonic() + STOPPED_WITHIN_S
    while time.monotonic() < end and demo.ours():
        time.sleep(0.1)
    assert demo.ours() == {}, demo.ours()
    assert demo.leftovers() == [], demo.leftovers()
    assert b"Traceback" not in demo.screen


@pytest.mark.parametrize("how", list(HOW))
def test_the_demo_stops_while_it_builds_the_world(tmp_path, how):
    demo = Demo(tmp_path, tmp_path / "empty-cache")
    try:
        assert demo.read(lambda: any("sim.world" in c for c in demo.ours().values()), 120), demo.screen[-400:]
        demo.read(lambda: False, 0.5)  # the build is under way
        demo.stop(how)
        _after(demo)
    finally:
        demo.close()


@pytest.mark.parametrize("how", list(HOW))
def test_the_demo_stops_while_its_server_boots(tmp_path, demo_world, how):
    from eagle3_tui.sim.world import default_cache_root

    demo = Demo(tmp_path, default_cache_root())
    try:
        assert demo.read(lambda: any("sim.server" in c for c in demo.ours().values()), 120), demo.screen[-400:]
        demo.stop(how)
        _after(demo)
    finally:
        demo.close()


@pytest.mark.parametrize("how", list(HOW))
def test_the_demo_stops_once_it_runs(tmp_path, demo_world, how):
    from eagle3_tui.sim.world import default_cache_root

    demo = Demo(tmp_path, default_cache_root())
    try:
        assert demo.read(lambda: b"tok/s" in demo.screen and any(
            "sim.server" in c for c in demo.ours().values()), 120), demo.screen[-400:]
        demo.read(lambda: False, 3.0)  # the server answers and the charts move
        demo.stop(how)
        _after(demo)
    finally:
        demo.close()
