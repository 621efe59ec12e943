"""The Host contract, run against LocalHost and against SSHHost over a real OpenSSH sshd."""

from __future__ import annotations

import asyncio
import hashlib
import http.server
import os
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from eagle3_tui.remote import (
    FileChanged,
    FollowBatch,
    FollowCursor,
    FollowEvent,
    Host,
    RemoteFileNotFound,
)
from eagle3_tui.remote.errors import CommandTimeout


@pytest.fixture
def host(any_host: Host) -> Host:
    return any_host


async def collect(fol: Any, until: Any, timeout: float = 20.0) -> list[Any]:
    """Items from a follow until `until(lines, items)` is true."""
    items: list[Any] = []
    lines: list[str] = []

    async def go() -> None:
        async for item in fol:
            items.append(item)
            if isinstance(item, FollowBatch):
                lines.extend(item.lines)
            if until(lines, items):
                return

    await asyncio.wait_for(go(), timeout)
    return items


def lines_of(items: list[Any]) -> list[str]:
    return [ln for it in items if isinstance(it, FollowBatch) for ln in it.lines]


def kinds(items: list[Any]) -> list[str]:
    return [it.kind for it in items if isinstance(it, FollowEvent)]


def append(path: Path, text: str | bytes) -> None:
    with open(path, "ab") as f:
        f.write(text.encode() if isinstance(text, str) else text)


# ---- run / stream ---------------------------------------------------------------------------------


async def test_run_returns_exit_code_and_both_outputs(host: Host, tmp_path: Path) -> None:
    res = await host.run(["sh", "-c", "pwd; echo oops >&2; exit 7"], cwd=str(tmp_path))
    assert res.exit_code == 7
    assert res.stdout == f"{tmp_path}\n"
    assert res.stderr == "oops\n"
    missing = await host.run(["definitely-not-a-command-xyz"])
    assert missing.exit_code == 127


async def test_run_timeout_stops_the_command(host: Host, tmp_path: Path) -> None:
    marker = tmp_path / "still-running"
    with pytest.raises(CommandTimeout):
        await host.run(["sh", "-c", f"sleep 0.8; touch '{marker}'"], timeout=0.3)
    await asyncio.sleep(1.0)
    assert not marker.exists()


async def test_stream_yields_lines_as_they_come_and_the_exit_code(host: Host) -> None:
    script = "import sys,time\nfor i in range(3):\n print(i, flush=True); time.sleep(0.05)\nsys.stderr.write('bye')\nsys.exit(4)"
    async with host.stream([sys.executable, "-c", script]) as s:
        got = [line async for line in s]
    assert got == ["0", "1", "2"]
    assert s.exit_code == 4
    assert s.stderr == "bye"


