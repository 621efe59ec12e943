"""SSHHost-only behaviour against a real sshd: host keys, auth, the supervisor, ProxyJump."""

from __future__ import annotations

import asyncio
import contextlib
import re
from pathlib import Path
from typing import Any

import pytest

from eagle3_tui.remote import AuthFailed, ChangedHostKey, ConnectionLost, FollowBatch, UnknownHostKey
from eagle3_tui.remote.ssh import SSHHost
from tests.plugins.ports import free_port
from tests.plugins.sshd import SshdServer


def _config(sshd: SshdServer, tmp_path: Path, *, known_hosts: Path | None = None, key: Path | None = None) -> Path:
    """An ssh_config for the same server with another known_hosts / identity."""
    cfg = tmp_path / "ssh_config"
    cfg.write_text(
        f"Host target\n    HostName 127.0.0.1\n    Port {sshd.port}\n    User {sshd.user}\n"
        f"    IdentityFile {key or sshd.client_key}\n    IdentitiesOnly yes\n"
        f"    UserKnownHostsFile {known_hosts or sshd.known_hosts}\n"
    )
    return cfg


async def test_unknown_host_key_is_refused_then_accepted_on_request(sshd: SshdServer, tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    cfg = _config(sshd, tmp_path, known_hosts=kh)
    host = sshd.make_host("target", config=[str(cfg)])
    with pytest.raises(UnknownHostKey, match="unknown") as err:
        await host.connect(timeout=10)
    assert "SHA256:" in str(err.value)
    assert host.state.kind == "failed"
    assert not kh.exists() or kh.read_text() == ""
    await host.close()

    host = sshd.make_host("target", config=[str(cfg)], accept_new_host_key=True)
    await host.connect(timeout=10)
    assert (await host.run(["echo", "ok"])).stdout == "ok\n"
    await host.close()
    assert kh.read_text().strip() == f"[127.0.0.1]:{sshd.port} {sshd.host_public_key_line()}"

    host = sshd.make_host("target", config=[str(cfg)])  # recorded: now trusted without the flag
    await host.connect(timeout=10)
    await host.close()


async def test_changed_host_key_is_refused_even_with_accept_new(sshd: SshdServer, tmp_path: Path) -> None:
    other = tmp_path / "other_key"
    import subprocess

    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    pub = " ".join(other.with_suffix(".pub").read_text().split()[:2])
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:{sshd.port} {pub}\n")
    before = kh.read_text()
    for accept in (False, True):
        host = sshd.make_host("target", config=[str(_config(sshd, tmp_path, known_hosts=kh))], accept_new_host_key=accept)
        with pytest.raises(ChangedHostKey, match="attack"):
            await host.connect(timeout=10)
        assert host.state.kind == "failed"
        await host.close()
    assert kh.read_text() == before


async def test_auth_failure_is_final_and_not_retried(sshd: SshdServer, tmp_path: Path) -> None:
    import subprocess

    stranger = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(stranger)], check=True)
    host = sshd.make_host("target", config=[str(_config(sshd, tmp_path, key=stranger))])
    states: list[Any] = []
    host.add_state_listener(states.append)
    attempts_before = sshd.log_text().count("Connection from 127.0.0.1")
    with pytest.raises(AuthFailed, match="refused"):
        await host.connect(timeout=10)
    await asyncio.sleep(0.6)  # longer than the whole backoff ladder used in tests
    assert sshd.log_text().count("Connection from 127.0.0.1") == attempts_before + 1
    assert [s.kind for s in states] == ["connecting", "failed"]
    with pytest.raises(AuthFailed):
        await host.run(["true"])
    await host.close()


async def test_unreachable_host_fails_first_connect_and_backs_off_with_a_cap(sshd: SshdServer, tmp_path: Path) -> None:
    port = free_port()  # nothing listens there, and no other worker's server is handed it
    host = SSHHost(f"127.0.0.1:{port}", known_hosts=str(sshd.known_hosts), client_keys=[str(sshd.client_key)],
                   agent_path=None, config=[], backoff_initial=0.05, backoff_cap=0.2)
    with pytest.raises(ConnectionLost, match="refused"):
        await host.connect()
    assert host.state.kind == "failed"
    states: list[Any] = []
    host.add_state_listener(states.append)
    with pytest.raises(ConnectionLost):
        await host.connect(timeout=1.2, retry=True)
    waits = [s.wait_s for s in states if s.kind == "reconnecting"]
    assert len(waits) >= 4
    assert waits[:3] == [0.05, 0.1, 0.2] and max(waits) == 0.2  # doubling, capped
    assert [s.attempt for s in states if s.kind == "reconnecting"][:3] == [1, 2, 3]
    await host.close()


