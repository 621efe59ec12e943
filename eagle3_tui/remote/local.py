"""`LocalHost`: the same contract on this machine (the demo, or a console on the GPU box itself).

Commands run as subprocesses in their own session so a timeout or a close can end the whole group;
the follower and the stream watchdog are the very scripts SSHHost ships, run by this Python.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob as globmod
import os
import shutil
import signal
import stat as statmod
import sys
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from eagle3_tui.remote import faults
from eagle3_tui.remote.atomic import fsync_dir, write_atomic
from eagle3_tui.remote.errors import CommandTimeout, HostError, RemoteFileNotFound
from eagle3_tui.remote.host import Host
from eagle3_tui.remote.procgroup import signal_group, stop_group
from eagle3_tui.remote.stream import STDERR_KEEP, ProcChannel
from eagle3_tui.remote.tasks import wait_for
from eagle3_tui.remote.types import FileStat, RunResult, WriteResult

READ_LIMIT = 16 * 1024 * 1024
T = TypeVar("T")


def _kill_group(pid: int) -> None:
    """SIGKILL at once (a command past its deadline, or the host closing); no grace."""
    with contextlib.suppress(OSError):
        signal_group(pid, signal.SIGKILL)


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
            await wait_for(asyncio.shield(self._err_task), 2)
        return rc if rc >= 0 else 128 - rc

    def stderr_text(self) -> str:
        return self._err.decode("utf-8", "replace")

    async def close(self) -> None:
        """EOF on stdin (the follower and the watchdog exit on it); after 2 s, stop the group
        (TERM, 2 s, KILL)."""
        proc = self.proc
        if proc.returncode is None:
            if proc.stdin is not None:
                with contextlib.suppress(OSError):
                    proc.stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), 2.0)
            except asyncio.TimeoutError:
                try:
                    await asyncio.to_thread(stop_group, proc.pid, 2.0, 5.0)
                except RuntimeError:  # the loop's executor is already shut down: stop it here
                    stop_group(proc.pid, 2.0, 5.0)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(proc.wait(), 5.0)
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
            out, err = await wait_for(proc.communicate(), timeout)  # a cancel is never lost (tasks.py)
        except BaseException as exc:
            _kill_group(proc.pid)
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

    async def open_channel(self, argv: Sequence[str], *, cwd: str | None = None) -> ProcChannel:
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
        return await write_atomic(LocalFileOps(), path, data, expect_sha256)

    async def forward(self, remote_port: int) -> int:
        return int(remote_port)

    async def close(self) -> None:
        self._closed = True
        for proc in list(self._runs):  # in-flight commands end with the host object
            _kill_group(proc.pid)
        await asyncio.gather(*(c.close() for c in list(self._channels)), return_exceptions=True)
        self._set_state(self._state.__class__("closed"))


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _read_or_none(path: str) -> bytes | None:
    try:
        return _read(path)
    except FileNotFoundError:
        return None


def _write_new(path: str, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        faults.hit("after-temp")
        os.fsync(f.fileno())
    os.chmod(path, mode)  # the umask may have cleared bits the old file had


def _keep_copy(src: str, dst: str, data: bytes, mode: int) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _open_or_none(path: str) -> int | None:
    try:
        return os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None


def _pread_all(fd: int) -> bytes:
    chunks, pos = [], 0
    while chunk := os.pread(fd, 1 << 20, pos):
        chunks.append(chunk)
        pos += len(chunk)
    return b"".join(chunks)


class _LocalHeld:
    """A file descriptor kept open through a write (`atomic.HeldFile`)."""

    def __init__(self, ops: LocalFileOps, path: str, fd: int) -> None:
        self._ops, self._path, self._fd = ops, path, fd

    async def read(self) -> bytes:
        return await self._ops._call("read", self._path, _pread_all, self._fd)

    async def close(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self._fd)


class LocalFileOps:
    """`atomic.FileOps` on this machine: os calls in a worker thread, errors as one sentence."""

    async def _call(self, what: str, path: str, fn: Callable[..., T], *args: Any) -> T:
        try:
            return await asyncio.to_thread(fn, *args)
        except OSError as exc:
            raise HostError(f"Cannot {what} {path}: {exc.strerror or exc}.") from None

    async def realpath(self, path: str) -> str:
        return await self._call("resolve", path, os.path.realpath, path)

    async def read_or_none(self, path: str) -> bytes | None:
        return await self._call("read", path, _read_or_none, path)

    async def hold(self, path: str) -> _LocalHeld | None:
        fd = await self._call("read", path, _open_or_none, path)
        return _LocalHeld(self, path, fd) if fd is not None else None

    async def mode(self, path: str) -> int:
        st = await self._call("stat", path, os.stat, path)
        return statmod.S_IMODE(st.st_mode)

    async def lexists(self, path: str) -> bool:
        return await self._call("stat", path, os.path.lexists, path)

    async def write_new(self, path: str, data: bytes, mode: int) -> None:
        await self._call("write", path, _write_new, path, data, mode)

    async def keep_copy(self, src: str, dst: str, data: bytes, mode: int) -> None:
        await self._call("back up", src, _keep_copy, src, dst, data, mode)

    async def rename(self, src: str, dst: str) -> None:
        await self._call("replace", dst, os.rename, src, dst)

    async def remove(self, path: str) -> None:
        await self._call("remove", path, os.unlink, path)

    async def fsync_dir(self, path: str) -> None:
        await asyncio.to_thread(fsync_dir, path)

    async def list_dir(self, path: str) -> list[tuple[str, float]]:
        return await self._call("list", path, _list_dir, path)


def _list_dir(path: str) -> list[tuple[str, float]]:
    out = []
    with os.scandir(path) as it:
        for e in it:
            with contextlib.suppress(OSError):
                out.append((e.name, e.stat(follow_symlinks=False).st_mtime))
    return out