async def test_closing_a_stream_ends_the_remote_process(host: Host, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    script = f"import os,time\nopen({str(pidfile)!r},'w').write(str(os.getpid()))\nprint('up', flush=True)\ntime.sleep(60)"
    s = host.stream([sys.executable, "-c", script])
    async with s:
        async for line in s:
            assert line == "up"
            break
    pid = int(pidfile.read_text())
    for _ in range(50):
        if not _alive(pid):
            break
        await asyncio.sleep(0.1)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


# ---- files ---------------------------------------------------------------------------------------------


async def test_read_stat_glob(host: Host, tmp_path: Path) -> None:
    (tmp_path / "a.json").write_bytes(b'{"x": 1}\xff')
    (tmp_path / "b.json").write_text("{}")
    (tmp_path / ".hidden.json").write_text("{}")
    assert await host.read_bytes(str(tmp_path / "a.json")) == b'{"x": 1}\xff'
    assert (await host.read_text(str(tmp_path / "a.json"))).endswith("\ufffd")
    st = await host.stat(str(tmp_path / "a.json"))
    assert st.size == 9 and not st.is_dir
    assert (await host.stat(str(tmp_path))).is_dir
    assert await host.glob(str(tmp_path / "*.json")) == [str(tmp_path / "a.json"), str(tmp_path / "b.json")]
    assert await host.glob(str(tmp_path / "nothing-*")) == []
    with pytest.raises(RemoteFileNotFound):
        await host.read_bytes(str(tmp_path / "missing"))
    with pytest.raises(RemoteFileNotFound):
        await host.stat(str(tmp_path / "missing"))


async def test_read_bytes_of_a_proc_file(host: Host) -> None:
    """/proc files stat as size 0: the read must go to EOF, not trust the size (discovery reads environ)."""
    data = await host.read_bytes(f"/proc/{os.getpid()}/environ")
    assert data == Path(f"/proc/{os.getpid()}/environ").read_bytes() and len(data) > 0


async def test_write_atomic_keeps_mode_and_backup(host: Host, tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text('{"old": true}\n')
    os.chmod(cfg, 0o640)
    old_sha = hashlib.sha256(cfg.read_bytes()).hexdigest()
    res = await host.write_atomic(str(cfg), '{"new": true}\n', expect_sha256=old_sha)
    assert cfg.read_text() == '{"new": true}\n'
    assert oct(cfg.stat().st_mode & 0o777) == oct(0o640)
    assert res.backup_path is not None and Path(res.backup_path).read_text() == '{"old": true}\n'
    assert Path(res.backup_path).name.startswith("config.json.bak-")
    assert res.sha256 == hashlib.sha256(b'{"new": true}\n').hexdigest()
    assert sorted(p.name for p in tmp_path.iterdir() if ".tmp-" in p.name) == []
    # a second edit gets its own backup name
    res2 = await host.write_atomic(str(cfg), "{}\n", expect_sha256=res.sha256)
    assert res2.backup_path != res.backup_path and Path(res2.backup_path or "").read_text() == '{"new": true}\n'


async def test_write_atomic_fsyncs_the_directory_after_the_rename(host: Host, tmp_path: Path) -> None:
    """Both hosts run the one write_atomic over their own file ops; the directory fsync comes last.
    Over SSH it is a real fsync@openssh.com on a handle of the directory, which OpenSSH accepts."""
    from eagle3_tui.remote.atomic import write_atomic
    from eagle3_tui.remote.local import LocalFileOps, LocalHost

    if isinstance(host, LocalHost):
        ops: Any = LocalFileOps()
    else:
        from eagle3_tui.remote.ssh import SftpFileOps

        sftp = await host._sftp()  # type: ignore[attr-defined]
        ops = SftpFileOps(sftp)
        async with sftp.open(str(tmp_path), "rb") as d:  # no error hidden: the server does it
            await d.fsync()
    calls: list[str] = []

    class Recording:
        def __getattr__(self, name: str) -> Any:
            fn = getattr(ops, name)

            async def call(*args: Any) -> Any:
                calls.append(name)
                return await fn(*args)

            return call

    cfg = tmp_path / "c.json"
    cfg.write_text("old\n")
    res = await write_atomic(Recording(), str(cfg), "new\n", hashlib.sha256(b"old\n").hexdigest())
    assert cfg.read_text() == "new\n" and Path(res.backup_path or "").read_text() == "old\n"
    assert calls[-2:] == ["rename", "fsync_dir"]
    assert calls.index("write_new") < calls.index("keep_copy") < calls.index("rename")


async def test_write_atomic_refuses_a_file_changed_underneath(host: Host, tmp_path: Path) -> None:
    cfg = tmp_path / "config.json"
    cfg.write_text("v1\n")
    read_sha = hashlib.sha256(b"v1\n").hexdigest()
    cfg.write_text("v2 written by someone else\n")
    with pytest.raises(FileChanged, match="changed"):
        await host.write_atomic(str(cfg), "mine\n", expect_sha256=read_sha)
    assert cfg.read_text() == "v2 written by someone else\n"
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"]
    with pytest.raises(FileChanged, match="already exists"):
        await host.write_atomic(str(cfg), "mine\n", expect_sha256=None)
    new = tmp_path / "new.json"
    res = await host.write_atomic(str(new), "fresh\n", expect_sha256=None)
    assert new.read_text() == "fresh\n" and res.backup_path is None


# ---- follow ------------------------------------------------------------------------------------------


async def test_follow_begin_partial_lines_invalid_utf8_long_lines(host: Host, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"one\ntw")
    long = b"x" * 70000
    async with host.follow(str(log), start="begin") as fol:
        first = await collect(fol, lambda ls, it: len(ls) >= 1)
        assert lines_of(first) == ["one"]
        append(log, b"o\nbad \xff\xfe bytes\n" + long + b"\nafter\n")
        rest = await collect(fol, lambda ls, it: "after" in ls)
    got = lines_of(first + rest)
    assert got[:3] == ["one", "two", "bad \ufffd\ufffd bytes"]
    assert got[3].startswith("x" * 65536) and "cut" in got[3] and len(got[3]) < 65536 + 100
    assert got[4] == "after"
    assert kinds(first)[0] == "opened"


async def test_follow_end_and_last_lines(host: Host, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("l1\nl2\nl3\npart")
    async with host.follow(str(log), start="end", last_lines=2) as fol:
        items = await collect(fol, lambda ls, it: len(ls) >= 2)
        assert lines_of(items) == ["l2", "l3"]
        append(log, "ial\nl5\n")
        items = await collect(fol, lambda ls, it: "l5" in ls)
        assert lines_of(items) == ["partial", "l5"]
    async with host.follow(str(log), start="end") as fol:
        items = await collect(fol, lambda ls, it: "opened" in kinds(it))
        append(log, "l6\n")
        items = await collect(fol, lambda ls, it: len(ls) >= 1)
        assert lines_of(items) == ["l6"]


async def test_follow_absent_then_created(host: Host, tmp_path: Path) -> None:
    log = tmp_path / "later.log"
    async with host.follow(str(log), start="end") as fol:
        items = await collect(fol, lambda ls, it: "waiting" in kinds(it))
        log.write_text("first\nsecond\n")
        items += await collect(fol, lambda ls, it: len(ls) >= 2)
    assert kinds(items)[:2] == ["waiting", "opened"]
    assert lines_of(items) == ["first", "second"]


async def test_follow_rotation_with_late_writes_and_truncation(host: Host, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("a1\n")
    async with host.follow(str(log), start="begin") as fol:
        items = await collect(fol, lambda ls, it: ls == ["a1"])
        os.rename(log, tmp_path / "server.log.1")
        append(tmp_path / "server.log.1", "a2-before-new\n")
        log.write_text("b1\n")
        items += await collect(fol, lambda ls, it: "b1" in ls)
        append(tmp_path / "server.log.1", "a3-late\n")  # written to the rotated file after the switch
        items += await collect(fol, lambda ls, it: "a3-late" in ls)
        with open(log, "w") as f:  # truncate ("> file")
            f.write("")
        await asyncio.sleep(0.3)
        append(log, "t1\n")
        items += await collect(fol, lambda ls, it: "t1" in ls)
    assert lines_of(items) == ["a1", "a2-before-new", "b1", "a3-late", "t1"]
    assert "rotated" in kinds(items) and "truncated" in kinds(items)


async def test_follow_resumes_from_a_cursor_exactly(host: Host, tmp_path: Path) -> None:
    """Stop following, rotate + late-write + new file while away, resume from the cursor."""
    log = tmp_path / "server.log"
    log.write_text("l1\nl2\nl3\nl4\npar")
    async with host.follow(str(log), start="begin") as fol:
        items = await collect(fol, lambda ls, it: len(ls) >= 4)
    cursor = fol.cursor
    assert isinstance(cursor, FollowCursor) and cursor.offset == len("l1\nl2\nl3\nl4\n")
    append(log, "tial-done\nl5\n")
    os.rename(log, tmp_path / "server.log.1")
    append(tmp_path / "server.log.1", "late-to-old\n")
    log.write_text("n1\nn2\n")
    async with host.follow(str(log), cursor) as fol:
        items = await collect(fol, lambda ls, it: "n2" in ls)
        append(log, "n3\n")
        items += await collect(fol, lambda ls, it: "n3" in ls)
    assert lines_of(items) == ["partial-done", "l5", "late-to-old", "n1", "n2", "n3"]
    # truncated while away
    cursor = fol.cursor
    log.write_text("")
    append(log, "t1\n")
    async with host.follow(str(log), cursor) as fol:
        items = await collect(fol, lambda ls, it: "t1" in ls)
    assert lines_of(items) == ["t1"] and "truncated" in kinds(items)


# ---- process groups ------------------------------------------------------------------------------------


STUBBORN = "import signal,subprocess,time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nsubprocess.Popen(['sleep','300'])\nprint('ready', flush=True)\ntime.sleep(300)\n"
POLITE = "import time\nprint('ready', flush=True)\ntime.sleep(300)\n"


async def test_spawn_detached_and_stop_group(host: Host, tmp_path: Path) -> None:
    log = tmp_path / "srv.log"
    log.write_text("previous run\n")
    pgid = await host.spawn_detached(
        [sys.executable, "-u", "-c", STUBBORN], cwd=str(tmp_path), env={"EAGLE3_X": "a b"}, log_path=str(log)
    )
    rotated = [p for p in tmp_path.iterdir() if p.name.startswith("srv.log.")]
    assert len(rotated) == 1 and rotated[0].read_text() == "previous run\n"
    for _ in range(100):
        if log.exists() and "ready" in log.read_text():
            break
        await asyncio.sleep(0.05)
    members = [p for p in await host.processes() if p.pgid == pgid]
    assert len(members) == 2  # python + its sleep child
    leader = next(p for p in members if p.pid == pgid)
    assert leader.argv[:3] == [sys.executable, "-u", "-c"] and leader.cwd == str(tmp_path)
    assert leader.start_time > 1e9
    env = Path(f"/proc/{pgid}/environ").read_bytes().split(b"\0")
    assert b"EAGLE3_X=a b" in env
    with pytest.raises(Exception, match="still running"):
        await host.spawn_detached(["sleep", "1"], cwd=str(tmp_path), log_path=str(log))
    assert await host.group_alive(pgid)
    assert await host.stop_group(pgid, grace=0.5) == "killed"
    assert not [p for p in await host.processes() if p.pgid == pgid]
    assert not await host.group_alive(pgid)
    assert await host.stop_group(pgid, grace=0.5) == "not-running"

    pgid = await host.spawn_detached([sys.executable, "-u", "-c", POLITE], cwd=str(tmp_path), log_path=str(log))
    assert await host.stop_group(pgid, grace=10) == "stopped"


async def test_local_stop_group_is_the_hosts_rule(host: Host, tmp_path: Path) -> None:
    """procgroup.stop_group (this machine, no event loop needed) gives the same outcomes as
    Host.stop_group for a group the host launched."""
    from eagle3_tui.remote import procgroup

    log = tmp_path / "srv.log"
    pgid = await host.spawn_detached([sys.executable, "-u", "-c", STUBBORN], cwd=str(tmp_path), log_path=str(log))
    for _ in range(100):
        if log.exists() and "ready" in log.read_text():
            break
        await asyncio.sleep(0.05)
    assert procgroup.group_alive(pgid) and await host.group_alive(pgid)
    assert await asyncio.to_thread(procgroup.stop_group, pgid, 0.5) == "killed"
    assert not procgroup.group_alive(pgid) and not await host.group_alive(pgid)
    assert procgroup.stop_group(pgid, 0.5) == "not-running"
    pgid = await host.spawn_detached([sys.executable, "-u", "-c", POLITE], cwd=str(tmp_path), log_path=str(log))
    assert await asyncio.to_thread(procgroup.stop_group, pgid, 10) == "stopped"
    assert await host.stop_group(pgid, grace=0.5) == "not-running"


# ---- forward ----------------------------------------------------------------------------------------------


async def test_forward_reaches_a_loopback_http_server(host: Host) -> None:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = f"hello {self.path}".encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = await host.forward(server.server_address[1])
        async with httpx.AsyncClient(timeout=5) as client:
            for i in range(3):
                r = await client.get(f"http://127.0.0.1:{port}/health{i}")
                assert r.status_code == 200 and r.text == f"hello /health{i}"
    finally:
        server.shutdown()
        server.server_close()


async def test_closing_the_host_ends_a_follow_quietly(host: Host, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("a\n")
    got: list[Any] = []
    first = asyncio.Event()

    async def consume() -> None:
        async for item in host.follow(str(log), start="begin"):
            got.append(item)
            if isinstance(item, FollowBatch):
                first.set()

    task = asyncio.ensure_future(consume())
    await asyncio.wait_for(first.wait(), 20)
    await host.close()
    await asyncio.wait_for(task, 10)  # ends without an error
    assert lines_of(got) == ["a"]


async def test_follow_resumes_across_two_rotations_while_away(host: Host, tmp_path: Path) -> None:
    """The follower was away for two rotations (logrotate's dateext name, then a numbered one): it
    drains the cursor's file, then the file in between, then the new one; decoys are ignored."""
    log = tmp_path / "server.log"
    log.write_text("a1\n")
    async with host.follow(str(log), start="begin") as fol:
        await collect(fol, lambda ls, it: ls == ["a1"])
    cursor = fol.cursor
    append(log, "a2\n")
    os.rename(log, tmp_path / "server.log-20261129")
    log.write_text("b1\n")
    os.rename(log, tmp_path / "server.log.1")
    log.write_text("c1\n")
    (tmp_path / "server.log.lock").write_text("decoy\n")
    (tmp_path / "server.log.bak-20261129-000000").write_text("decoy\n")
    async with host.follow(str(log), cursor) as fol:
        items = await collect(fol, lambda ls, it: "c1" in ls)
    assert lines_of(items) == ["a2", "b1", "c1"]


async def test_follow_of_an_unreadable_path_is_one_clear_error(host: Host, tmp_path: Path) -> None:
    from eagle3_tui.remote import HostError

    with pytest.raises(HostError, match=r"cannot follow .*Is a directory"):
        async with host.follow(str(tmp_path), start="begin") as fol:
            async for _ in fol:
                pass


async def test_write_atomic_through_a_symlink_keeps_the_link(host: Host, tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    target = real / "config.json"
    target.write_text("old\n")
    link = tmp_path / "config.json"
    link.symlink_to(target)
    res = await host.write_atomic(str(link), "new\n", expect_sha256=hashlib.sha256(b"old\n").hexdigest())
    assert link.is_symlink() and target.read_text() == "new\n"
    assert res.backup_path is not None and Path(res.backup_path).parent == real
