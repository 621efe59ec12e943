"""The atomic write against what others do to the file meanwhile, on a LocalHost and over the real sshd.

- An in-place edit made at any step of the write (before or after each file operation: the hook
  points are the `FileOps` calls) is never lost: the write is refused (`FileChanged`) when the edit
  landed before the rename, and the file holds the edit in every trial.
- Temps of dead writers (a write SIGKILLed after its temp, its parent not even reaped yet) are
  removed by the next write; a live writer's temp is left alone, however it looks.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from eagle3_tui.remote import FileChanged, Host
from eagle3_tui.remote.atomic import STALE_TEMP_S, _machine, is_dead_temp, process_start, write_atomic

OLD = b'{"v": 1}\n'
EDIT = b'{"v": "edited in place by someone else"}\n'
MINE = b'{"v": "mine"}\n'


async def _ops(host: Host) -> Any:
    from eagle3_tui.remote.local import LocalFileOps, LocalHost

    if isinstance(host, LocalHost):
        return LocalFileOps()
    from eagle3_tui.remote.ssh import SftpFileOps

    return SftpFileOps(await host._sftp())  # type: ignore[attr-defined]


class EditAt:
    """The host's file ops, with an in-place edit of `path` before or after the `at`-th call."""

    def __init__(self, ops: Any, path: Path, at: int, when: str) -> None:
        self.ops, self.path, self.at, self.when = ops, path, at, when
        self.calls: list[str] = []
        self.edited_after: str | None = None

    def edit(self) -> None:
        with open(self.path, "r+b") as f:  # the same file (inode), rewritten where it is
            f.seek(0)
            f.truncate()
            f.write(EDIT)
        self.edited_after = " ".join(self.calls)

    def __getattr__(self, name: str) -> Any:
        fn = getattr(self.ops, name)

        async def call(*args: Any) -> Any:
            self.calls.append(name)
            n = len(self.calls)
            if n == self.at and self.when == "before":
                self.edit()
            out = await fn(*args)
            if n == self.at and self.when == "after":
                self.edit()
            return out

        return call


