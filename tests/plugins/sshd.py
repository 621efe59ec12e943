"""A real OpenSSH `sshd` on 127.0.0.1 for tests (Debian `openssh-server`; skipped when absent).

Fixtures (imported by tests/conftest.py, so every test can use them by name):

- `sshd` (session): an `SshdServer` listening on 127.0.0.1 on a free port, started from a temp
  dir holding a fresh ed25519 host key, a client key with its authorized_keys, a known_hosts with
  the host key, and an ssh_config that defines a Host alias for it. Attributes: `host`
  ("127.0.0.1"), `port`, `user` (whoever runs the tests; root here and in CI), `dir`, `host_key`,
  `client_key` (private key path; `.pub` beside it), `known_hosts`, `ssh_config` (file path),
  `alias` ("eagle3-test-sshd"), `pid` (the listener), `log_path`. Methods: `make_host(target=alias,
  **kw)` (an unconnected `SSHHost` with the test defaults below; `await host.connect()`), `stop()`
  (listener and every connection it serves), `start()` (same port, keys and config),
  `kill_connection(local_port, sig=SIGKILL)` (signal the sshd process serving the client whose
  local TCP port is given: how tests cut a connection from the server side; SIGSTOP makes a black
  hole), `kill_connections()` (all of them), `connect_kwargs()` (plain asyncssh.connect keywords,
  no config file), `host_public_key_line()`, `log_text()`.
- `sshd_bastion` (session): a second sshd used as a ProxyJump bastion; `.ssh_config` defines
  `eagle3-test-bastion` and `eagle3-test-via-bastion` (the `sshd` target reached through it, with
  `ProxyJump eagle3-test-bastion`), plus the target alias.
- `ssh_host_factory` (function, async use): `await ssh_host_factory(target=alias, connect=True, **kw)`
  returns a connected `SSHHost` to `sshd` built by `sshd.make_host(...)` (alias + its ssh_config,
  `python=sys.executable` because the sshd session's PATH lacks the venv, agent off, fast backoff
  0.05..0.5 s unless overridden); every host it made is closed at teardown. Inside another async
  fixture, use the sync `sshd` fixture and `host = sshd.make_host(); await host.connect()` instead
  (pytest cannot resolve an async fixture from inside one via getfixturevalue).
- `ssh_host` (function): one connected `SSHHost` from that factory.
- `any_host` (function, parametrised "local"/"ssh"): runs a test on a `LocalHost` and on a
  connected `SSHHost` to `sshd`; closed at teardown.

A connected SSHHost exposes `local_port` (its TCP port on this side), so cutting its connection is
`sshd.kill_connection(host.local_port)`; the supervisor then reconnects. To test an outage longer
than the backoff cap: `sshd.stop()`, wait, `sshd.start()`.

As root, sshd needs /run/sshd (created here) and serves logins without privilege separation, so
SSH signals are refused (research/ssh.md §1.6): the host layer never relies on them.
"""

from __future__ import annotations

import contextlib
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.plugins.ports import free_port
from tests.plugins.proctable import descendants, process_table

__all__ = ["SSHD_BIN", "SshdServer", "any_host", "ssh_host", "ssh_host_factory", "sshd", "sshd_bastion", "start_sshd"]

SSHD_BIN = shutil.which("sshd") or "/usr/sbin/sshd"
ALIAS = "eagle3-test-sshd"
BASTION_ALIAS = "eagle3-test-bastion"
VIA_ALIAS = "eagle3-test-via-bastion"


def _host_block(alias: str, port: int, user: str, key: Path, known_hosts: Path, extra: str = "") -> str:
    return (
        f"Host {alias}\n"
        f"    HostName 127.0.0.1\n"
        f"    Port {port}\n"
        f"    User {user}\n"
        f"    IdentityFile {key}\n"
        f"    IdentitiesOnly yes\n"
        f"    UserKnownHostsFile {known_hosts}\n"
        f"{extra}"
    )


