"""`LocalHost`: the same contract on this machine (the demo, or a console on the GPU box itself).

Commands run as subprocesses in their own session so a timeout or a close can end the whole group;
the follower and the stream watchdog are the very scripts SSHHost ships, run by this Python.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob as globmod
import hashlib
import os
import secrets
import shutil
import signal
import stat as statmod
import sys
import time
from collections.abc import Sequence

from eagle3_tui.remote.errors import CommandTimeout, FileChanged, HostError, RemoteFileNotFound
from eagle3_tui.remote.host import FileStat, Host, RunResult, WriteResult
from eagle3_tui.remote.stream import STDERR_KEEP, ProcChannel

READ_LIMIT = 16 * 1024 * 1024


def _killpg(pid: int, sig: int) -> None:
    with contextlib.suppress(OSError):
        os.killpg(pid, sig)


class LocalChannel:
    """A local subprocess (own session) with piped stdin/stdout/stderr."""

    def __init__(self, proc: asyncio.subprocess.Process, on_close: object = None) -> None:
        self.proc = proc
        self._err = bytearray()
        self._err_task = asyncio.ensure_future(self._read_err())
        self._on_close = on_close

    async def _read_err(self) -> None:
        assert self.proc.stderr is not None
        while chunk := await self.proc.stderr.read(65536):
            self._err += chunk
            if len(self._err) > STDERR_KEEP:
                del self._err[: len(self._err) - STDERR_KEEP]

    async def readline(self) -> str:
        assert self.proc.stdout is not None
        return (await self.proc.stdout.readline()).decode("utf-8", "replace")

    async def wait(self) -> int:
        rc = await self.proc.wait()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._err_task), 2)
        return rc if rc >= 0 else 128 - rc

    def stderr_text(self) -> str:
        return self._err.decode("utf-8", "replace")

    async def close(self) -> None:
        """EOF on stdin (the follower and the watchdog exit on it), then TERM, then KILL the group."""
        proc = self.proc
        if proc.returncode is None:
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
            for sig, wait in ((None, 2.0), (signal.SIGTERM, 2.0), (signal.SIGKILL, 5.0)):
                if sig is not None:
                    _killpg(proc.pid, sig)
                try:
                    await asyncio.wait_for(proc.wait(), wait)
                    break
                except asyncio.TimeoutError:
                    continue
        self._err_task.cancel()
        with contextlib.suppress(BaseException):
            await self._err_task
        if callable(self._on_close):
            self._on_close(self)


class LocalHost(Host):
    """This machine. `python` runs the shipped scripts (default: this interpreter)."""

    def __init__(self, *, python: str | None = None) -> None:
        super().__init__()
        self.python = python or sys.executable
        self.name = "local"
        self._channels: set[LocalChannel] = set()
        self._runs: set[asyncio.subprocess.Process] = set()
        self._closed = False

    async def run(
        self,
        argv: Sequence[str],
        *,
        cwd: str | None = None,
        timeout: float = 60.0,
        check: bool = False,
    ) -> RunResult:
        if not argv:
            raise HostError("Nothing to run: the command is empty.")
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                cwd=cwd,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )
        except FileNotFoundError as exc:
            if cwd is not None and not os.path.isdir(cwd):
                res = RunResult(1, "", f"cannot enter {cwd}: {exc.strerror}\n")
            else:
                res = RunResult(127, "", f"{argv[0]}: command not found\n")
            return self._checked(argv, res, check)
        except PermissionError as exc:
            return self._checked(argv, RunResult(126, "", f"{argv[0]}: {exc.strerror}\n"), check)
        self._runs.add(proc)
        try:
            out, err = await asyncio.wait_for(proc.communicate(), timeout)
        except BaseException as exc:
            _killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(proc.wait(), 5)
            if isinstance(exc, asyncio.TimeoutError):
                raise CommandTimeout(f"{argv[0]} took longer than {timeout:g} s and was stopped.") from None
            raise
        finally:
            self._runs.discard(proc)
        rc = proc.returncode if proc.returncode is not None else -1
        res = RunResult(rc if rc >= 0 else 128 - rc, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"))
        return self._checked(argv, res, check)

    @staticmethod
    def _checked(argv: Sequence[str], res: RunResult, check: bool) -> RunResult:
        if check and res.exit_code != 0:
            raise HostError(f"{argv[0]} failed (exit {res.exit_code}): {res.stderr.strip()[-500:]}")
        return res

    async def _open_channel(self, argv: Sequence[str], *, cwd: str | None = None) -> ProcChannel:
        if self._closed:
            raise HostError("This host connection is closed.")
        proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=cwd,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
            limit=READ_LIMIT,
        )
        chan = LocalChannel(proc, on_close=self._channels.discard)
        self._channels.add(chan)
        return chan

    async def read_bytes(self, path: str) -> bytes:
        try:
            return await asyncio.to_thread(_read, path)
        except FileNotFoundError:
            raise RemoteFileNotFound(f"{path} does not exist.") from None
        except OSError as exc:
            raise HostError(f"Cannot read {path}: {exc.strerror}.") from None

    async def stat(self, path: str) -> FileStat:
        try:
            st = os.stat(path)
        except FileNotFoundError:
            raise RemoteFileNotFound(f"{path} does not exist.") from None
        except OSError as exc:
            raise HostError(f"Cannot stat {path}: {exc.strerror}.") from None
        return FileStat(path, st.st_size, st.st_mtime, statmod.S_IMODE(st.st_mode), statmod.S_ISDIR(st.st_mode))

    async def glob(self, pattern: str) -> list[str]:
        return sorted(await asyncio.to_thread(globmod.glob, pattern, recursive=True))

    async def write_atomic(self, path: str, data: bytes | str, *, expect_sha256: str | None) -> WriteResult:
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        return await asyncio.to_thread(_write_atomic, path, raw, expect_sha256)

    async def forward(self, remote_port: int) -> int:
        return int(remote_port)

    async def close(self) -> None:
        self._closed = True
        for proc in list(self._runs):  # in-flight commands end with the host object
            _killpg(proc.pid, signal.SIGKILL)
        await asyncio.gather(*(c.close() for c in list(self._channels)), return_exceptions=True)
        self._set_state(self._state.__class__("closed"))


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def backup_name(path: str, exists: object) -> str:
    """`<path>.bak-YYYYmmdd-HHMMSS`, with `-N` appended while that name is taken."""
    base = f"{path}.bak-{time.strftime('%Y%m%d-%H%M%S')}"
    name, n = base, 1
    while exists(name):  # type: ignore[operator]
        name, n = f"{base}-{n}", n + 1
    return name


def changed_message(path: str, expect: str | None, found: bytes | None) -> str | None:
    """Why the file is not the version the caller read (None when it is)."""
    if expect is None:
        return None if found is None else f"{path} already exists; read it before replacing it."
    if found is None:
        return f"{path} no longer exists; it was removed after it was read."
    if hashlib.sha256(found).hexdigest() != expect:
        return f"{path} changed on the host since it was read; reload it and try again."
    return None


def _write_atomic(path: str, raw: bytes, expect: str | None) -> WriteResult:
    real = os.path.realpath(path)
    try:
        found: bytes | None = _read(real)
    except FileNotFoundError:
        found = None
    if (why := changed_message(path, expect, found)) is not None:
        raise FileChanged(why)
    mode = statmod.S_IMODE(os.stat(real).st_mode) if found is not None else 0o644
    head, tail = os.path.split(real)
    tmp = os.path.join(head, f".{tail}.tmp-{secrets.token_hex(4)}")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    except OSError as exc:
        raise HostError(f"Cannot write beside {path}: {exc.strerror}.") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        backup = None
        if found is not None:
            try:
                now: bytes | None = _read(real)
            except FileNotFoundError:
                now = None
            if (why := changed_message(path, expect, now)) is not None:
                raise FileChanged(why)
            backup = backup_name(real, os.path.lexists)
            try:
                os.link(real, backup)
            except OSError:
                shutil.copy2(real, backup)
        os.rename(tmp, real)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    with contextlib.suppress(OSError):
        dfd = os.open(head, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    return WriteResult(backup, hashlib.sha256(raw).hexdigest())