async def test_an_edit_at_any_step_of_the_write_is_never_lost(any_host: Host, tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_bytes(OLD)
    plain = EditAt(await _ops(any_host), cfg, at=0, when="never")
    await write_atomic(plain, str(cfg), MINE, hashlib.sha256(OLD).hexdigest())
    steps = plain.calls
    assert "rename" in steps and "hold" in steps, steps
    trials = 0
    for at in range(1, len(steps) + 1):
        for when in ("before", "after"):
            for p in tmp_path.iterdir():
                p.unlink()
            cfg.write_bytes(OLD)
            ops = EditAt(await _ops(any_host), cfg, at, when)
            before_rename = steps.index("rename") + 1 > at or (steps.index("rename") + 1 == at and when == "before")
            try:
                await write_atomic(ops, str(cfg), MINE, hashlib.sha256(OLD).hexdigest())
                refused = False
            except FileChanged as err:
                refused = True
                assert "edit" in str(err) or "changed" in str(err)
            trials += 1
            where = f"edit {when} call {at} ({steps[at - 1]}), after: {ops.edited_after}"
            assert cfg.read_bytes() == EDIT, f"the edit was lost: {where}"
            assert refused == before_rename, where
            assert not [p.name for p in tmp_path.iterdir() if ".tmp-" in p.name], where
    assert trials == 2 * len(steps)


# ---- temps of dead writers -------------------------------------------------------------------------


def _tagged(cfg: Path, pid: int, start: int | None, machine: str | None = None) -> Path:
    who = f"{pid}.{start}" if start is not None else str(pid)
    p = cfg.parent / f".{cfg.name}.tmp-{who}@{machine or _machine()}-0badc0de"
    p.write_bytes(b"half a config")
    return p


def test_which_temps_are_dead() -> None:
    sleeper = subprocess.Popen(["sleep", "60"])
    zombie = subprocess.Popen(["sleep", "60"])
    gone = subprocess.Popen(["true"])
    gone.wait()
    try:
        os.kill(zombie.pid, signal.SIGKILL)
        while open(f"/proc/{zombie.pid}/stat").read().split(") ")[1][0] != "Z":
            time.sleep(0.01)
        me = _machine()
        start = process_start(sleeper.pid)

        def dead(pid: int, st: int | None, machine: str = me, age: float = 1.0) -> bool:
            who = f"{pid}.{st}" if st is not None else str(pid)
            return is_dead_temp(f".c.json.tmp-{who}@{machine}-00ff", "c.json", age, machine=me)

        assert not dead(sleeper.pid, start)  # a live writer
        assert not dead(sleeper.pid, None)  # a live writer, older name (no start)
        assert not dead(sleeper.pid, start, age=10 * STALE_TEMP_S)  # live: never by age
        assert dead(gone.pid, None)  # reaped
        assert dead(zombie.pid, process_start(zombie.pid))  # killed, its parent has not reaped it yet
        assert dead(sleeper.pid, (start or 0) + 1)  # the pid now belongs to another process
        assert not dead(gone.pid, None, machine="other-machine")  # another machine's: only by age
        assert dead(gone.pid, None, machine="other-machine", age=STALE_TEMP_S + 1)
        assert not is_dead_temp(".other.json.tmp-1@x-00", "c.json", 1e9, machine=me)
    finally:
        for p in (sleeper, zombie):
            p.kill()
            p.wait()


KILLED_WRITER = """
import asyncio, sys
sys.path.insert(0, {root!r})
async def main():
    if {ssh!r}:
        from eagle3_tui.remote.ssh import SSHHost
        host = SSHHost({alias!r}, config=[{config!r}], python=sys.executable, agent_path=None)
    else:
        from eagle3_tui.remote.local import LocalHost
        host = LocalHost()
    await host.connect()
    await host.write_atomic({path!r}, b"killed writer", expect_sha256={sha!r})
asyncio.run(main())
"""


async def test_the_next_write_removes_dead_writers_temps_only(any_host: Host, tmp_path: Path, request) -> None:
    from eagle3_tui.remote.local import LocalHost

    cfg = tmp_path / "config.json"
    cfg.write_bytes(OLD)
    ssh = not isinstance(any_host, LocalHost)
    sshd = request.getfixturevalue("sshd") if ssh else None
    code = KILLED_WRITER.format(root=str(Path(__file__).parents[1]), ssh=ssh, alias=getattr(sshd, "alias", ""),
                                config=str(getattr(sshd, "ssh_config", "")), path=str(cfg),
                                sha=hashlib.sha256(OLD).hexdigest())
    killed = subprocess.Popen([sys.executable, "-c", code], env={**os.environ, "EAGLE3_TUI_FAULT": "after-temp"})
    live = subprocess.Popen(["sleep", "60"])
    try:
        deadline = time.monotonic() + 60
        while open(f"/proc/{killed.pid}/stat").read().split(") ")[1][0] != "Z":  # SIGKILLed itself, not reaped
            assert time.monotonic() < deadline, "the writer did not reach its kill point"
            time.sleep(0.02)
        left = [p for p in tmp_path.iterdir() if ".tmp-" in p.name]
        assert len(left) == 1 and f".tmp-{killed.pid}." in left[0].name, left
        live_temp = _tagged(cfg, live.pid, process_start(live.pid))
        res = await any_host.write_atomic(str(cfg), MINE, expect_sha256=hashlib.sha256(OLD).hexdigest())
        assert cfg.read_bytes() == MINE and res.backup_path
        assert [p for p in tmp_path.iterdir() if ".tmp-" in p.name] == [live_temp]  # only the live one stays
        live.kill()
        live.wait()
        await any_host.write_atomic(str(cfg), OLD, expect_sha256=hashlib.sha256(MINE).hexdigest())
        assert not [p for p in tmp_path.iterdir() if ".tmp-" in p.name]
    finally:
        for p in (killed, live):
            p.kill()
            p.wait()