class SshdServer:
    """One sshd listener started from a directory of generated keys and config."""

    def __init__(self, root: Path, *, alias: str = ALIAS, extra_config: str = "") -> None:
        self.host = "127.0.0.1"
        self.dir = root
        self.alias = alias
        self.user = pwd.getpwuid(os.getuid()).pw_name
        self.port = free_port()
        self.host_key = root / "host_key"
        self.client_key = root / "client_key"
        self.known_hosts = root / "known_hosts"
        self.ssh_config = root / "ssh_config"
        self.log_path = root / "sshd.log"
        self.sshd_config = root / "sshd_config"
        self.proc: subprocess.Popen[bytes] | None = None
        for key in (self.host_key, self.client_key):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        (root / "authorized_keys").write_text((root / "client_key.pub").read_text())
        self.sshd_config.write_text(
            f"ListenAddress 127.0.0.1\nPort {self.port}\nHostKey {self.host_key}\n"
            f"PidFile {root}/sshd.pid\nAuthorizedKeysFile {root}/authorized_keys\n"
            "PubkeyAuthentication yes\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            "UsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\nAllowTcpForwarding yes\n"
            "MaxStartups 100\nMaxSessions 50\nSubsystem sftp internal-sftp\nLogLevel VERBOSE\n"
            # the test run's TMPDIR (tests/conftest.py) for the commands it serves, as a local one gets it
            + (f"SetEnv TMPDIR={os.environ['TMPDIR']}\n" if os.environ.get("TMPDIR") else "")
            + extra_config
        )
        pub = self.host_key.with_suffix(".pub").read_text().split()
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {pub[0]} {pub[1]}\n")
        self.ssh_config.write_text(
            _host_block(alias, self.port, self.user, self.client_key, self.known_hosts)
        )

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc and self.proc.poll() is None else None

    def host_public_key_line(self) -> str:
        """`type base64` of the host key."""
        return " ".join(self.host_key.with_suffix(".pub").read_text().split()[:2])

    def connect_kwargs(self) -> dict[str, Any]:
        return dict(
            port=self.port,
            username=self.user,
            known_hosts=str(self.known_hosts),
            client_keys=[str(self.client_key)],
            agent_path=None,
            config=None,
        )

    def make_host(self, target: str | None = None, **kw: Any) -> Any:
        """An unconnected SSHHost to this server with the test defaults (alias + ssh_config,
        python=sys.executable, agent off, backoff 0.05..0.5 s); keywords override them."""
        from eagle3_tui.remote.ssh import SSHHost

        kw.setdefault("config", [str(self.ssh_config)])
        kw.setdefault("python", sys.executable)
        kw.setdefault("backoff_initial", 0.05)
        kw.setdefault("backoff_cap", 0.5)
        kw.setdefault("agent_path", None)
        return SSHHost(target or self.alias, **kw)

    def write_profile(self, path: Path, **fields: Any) -> Path:
        """A hosts.toml naming this server's alias (its ssh_config, this Python on the host) with `fields`
        as TOML values (strings, numbers, lists)."""
        lines = [f'["{self.alias}"]', f"ssh_config = {json.dumps(str(self.ssh_config))}",
                 f"remote_python = {json.dumps(sys.executable)}"]
        lines += [f"{k} = {json.dumps(str(v) if isinstance(v, Path) else v)}" for k, v in fields.items()]
        path.write_text("\n".join(lines) + "\n")
        return path

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def start(self) -> None:
        if self.pid is not None:
            return
        if os.getuid() == 0:
            os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([SSHD_BIN, "-D", "-e", "-f", str(self.sshd_config)], stderr=log)
        log.close()
        deadline = time.monotonic() + 10
        while True:
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5) as s:
                    if s.recv(4).startswith(b"SSH-"):
                        return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("sshd did not start: " + self.log_text()[-2000:]) from None
                time.sleep(0.02)

    def _children(self) -> list[int]:
        """Processes below the listener (its connection processes and their descendants)."""
        if self.pid is None:
            return []
        return descendants(process_table(), self.pid)

    def _sshd_children(self) -> list[int]:
        out = []
        for pid in self._children():
            with contextlib.suppress(OSError):
                if os.readlink(f"/proc/{pid}/exe").endswith("sshd"):
                    out.append(pid)
        return out

    def kill_connection(self, local_port: int, sig: int = signal.SIGKILL) -> list[int]:
        """Signal (default SIGKILL) the sshd process(es) serving the client at
        127.0.0.1:`local_port`; returns their pids. SIGSTOP makes a silent black hole (the TCP
        connection stays up, nothing answers): SIGKILL those pids afterwards."""
        inodes = set()
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with contextlib.suppress(OSError):
                for line in Path(table).read_text().splitlines()[1:]:
                    f = line.split()
                    lport = int(f[1].rsplit(":", 1)[1], 16)
                    rport = int(f[2].rsplit(":", 1)[1], 16)
                    if lport == self.port and rport == local_port:
                        inodes.add(f"socket:[{f[9]}]")
        victims = []
        for pid in self._sshd_children():
            with contextlib.suppress(OSError):
                fds = os.listdir(f"/proc/{pid}/fd")
                if any(self._readlink(f"/proc/{pid}/fd/{fd}") in inodes for fd in fds):
                    victims.append(pid)
        for pid in victims:
            with contextlib.suppress(OSError):
                os.kill(pid, sig)
        return victims

    @staticmethod
    def _readlink(p: str) -> str:
        try:
            return os.readlink(p)
        except OSError:
            return ""

    def kill_connections(self) -> list[int]:
        victims = self._sshd_children()
        for pid in victims:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        return victims

    def stop(self) -> None:
        """Stop the listener and drop every connection it serves."""
        if self.proc is None:
            return
        self.kill_connections()
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def start_sshd(root: Path, **kw: Any) -> SshdServer:
    """Generate keys/config under `root` and start an sshd (skips the test if sshd is missing)."""
    if not os.path.exists(SSHD_BIN) or shutil.which("ssh-keygen") is None:
        pytest.skip("openssh-server/openssh-client are not installed (sshd or ssh-keygen missing)")
    srv = SshdServer(root, **kw)
    srv.start()
    return srv


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshdServer]:
    srv = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def sshd_bastion(sshd: SshdServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshdServer]:
    bastion = start_sshd(tmp_path_factory.mktemp("bastion"), alias=BASTION_ALIAS)
    cfg = bastion.dir / "ssh_config_jump"
    cfg.write_text(
        _host_block(BASTION_ALIAS, bastion.port, bastion.user, bastion.client_key, bastion.known_hosts)
        + _host_block(
            VIA_ALIAS, sshd.port, sshd.user, sshd.client_key, sshd.known_hosts, "    ProxyJump eagle3-test-bastion\n"
        )
        + _host_block(ALIAS, sshd.port, sshd.user, sshd.client_key, sshd.known_hosts)
    )
    bastion.ssh_config = cfg
    yield bastion
    bastion.stop()


@pytest.fixture
async def ssh_host_factory(sshd: SshdServer) -> AsyncIterator[Callable[..., Awaitable[Any]]]:
    made: list[Any] = []

    async def make(target: str = ALIAS, *, connect: bool = True, **kw: Any) -> Any:
        host = sshd.make_host(target, **kw)
        made.append(host)
        if connect:
            await host.connect(timeout=20)
        return host

    yield make
    for host in made:
        await host.close()


@pytest.fixture(params=["local", "ssh"])
async def any_host(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
    """The same test twice: on a LocalHost and on a connected SSHHost to `sshd`."""
    if request.param == "local":
        from eagle3_tui.remote.local import LocalHost

        host: Any = LocalHost()
    else:
        host = request.getfixturevalue("sshd").make_host()
        await host.connect(timeout=20)
    yield host
    await host.close()


@pytest.fixture
async def ssh_host(ssh_host_factory: Callable[..., Awaitable[Any]]) -> Any:
    return await ssh_host_factory()