async def test_reconnects_after_the_connection_is_killed(sshd: SshdServer, ssh_host_factory: Any, tmp_path: Path) -> None:
    host = await ssh_host_factory()
    states: list[str] = []
    host.add_state_listener(lambda s: states.append(s.kind))
    first = host.generation
    assert sshd.kill_connection(host.local_port)
    res = await host.run(["echo", "back"], timeout=20)
    assert res.stdout == "back\n"
    assert host.generation == first + 1
    assert states[0] == "reconnecting" and states[-1] == "connected"


async def test_follow_survives_an_outage_longer_than_the_backoff_cap(sshd: SshdServer, ssh_host_factory: Any, tmp_path: Path) -> None:
    host = await ssh_host_factory(backoff_initial=0.05, backoff_cap=0.2)
    log = tmp_path / "server.log"
    log.write_text("")
    states: list[Any] = []
    host.add_state_listener(states.append)
    got: list[str] = []
    fol = host.follow(str(log), start="begin")

    async def consume() -> None:
        async for item in fol:
            if isinstance(item, FollowBatch):
                got.extend(item.lines)
                if got and got[-1] == "30":
                    return

    task = asyncio.ensure_future(consume())
    try:
        with open(log, "a") as f:
            for i in range(1, 11):
                f.write(f"{i}\n")
        for _ in range(200):
            if len(got) >= 10:
                break
            await asyncio.sleep(0.02)
        sshd.stop()
        with open(log, "a") as f:
            for i in range(11, 21):
                f.write(f"{i}\n")
        await asyncio.sleep(1.0)  # five times the cap: several capped retries
        waits = [s.wait_s for s in states if s.kind == "reconnecting"]
        assert waits[:3] == [0.05, 0.1, 0.2] and waits.count(0.2) >= 2 and max(waits) == 0.2
        assert [s.attempt for s in states if s.kind == "reconnecting"][:4] == [1, 2, 3, 4]
        sshd.start()
        with open(log, "a") as f:
            for i in range(21, 31):
                f.write(f"{i}\n")
        await asyncio.wait_for(task, 20)
    finally:
        sshd.start()
        task.cancel()
        await fol.aclose()
    assert got == [str(i) for i in range(1, 31)]
    assert host.state.kind == "connected"


async def test_proxyjump_through_a_bastion(sshd: SshdServer, sshd_bastion: SshdServer) -> None:
    accepted = sshd_bastion.log_text().count("Accepted publickey")
    host = sshd.make_host("eagle3-test-via-bastion", config=[str(sshd_bastion.ssh_config)])
    try:
        await host.connect(timeout=20)
        res = await host.run(["sh", "-c", 'echo "$SSH_CONNECTION"'])
        assert res.exit_code == 0
        # the target saw the connection coming from the bastion's side of loopback
        assert res.stdout.split()[2:4] == ["127.0.0.1", str(sshd.port)]
        assert sshd_bastion.log_text().count("Accepted publickey") == accepted + 1
        assert re.search(r"direct-tcpip|Accepted publickey", sshd_bastion.log_text())
    finally:
        await host.close()


async def test_forwarded_port_survives_a_reconnect(sshd: SshdServer, ssh_host_factory: Any) -> None:
    import http.server
    import threading

    import httpx

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *a: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host = await ssh_host_factory()
    try:
        port = await host.forward(server.server_address[1])
        async with httpx.AsyncClient(timeout=5) as client:
            assert (await client.get(f"http://127.0.0.1:{port}/")).text == "ok"
        gen = host.generation
        assert sshd.kill_connection(host.local_port)
        await host.connect(timeout=20, retry=True)
        async with httpx.AsyncClient(timeout=5) as client:  # same local port, new SSH connection
            assert (await client.get(f"http://127.0.0.1:{port}/")).text == "ok"
        assert host.generation > gen
        assert await host.forward(server.server_address[1]) == port
    finally:
        server.shutdown()
        server.server_close()


async def test_follow_without_python_on_the_host_polls_over_sftp(ssh_host_factory: Any, tmp_path: Path) -> None:
    from eagle3_tui.remote import FollowEvent

    host = await ssh_host_factory(python="/nonexistent/python3")
    log = tmp_path / "server.log"
    log.write_text("a1\na2\npar")

    async def take(fol: Any, want: str) -> tuple[list[str], list[str]]:
        lines: list[str] = []
        kinds: list[str] = []

        async def go() -> None:
            async for item in fol:
                if isinstance(item, FollowEvent):
                    kinds.append(item.kind)
                else:
                    lines.extend(item.lines)
                    if want in lines:
                        return

        await asyncio.wait_for(go(), 30)
        return lines, kinds

    async with host.follow(str(log), start="begin") as fol:
        lines, kinds = await take(fol, "a2")
        assert lines == ["a1", "a2"] and kinds == ["opened"]
        with open(log, "a") as f:
            f.write("tial\n")
        log.rename(tmp_path / "server.log.1")
        log.write_text("b1\n")
        lines, kinds = await take(fol, "b1")
        assert lines == ["partial", "b1"] and kinds == ["rotated"]
    cursor = fol.cursor
    # while nobody follows: the file is rotated again, with a late write to the rotated one
    with open(log, "a") as f:
        f.write("b2\n")
    log.rename(tmp_path / "server.log.2")
    with open(tmp_path / "server.log.2", "a") as f:
        f.write("b3-late\n")
    log.write_text("c1\n")
    async with host.follow(str(log), cursor) as fol:
        lines, kinds = await take(fol, "c1")
    assert lines == ["b2", "b3-late", "c1"] and kinds == ["rotated"]


