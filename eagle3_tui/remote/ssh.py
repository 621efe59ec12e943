"""`SSHHost`: the contract over one supervised asyncssh connection.

One supervisor task owns the connection: it connects (honouring ~/.ssh/config: Host aliases,
HostName, User, Port, IdentityFile, ProxyJump; the agent; known_hosts), publishes its `ConnState`,
and when the connection drops reconnects with exponential backoff capped at `backoff_cap` (20 s).
Host-key and authentication failures are final (`failed`), never retried. Every operation waits
for the current connection; follows resume from their cursors after a reconnect.

Remote processes are made to end with their channel (research/ssh.md §1.5-1.6: closing a channel
does not stop a process, and SSH signals are refused for root on OpenSSH < 10): `run` learns the
command's process group (`printf $$; exec ...`) and kills it out of band on timeout, cancel or
close; `stream` and the follower run under a stdin-EOF watchdog.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import posixpath
import shlex
import stat as statmod
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import asyncssh

from eagle3_tui.remote import faults
from eagle3_tui.remote.atomic import write_atomic
from eagle3_tui.remote.errors import (
    AuthFailed,
    ChangedHostKey,
    CommandTimeout,
    ConnectionLost,
    HostError,
    HostKeyError,
    RemoteFileNotFound,
    UnknownHostKey,
)
from eagle3_tui.remote.host import Host
from eagle3_tui.remote.sftp_follow import SftpPoller, sftp_read
from eagle3_tui.remote.stream import STDERR_KEEP, ProcChannel
from eagle3_tui.remote.tasks import wait_for
from eagle3_tui.remote.types import ConnState, FileStat, FollowCursor, RunResult, WriteResult

# asyncssh logs connection failures; with no handler configured Python would print warnings to
# stderr, straight over the terminal UI. They still propagate to handlers the app installs.
logging.getLogger("asyncssh").addHandler(logging.NullHandler())

_TRANSIENT = (OSError, asyncssh.Error, asyncio.TimeoutError, TimeoutError, EOFError)
_LOST = (
    asyncssh.ConnectionLost,
    asyncssh.DisconnectError,
    asyncssh.ChannelOpenError,
    BrokenPipeError,
    ConnectionError,
    EOFError,
)


def quote_argv(argv: Sequence[str]) -> str:
    """One POSIX shell word per argument: spaces, quotes, `;`, `$(...)` and newlines stay data."""
    if not argv:
        raise HostError("Nothing to run: the command is empty.")
    return " ".join(shlex.quote(str(a)) for a in argv)


def command_line(argv: Sequence[str], cwd: str | None, *, report_pgid: bool) -> str:
    """The line the login shell runs: optional `cd`, optional pgid report, then `exec` argv."""
    parts = []
    if report_pgid:
        parts.append("printf '%s\\n' \"$$\"")
    if cwd is not None:
        parts.append(f"cd -- {shlex.quote(cwd)}")
    parts.append("exec " + quote_argv(argv))
    return " && ".join(parts)


class _KeyCheckingClient(asyncssh.SSHClient):
    """Sees the host key asyncssh could not match, so an unknown key and a changed key are told
    apart (asyncssh raises the same HostKeyNotVerifiable for both); records new keys on request."""

    def __init__(self, owner: SSHHost) -> None:
        self._owner = owner

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        return self._owner._judge_host_key(host, addr, port, key)


class SSHChannel:
    """An SSH session channel (`exec`) as a `ProcChannel`."""

    def __init__(self, host: SSHHost, conn: asyncssh.SSHClientConnection, proc: Any) -> None:
        self._host = host
        self._conn = conn
        self.proc = proc
        self._err: list[str] = []
        self._err_len = 0
        self._err_task = asyncio.ensure_future(self._read_err())
        self._closed = False

    async def _read_err(self) -> None:
        with contextlib.suppress(*_LOST, asyncio.CancelledError):
            while chunk := await self.proc.stderr.read(65536):
                self._err.append(chunk)
                self._err_len += len(chunk)
                while self._err_len > STDERR_KEEP and len(self._err) > 1:
                    self._err_len -= len(self._err.pop(0))

    async def readline(self) -> str:
        line = ""
        try:
            # asyncssh hands back part of a line when its receive buffer fills: join the parts
            while True:
                part = await self.proc.stdout.readline()
                line += part
                if not part or line.endswith("\n"):
                    break
        except _LOST as exc:
            raise ConnectionLost(f"Lost the connection to {self._host.name}.") from exc
        if line == "" and self._conn.is_closed():
            raise ConnectionLost(f"Lost the connection to {self._host.name}.")
        return line

    async def wait(self) -> int:
        try:
            res = await wait_for(self.proc.wait(), 10)
        except (*_LOST, asyncio.TimeoutError) as exc:
            raise ConnectionLost(f"Lost the connection to {self._host.name}.") from exc
        with contextlib.suppress(asyncio.TimeoutError):
            await wait_for(asyncio.shield(self._err_task), 2)
        if res.exit_status is None and res.exit_signal is None:
            raise ConnectionLost(f"Lost the connection to {self._host.name}.")
        rc = res.returncode if res.returncode is not None else -1
        return rc if rc >= 0 else 128 - rc

    def stderr_text(self) -> str:
        return "".join(self._err)

    async def close(self) -> None:
        """EOF on stdin (the watchdog and the follower exit on it), then close the channel; bounded."""
        if self._closed:
            return
        self._closed = True
        try:
            if not self._conn.is_closed():
                with contextlib.suppress(Exception):
                    self.proc.stdin.write_eof()
                try:
                    await asyncio.wait_for(self.proc.wait_closed(), 3)
                except (asyncio.TimeoutError, *_LOST):
                    with contextlib.suppress(Exception):
                        self.proc.close()
                    with contextlib.suppress(BaseException):
                        await asyncio.wait_for(self.proc.wait_closed(), 2)
        finally:
            self._err_task.cancel()
            with contextlib.suppress(BaseException):
                await self._err_task
            self._host._channels.discard(self)


class _SftpHeld:
    """An SFTP handle kept open through a write (`atomic.HeldFile`): the host's sftp-server keeps the
    file open, so reads go to that file even after a rename over its name."""

    def __init__(self, f: asyncssh.SFTPClientFile) -> None:
        self._f = f

    async def read(self) -> bytes:
        chunks, pos = [], 0
        while chunk := await sftp_read(self._f, 1 << 20, pos):
            chunks.append(chunk)
            pos += len(chunk)
        return b"".join(chunks)

    async def close(self) -> None:
        await self._f.close()


class SftpFileOps:
    """`atomic.FileOps` over one SFTP session. Errors stay asyncssh's: `SSHHost._sftp_call` turns
    them into one sentence (and retries once after a dropped connection)."""

    def __init__(self, sftp: asyncssh.SFTPClient) -> None:
        self.sftp = sftp

    async def realpath(self, path: str) -> str:
        try:
            return str(await self.sftp.realpath(path))
        except asyncssh.SFTPError:
            return path

    async def read_or_none(self, path: str) -> bytes | None:
        try:
            async with self.sftp.open(path, "rb") as f:
                return await sftp_read(f)
        except asyncssh.SFTPNoSuchFile:
            return None

    async def hold(self, path: str) -> _SftpHeld | None:
        try:
            return _SftpHeld(await self.sftp.open(path, "rb"))
        except asyncssh.SFTPNoSuchFile:
            return None

    async def mode(self, path: str) -> int:
        return statmod.S_IMODE((await self.sftp.stat(path)).permissions or 0o644)

    async def lexists(self, path: str) -> bool:
        return bool(await self.sftp.lexists(path))

    async def write_new(self, path: str, data: bytes, mode: int) -> None:
        async with self.sftp.open(path, "xb", attrs=asyncssh.SFTPAttrs(permissions=mode)) as f:
            await f.write(data)
            faults.hit("after-temp")
            await f.fsync()
        await self.sftp.chmod(path, mode)  # the host's umask may have cleared bits

    async def keep_copy(self, src: str, dst: str, data: bytes, mode: int) -> None:
        try:
            await self.sftp.link(src, dst)
        except asyncssh.SFTPError:
            async with self.sftp.open(dst, "xb", attrs=asyncssh.SFTPAttrs(permissions=mode)) as f:
                await f.write(data)
                await f.fsync()

    async def rename(self, src: str, dst: str) -> None:
        await self.sftp.posix_rename(src, dst)

    async def remove(self, path: str) -> None:
        await self.sftp.remove(path)

    async def fsync_dir(self, path: str) -> None:
        """Open the directory read-only and send fsync@openssh.com on that handle: OpenSSH's
        sftp-server calls fsync(2) on it. Servers without the extension leave it to the kernel."""
        with contextlib.suppress(asyncssh.SFTPError):
            async with self.sftp.open(path, "rb") as d:
                await d.fsync()

    async def list_dir(self, path: str) -> list[tuple[str, float]]:
        return [(str(e.filename), float(e.attrs.mtime or 0)) for e in await self.sftp.readdir(path)
                if e.filename not in (".", "..")]


class SSHHost(Host):
    """A host over SSH. `target` is an ssh_config alias or `[user@]host[:port]`.

    accept_new_host_key: record an unknown host key in known_hosts (never a changed one).
    config: ssh_config paths (default: ~/.ssh/config). python: the host's interpreter for the
    shipped scripts. backoff_initial/backoff_cap: reconnect delays (s). Other keywords go to
    `asyncssh.connect` and override the config (e.g. `agent_path=None`, `known_hosts=...`).
    """

    def __init__(
        self,
        target: str,
        *,
        accept_new_host_key: bool = False,
        config: Sequence[str] | None = None,
        python: str = "python3",
        connect_timeout: float = 20.0,
        keepalive_interval: float = 15.0,
        keepalive_count_max: int = 3,
        backoff_initial: float = 0.5,
        backoff_cap: float = 20.0,
        **connect_options: Any,
    ) -> None:
        super().__init__()
        self.name = target
        self.python = python
        self._host_arg, user, port = _split_target(target)
        if user and "username" not in connect_options:
            connect_options["username"] = user
        if port and "port" not in connect_options:
            connect_options["port"] = port
        self._config = list(config) if config is not None else None
        self._accept_new = accept_new_host_key
        self._connect_timeout = connect_timeout
        self._keepalive = (keepalive_interval, keepalive_count_max)
        self._backoff = (backoff_initial, backoff_cap)
        self._options = connect_options
        self._state = ConnState("connecting")
        self._conn: asyncssh.SSHClientConnection | None = None
        self._sftp_client: asyncssh.SFTPClient | None = None
        self._sftp_conn: asyncssh.SSHClientConnection | None = None
        self._sftp_lock = asyncio.Lock()
        self._ready = asyncio.Event()
        self._first_failure = asyncio.Event()
        self._fatal: HostError | None = None
        self._key_verdict: HostError | None = None
        self._supervisor: asyncio.Task[None] | None = None
        self._closed = False
        self._channels: set[SSHChannel] = set()
        self._inflight: set[int] = set()
        self._forwards: dict[int, tuple[asyncio.Server, int]] = {}
        self._pumps: set[asyncio.Task[None]] = set()
        self.generation = 0
        self.last_error = ""

    # ---- supervisor ----------------------------------------------------------------------------
    def _resolved(self) -> asyncssh.SSHClientConnectionOptions:
        kw = {k: v for k, v in self._options.items() if k in ("username", "port", "known_hosts")}
        return asyncssh.SSHClientConnectionOptions(
            config=self._config if self._config is not None else (), host=self._host_arg, **kw
        )

    def _known_hosts_files(self) -> list[str]:
        given = self._options.get("known_hosts", ())
        if isinstance(given, str):
            return [given]
        if isinstance(given, list | tuple) and given and all(isinstance(x, str) for x in given):
            return list(given)
        try:
            files = self._resolved().known_hosts
        except Exception:
            files = None
        if isinstance(files, list) and files:
            return [str(f) for f in files]
        return [str(Path("~/.ssh/known_hosts").expanduser())]

    def _judge_host_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        """Called by asyncssh only for a key not already trusted: unknown or changed?"""
        files = self._known_hosts_files()
        data = b""
        for f in files:
            with contextlib.suppress(OSError):
                data += Path(f).read_bytes() + b"\n"
        p = None if port == 22 else port
        trusted = asyncssh.match_known_hosts(data, host, addr, p)[0] if data.strip() else []
        fp = key.get_fingerprint()
        where = f"[{host}]:{port}" if p else host
        if trusted:
            self._key_verdict = ChangedHostKey(
                f"The host key of {where} CHANGED (now {fp}); this may be an attack (man-in-the-middle). "
                f"Nothing was sent. If the host was reinstalled, remove its old line from {files[0]} and verify "
                "the new key."
            )
            return False
        if self._accept_new:
            line = f"{where} {key.export_public_key().decode().strip()}\n"
            path = Path(files[0])
            path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(line)
            return True
        self._key_verdict = UnknownHostKey(
            f"The host key of {where} is unknown ({fp}). Verify it, then connect once with "
            "--accept-new-host-key (or ssh to it) to record it."
        )
        return False

    async def _connect_once(self) -> asyncssh.SSHClientConnection:
        kw: dict[str, Any] = dict(self._options)
        try:
            opts = self._resolved()
        except Exception as exc:
            raise HostError(f"Cannot read the SSH configuration for {self.name}: {exc}") from exc
        if not opts.keepalive_interval and "keepalive_interval" not in kw:
            kw["keepalive_interval"] = self._keepalive[0]
            kw.setdefault("keepalive_count_max", self._keepalive[1])
        if not opts.connect_timeout and "connect_timeout" not in kw:
            kw["connect_timeout"] = self._connect_timeout
        if self._config is not None:
            kw["config"] = self._config
        given = kw.get("known_hosts", ())
        if given == () or isinstance(given, str) or (isinstance(given, list) and all(isinstance(x, str) for x in given)):
            # OpenSSH reads a missing known_hosts as empty; asyncssh would raise FileNotFoundError
            present = [f for f in self._known_hosts_files() if Path(f).is_file()]
            kw["known_hosts"] = present or asyncssh.import_known_hosts("")
        self._key_verdict = None
        try:
            conn, _ = await asyncssh.create_connection(
                lambda: _KeyCheckingClient(self), self._host_arg, **kw
            )
        except asyncssh.HostKeyNotVerifiable as exc:
            if self._key_verdict is not None:
                raise self._key_verdict from None
            raise HostKeyError(f"The host key of {self.name} (or of a jump host) could not be verified: {exc}") from None
        except asyncssh.PermissionDenied:
            user = opts.username
            raise AuthFailed(
                f"{opts.host} refused every key we offered for user {user}; check User/IdentityFile in "
                "~/.ssh/config or ssh-add your key."
            ) from None
        except asyncssh.KeyImportError as exc:
            raise AuthFailed(f"Cannot load the SSH key for {self.name}: {exc}") from None
        return conn

    def _ensure_started(self) -> None:
        if self._closed:
            raise HostError(f"The connection to {self.name} is closed.")
        if self._supervisor is None:
            self._supervisor = asyncio.get_running_loop().create_task(self._supervise())

    async def _supervise(self) -> None:
        """Own the connection: connect, wait for it to drop, back off (doubling up to the cap),
        reconnect. `reconnecting(n, wait)` announces retry n after `wait` seconds."""
        initial, cap = self._backoff
        delay = initial
        retry = 0
        ever = False
        while not self._closed:
            if not ever and retry == 0:
                self._set_state(ConnState("connecting", attempt=1))
            try:
                conn = await self._connect_once()
            except HostError as exc:  # host key, authentication, unreadable config: the user must act
                self._fatal = exc
                self._set_state(ConnState("failed", attempt=retry + 1, reason=str(exc)))
                self._ready.set()
                return
            except _TRANSIENT as exc:
                self.last_error = _describe(exc)
                if not ever:
                    self._first_failure.set()
                retry += 1
                self._set_state(ConnState("reconnecting", attempt=retry, wait_s=delay, reason=self.last_error))
                await asyncio.sleep(delay)
                delay = min(delay * 2, cap)
                continue
            if self._closed:
                conn.close()
                return
            ever = True
            retry = 0
            delay = initial
            self._conn = conn
            self.generation += 1
            self._set_state(ConnState("connected"))
            self._ready.set()
            await conn.wait_closed()
            self._ready.clear()
            self._conn = None
            if self._closed:
                return
            self.last_error = "connection lost"
            retry = 1
            self._set_state(ConnState("reconnecting", attempt=retry, wait_s=delay, reason=self.last_error))
            await asyncio.sleep(delay)
            delay = min(delay * 2, cap)

    async def _get_conn(self, timeout: float | None = None) -> asyncssh.SSHClientConnection:
        self._ensure_started()
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._fatal is not None:
                raise self._fatal
            if self._closed:
                raise HostError(f"The connection to {self.name} is closed.")
            conn = self._conn
            if conn is not None and not conn.is_closed():
                return conn
            if conn is not None:
                self._ready.clear()
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise ConnectionLost(
                    f"Not connected to {self.name}" + (f" ({self.last_error})." if self.last_error else ".")
                )
            try:
                await wait_for(self._ready.wait(), left)
            except asyncio.TimeoutError:
                continue

    async def connect(self, timeout: float | None = None, *, retry: bool = False) -> None:
        """Start the supervisor and wait for the connection.

        Host-key and authentication failures raise at once. If the host cannot be reached on the
        first try, `ConnectionLost` is raised (and the supervisor stopped) unless `retry=True`, which
        keeps trying (state `reconnecting`) until connected or `timeout`. Once connected, drops are
        always retried in the background.
        """
        if self.generation or retry:
            await self._get_conn(timeout)
            return
        self._first_failure.clear()
        self._ensure_started()
        waiter = asyncio.ensure_future(self._get_conn(timeout))
        failed = asyncio.ensure_future(self._first_failure.wait())
        try:
            await asyncio.wait({waiter, failed}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            failed.cancel()
        if waiter.done():
            waiter.result()
            return
        waiter.cancel()
        with contextlib.suppress(BaseException):
            await waiter
        if self._supervisor is not None and not self.generation:
            self._supervisor.cancel()
            with contextlib.suppress(BaseException):
                await self._supervisor
            self._supervisor = None
            self._set_state(ConnState("failed", attempt=1, reason=self.last_error))
        raise ConnectionLost(f"Cannot reach {self.name}: {self.last_error}.")

    async def wait_connected(self) -> None:
        await asyncio.sleep(0.01)  # let the supervisor notice a drop before we look
        await self._get_conn()

    @property
    def local_port(self) -> int | None:
        """This side's TCP port of the current connection (tests use it to cut the connection)."""
        conn = self._conn
        if conn is None or conn.is_closed():
            return None
        sock = conn.get_extra_info("sockname")
        return int(sock[1]) if sock and sock[1] else None

    # ---- commands ----------------------------------------------------------------------------------
    async def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        timeout: float = 60.0,
        check: bool = False,
    ) -> RunResult:
        cmd = command_line(argv, cwd, report_pgid=True)
        deadline = time.monotonic() + timeout
        conn, proc = await self._start_process(cmd, deadline, stdin=asyncssh.DEVNULL, encoding=None)
        pgid: int | None = None

        async def body() -> tuple[bytes, bytes, Any]:
            nonlocal pgid
            first = await proc.stdout.readline()
            with contextlib.suppress(ValueError):
                pgid = int(first.strip() or b"0") or None
            if pgid:
                self._inflight.add(pgid)
            out, err = await asyncio.gather(proc.stdout.read(), proc.stderr.read())
            return out, err, await proc.wait()

        try:
            out, err, res = await wait_for(body(), max(0.0, deadline - time.monotonic()))  # see tasks.py
        except BaseException as exc:
            with contextlib.suppress(BaseException):
                await asyncio.shield(self._kill_group(conn, pgid))
            proc.close()
            if isinstance(exc, asyncio.TimeoutError | TimeoutError):
                raise CommandTimeout(f"{argv[0]} on {self.name} took longer than {timeout:g} s and was stopped.") from None
            if isinstance(exc, _LOST):
                raise ConnectionLost(f"Lost the connection to {self.name}.") from exc
            raise
        finally:
            if pgid:
                self._inflight.discard(pgid)
        if res.exit_status is None and res.exit_signal is None:
            raise ConnectionLost(f"Lost the connection to {self.name} while running {argv[0]}.")
        rc = res.returncode if res.returncode is not None else -1
        result = RunResult(
            rc if rc >= 0 else 128 - rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
        )
        if check and result.exit_code != 0:
            raise HostError(f"{argv[0]} failed on {self.name} (exit {result.exit_code}): {result.stderr.strip()[-500:]}")
        return result

    async def _start_process(self, cmd: str, deadline: float | None, **kw: Any) -> tuple[Any, Any]:
        """Open a session channel running `cmd`; if the connection turns out dead before the
        command started, wait for the supervisor's next connection and try again (until deadline)."""
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            conn = await self._get_conn(left)
            try:
                return conn, await conn.create_process(cmd, **kw)
            except _LOST as exc:
                if isinstance(exc, asyncssh.ChannelOpenError) and not conn.is_closed() and "closed" not in str(exc):
                    raise HostError(f"{self.name} refused a new SSH session ({exc.reason}); too many open?") from exc
                if deadline is not None and time.monotonic() >= deadline:
                    raise ConnectionLost(f"Lost the connection to {self.name}.") from exc
                await asyncio.sleep(0.05)

    async def _kill_group(self, conn: asyncssh.SSHClientConnection, pgid: int | None) -> None:
        if not pgid or pgid < 2 or conn.is_closed():
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(conn.run(f"kill -s KILL -- -{pgid}", stdin=asyncssh.DEVNULL), 5)

    async def open_channel(self, argv: Sequence[str], *, cwd: str | None = None) -> ProcChannel:
        conn, proc = await self._start_process(
            command_line(argv, cwd, report_pgid=False), None, encoding="utf-8", errors="replace"
        )
        chan = SSHChannel(self, conn, proc)
        self._channels.add(chan)
        return chan

    # ---- files (SFTP) -------------------------------------------------------------------------
    async def _sftp(self) -> asyncssh.SFTPClient:
        async with self._sftp_lock:
            conn = await self._get_conn(60)
            if self._sftp_client is None or self._sftp_conn is not conn:
                try:
                    self._sftp_client = await conn.start_sftp_client()
                except _LOST as exc:
                    raise ConnectionLost(f"Lost the connection to {self.name}.") from exc
                except asyncssh.Error as exc:
                    raise HostError(f"{self.name} offers no SFTP: {exc}") from exc
                self._sftp_conn = conn
            return self._sftp_client

    async def _sftp_call(self, path: str, what: str, fn: Any) -> Any:
        for attempt in range(2):
            sftp = await self._sftp()
            try:
                return await fn(sftp)
            except asyncssh.SFTPNoSuchFile:
                raise RemoteFileNotFound(f"{path} does not exist on {self.name}.") from None
            except asyncssh.SFTPError as exc:
                raise HostError(f"Cannot {what} {path} on {self.name}: {exc.reason}.") from None
            except _LOST:
                self._sftp_client = None
                if attempt:
                    raise ConnectionLost(f"Lost the connection to {self.name}.") from None
                await self.wait_connected()
        raise AssertionError("unreachable")

    async def read_bytes(self, path: str) -> bytes:
        async def go(sftp: asyncssh.SFTPClient) -> bytes:
            # Read to EOF in blocks: a plain read() trusts the stat size, which is 0 for /proc files.
            chunks: list[bytes] = []
            async with sftp.open(path, "rb") as f:
                while chunk := await sftp_read(f, 1 << 20):
                    chunks.append(chunk)
            return b"".join(chunks)

        return await self._sftp_call(path, "read", go)

    async def stat(self, path: str) -> FileStat:
        async def go(sftp: asyncssh.SFTPClient) -> FileStat:
            a = await sftp.stat(path)
            perms = a.permissions or 0
            return FileStat(path, a.size or 0, float(a.mtime or 0), statmod.S_IMODE(perms), statmod.S_ISDIR(perms))

        return await self._sftp_call(path, "stat", go)

    async def glob(self, pattern: str) -> list[str]:
        async def go(sftp: asyncssh.SFTPClient) -> list[str]:
            try:
                found = await sftp.glob(pattern)
            except asyncssh.SFTPNoSuchFile:
                return []
            show_hidden = posixpath.basename(pattern).startswith(".")
            return sorted(
                str(p) for p in found if show_hidden or not posixpath.basename(str(p)).startswith(".")
            )

        return await self._sftp_call(pattern, "glob", go)

    async def write_atomic(self, path: str, data: bytes | str, *, expect_sha256: str | None) -> WriteResult:
        async def go(sftp: asyncssh.SFTPClient) -> WriteResult:
            return await write_atomic(SftpFileOps(sftp), path, data, expect_sha256)

        return await self._sftp_call(path, "write", go)

    # ---- follow without Python ----------------------------------------------------------------
    can_poll_files = True

    def poll_records(
        self, path: str, cursor: FollowCursor | None, mode: str, last_lines: int
    ) -> AsyncIterator[dict[str, Any]]:
        return SftpPoller(self, self._sftp, path, cursor, mode, last_lines).records()

    # ---- port forward ---------------------------------------------------------------------------
    async def forward(self, remote_port: int) -> int:
        """A local port on 127.0.0.1 that survives reconnects: each accepted TCP connection opens a
        direct-tcpip channel on the current SSH connection to 127.0.0.1:`remote_port` on the host."""
        remote_port = int(remote_port)
        if remote_port in self._forwards:
            return self._forwards[remote_port][1]
        await self._get_conn(60)

        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            # asyncio's stream server asks the handler task for its exception when it ends: a task
            # ended by cancellation would log "Exception in callback ... CancelledError", so the
            # cancellation `close()` sends ends the handler normally instead.
            with contextlib.suppress(asyncio.CancelledError):
                await self._serve_forward(remote_port, reader, writer)

        server = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = int(server.sockets[0].getsockname()[1])
        self._forwards[remote_port] = (server, port)
        return port

    async def _serve_forward(self, remote_port: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One accepted local connection: a direct-tcpip channel to the host port, bytes pumped both ways."""
        task = asyncio.current_task()
        if task is not None:
            self._pumps.add(task)
        r2 = w2 = None
        deadline = time.monotonic() + 30
        while r2 is None:
            try:
                conn = await self._get_conn(max(0.0, deadline - time.monotonic()))
                r2, w2 = await conn.open_connection("127.0.0.1", remote_port)
            except _LOST as exc:
                refused = isinstance(exc, asyncssh.ChannelOpenError) and "closed" not in str(exc)
                if not refused and time.monotonic() < deadline and not self._closed:
                    await asyncio.sleep(0.05)  # a dead connection not yet noticed: wait for the next
                    continue
                r2 = None
            except Exception:
                r2 = None
            if r2 is None:
                writer.close()
                if task is not None:
                    self._pumps.discard(task)
                return

        async def pump(src: Any, dst: Any) -> None:
            with contextlib.suppress(Exception):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            with contextlib.suppress(Exception):
                dst.write_eof()

        try:
            await asyncio.gather(pump(reader, w2), pump(r2, writer))
        finally:
            for w in (w2, writer):
                if w is not None:
                    with contextlib.suppress(Exception):
                        w.close()
            if task is not None:
                self._pumps.discard(task)

    # ---- close --------------------------------------------------------------------------------
    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        conn = self._conn
        await self._close_forwards()  # first the listeners and their pumps, then channels, then the connection
        if conn is not None and not conn.is_closed():
            await asyncio.gather(*(c.close() for c in list(self._channels)), return_exceptions=True)
            await asyncio.gather(*(self._kill_group(conn, pg) for pg in list(self._inflight)), return_exceptions=True)
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(BaseException):
                await self._supervisor
        if conn is not None:
            conn.close()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(conn.wait_closed(), 5)
        self._conn = None
        self._ready.set()
        self._set_state(ConnState("closed"))

    async def _close_forwards(self) -> None:
        """Stop accepting, end each pump (its sockets closed, its task finished), then drop the listeners."""
        servers = [server for server, _ in self._forwards.values()]
        self._forwards.clear()
        for server in servers:
            server.close()
        pumps = list(self._pumps)
        for task in pumps:
            task.cancel()
        if pumps:
            await asyncio.wait(pumps, timeout=2)
        for server in servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 2)


def _split_target(target: str) -> tuple[str, str | None, int | None]:
    """`[user@]host[:port]` -> (host, user, port); an alias stays as it is."""
    user = None
    host = target
    if "@" in host:
        user, host = host.rsplit("@", 1)
    port = None
    if host.count(":") == 1:
        h, p = host.split(":")
        if p.isdigit():
            host, port = h, int(p)
    elif host.startswith("[") and "]:" in host:
        h, p = host[1:].split("]:")
        if p.isdigit():
            host, port = h, int(p)
    return host, user, port


def _describe(exc: BaseException) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        return "timed out"
    text = str(exc) or type(exc).__name__
    return text


__all__ = ["SSHHost", "command_line", "quote_argv"]