def _ps_args() -> list[str]:
    import subprocess

    return subprocess.run(["ps", "-ww", "-eo", "args="], capture_output=True, text=True, check=True).stdout.splitlines()


async def test_stream_process_ends_when_the_connection_drops(sshd: SshdServer, ssh_host_factory: Any) -> None:
    import sys
    import uuid

    host = await ssh_host_factory()
    token = uuid.uuid4().hex
    sleeper = "import time; print('up', flush=True); time.sleep(300)"
    async with host.stream([sys.executable, "-c", sleeper, token]) as s:
        assert await asyncio.wait_for(s.__anext__(), 20) == "up"
        assert any(token in a for a in _ps_args())
        assert sshd.kill_connection(host.local_port)
        with pytest.raises(ConnectionLost):
            await asyncio.wait_for(s.__anext__(), 20)
    for _ in range(100):
        if not any(token in a for a in _ps_args()):
            break
        await asyncio.sleep(0.05)
    assert not any(token in a for a in _ps_args())


async def test_detached_group_survives_disconnect_and_is_stopped_later(sshd: SshdServer, ssh_host_factory: Any, tmp_path: Path) -> None:
    import sys

    stubborn = "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True)\ntime.sleep(300)\n"
    host = await ssh_host_factory()
    log = tmp_path / "srv.log"
    pgid = await host.spawn_detached([sys.executable, "-u", "-c", stubborn], cwd=str(tmp_path), log_path=str(log))
    sshd.kill_connection(host.local_port)  # the connection that started it is gone ...
    await host.close()  # ... and so is the client
    await asyncio.sleep(0.3)
    other = await ssh_host_factory()
    assert [p.pid for p in await other.processes() if p.pgid == pgid] == [pgid]  # still running
    assert "ready" in log.read_text()
    assert await other.stop_group(pgid, grace=0.3) == "killed"
    assert not [p for p in await other.processes() if p.pgid == pgid]


async def test_keepalive_detects_a_silent_connection_and_reconnects(sshd: SshdServer, ssh_host_factory: Any) -> None:
    """The server stops answering without closing TCP (a black hole): only keepalives notice."""
    import os
    import signal

    host = await ssh_host_factory(keepalive_interval=0.3, keepalive_count_max=2)
    states: list[str] = []
    host.add_state_listener(lambda s: states.append(s.kind))
    gen = host.generation
    frozen = sshd.kill_connection(host.local_port, signal.SIGSTOP)
    assert frozen
    try:
        res = await host.run(["echo", "alive"], timeout=30)
    finally:
        for pid in frozen:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    assert res.stdout == "alive\n"
    assert host.generation == gen + 1
    assert "reconnecting" in states


async def test_default_ssh_config_and_known_hosts_are_honoured(sshd: SshdServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With no config argument, ~/.ssh/config (alias, HostName, Port, User, IdentityFile) and
    ~/.ssh/known_hosts are used, as ssh(1) would."""
    import shutil
    import sys

    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True, mode=0o700)
    shutil.copy(sshd.client_key, home / ".ssh" / "id_test")
    (home / ".ssh" / "config").write_text(
        f"Host gpu-box\n    HostName 127.0.0.1\n    Port {sshd.port}\n    User {sshd.user}\n"
        "    IdentityFile ~/.ssh/id_test\n    IdentitiesOnly yes\n"
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    host = SSHHost("gpu-box", python=sys.executable)
    with pytest.raises(UnknownHostKey):  # no ~/.ssh/known_hosts yet
        await host.connect(timeout=10)
    await host.close()
    host = SSHHost("gpu-box", python=sys.executable, accept_new_host_key=True)
    try:
        await host.connect(timeout=10)
        assert (await host.run(["echo", "via ~/.ssh/config"])).stdout == "via ~/.ssh/config\n"
    finally:
        await host.close()
    assert sshd.host_public_key_line() in (home / ".ssh" / "known_hosts").read_text()
