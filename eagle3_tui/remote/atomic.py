"""The one atomic file replacement, over a small file-ops protocol both hosts implement.

The order is what makes it safe (DESIGN.md, Safety): refuse if the file is not the version the
caller read; write a temp file beside it and fsync it; check again; keep the old content as a
timestamped backup; rename over the file; fsync the directory so the rename itself is durable.
`LocalHost` implements `FileOps` with os calls, `SSHHost` with SFTP requests.

A concurrent in-place edit (an editor or `sed -i`-less script writing into the file) can land at any
moment of that sequence, also after the last check and before the rename, where a plain check-then-
rename would silently replace it. So the file is read through a handle held open for the whole write
(`FileOps.hold`): an in-place edit changes that very file, and after the rename the handle is read
again. If it differs from what was read first, the edit happened during the write: the edited file is
put back (the backup hard link is the same file, renamed back; else its bytes are written back) and
`FileChanged` is raised. An edit that starts after that second read lands on the new file and is kept.

A writer killed between the temp write and the rename leaves `.<name>.tmp-<pid>.<start>@<machine>-<hex>`
behind. The next write of the same file removes the temps of dead writers only (`is_dead_temp`).
`replace_local` is the same replacement (temp, fsync, rename, directory fsync; no backup) for this
machine's own state files.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
import re
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

from eagle3_tui.remote import faults
from eagle3_tui.remote.errors import FileChanged
from eagle3_tui.remote.types import WriteResult

NEW_FILE_MODE = 0o644
STALE_TEMP_S = 3600.0
_TAGGED = re.compile(r"\.tmp-(\d+)(?:\.(\d+))?@([A-Za-z0-9.-]*)-[0-9a-f]+$")


class HeldFile(Protocol):
    """A file kept open for the length of a write: it reads the same file even after a rename over its name."""

    async def read(self) -> bytes:
        """The whole file, from its first byte."""

    async def close(self) -> None:
        """Let it go (best effort)."""


class FileOps(Protocol):
    """The file operations `write_atomic` needs; each raises a `HostError` with one sentence."""

    async def realpath(self, path: str) -> str:
        """The path with symlinks resolved (the link is kept, its target replaced)."""

    async def read_or_none(self, path: str) -> bytes | None:
        """The whole file, or None if it does not exist."""

    async def hold(self, path: str) -> HeldFile | None:
        """The file opened for reading and kept open, or None if it does not exist."""

    async def mode(self, path: str) -> int:
        """Its permission bits."""

    async def lexists(self, path: str) -> bool:
        """Whether anything (a dangling link too) has this name."""

    async def write_new(self, path: str, data: bytes, mode: int) -> None:
        """Create `path` exclusively with these permission bits, write `data`, fsync it."""

    async def keep_copy(self, src: str, dst: str, data: bytes, mode: int) -> None:
        """Make `dst` hold `src`'s content (`data`): a hard link where possible, else a durable copy."""

    async def rename(self, src: str, dst: str) -> None:
        """Atomically replace `dst` with `src`."""

    async def remove(self, path: str) -> None:
        """Delete a file."""

    async def fsync_dir(self, path: str) -> None:
        """Make the directory's entries durable (best effort where the host cannot)."""

    async def list_dir(self, path: str) -> list[tuple[str, float]]:
        """(name, mtime) of each entry of a directory."""


def _machine() -> str:
    return re.sub(r"[^A-Za-z0-9.-]", "-", socket.gethostname())[:64]


def process_start(pid: int) -> int | None:
    """When process `pid` started (clock ticks since boot, /proc/<pid>/stat field 22); None where there is
    no /proc or no such process. With the pid it names one process for good: a pid reused later has
    another start."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
        return int(raw[raw.rindex(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def _is_zombie(pid: int) -> bool:
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return raw[raw.rindex(b")") + 2:][:1] in (b"Z", b"X")


def temp_name(real: str) -> str:
    """The temp file beside `real` this process writes: its pid, its start and its machine name it (see
    `is_dead_temp`)."""
    head, tail = posixpath.split(real)
    pid = os.getpid()
    start = process_start(pid)
    who = f"{pid}.{start}" if start is not None else str(pid)
    return posixpath.join(head, f".{tail}.tmp-{who}@{_machine()}-{secrets.token_hex(4)}")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, owned by someone else
    return True


def writer_alive(pid: int, start: int | None, *, alive: Callable[[int], bool] = _pid_alive) -> bool:
    """Whether the process that wrote a temp still runs: the pid exists, is not a zombie (a killed writer
    its parent has not reaped yet is dead, though `kill -0` still finds it) and, when the temp names its
    start, started then (else the pid was reused by another process)."""
    if not alive(pid) or _is_zombie(pid):
        return False
    if start is None:
        return True
    now = process_start(pid)
    return now is None or now == start


def is_dead_temp(name: str, tail: str, age_s: float, *, machine: str,
                 alive: Callable[[int], bool] = _pid_alive) -> bool:
    """Whether `name` is a temp of `tail` left by a writer that is gone.

    Decided by the writer's pid, never by a lock: the write's only trace on the host is its temp file,
    and over SSH the writer is a process on the console's machine, which the host cannot lock against.
    A temp this machine wrote (its name carries the machine) is dead when its pid is gone, a zombie,
    or another process's now (`writer_alive`); a live writer's temp is never touched, however old. A
    temp another machine wrote (or an unnamed one) cannot be judged from here: it is dead only once it
    is older than `STALE_TEMP_S`, longer than any write lasts."""
    if not name.startswith(f".{tail}.tmp-"):
        return False
    m = _TAGGED.search(name)
    if m is not None and m.group(3) == machine:
        pid = int(m.group(1))
        start = int(m.group(2)) if m.group(2) else None
        return pid != os.getpid() and not writer_alive(pid, start, alive=alive)
    return age_s > STALE_TEMP_S


async def remove_dead_temps(ops: FileOps, real: str) -> list[str]:
    """Remove the temps of dead writers beside `real` (best effort); the paths removed."""
    head, tail = posixpath.split(real)
    removed: list[str] = []
    try:
        entries = await ops.list_dir(head or ".")
    except Exception:  # cleaning up is best effort; the write itself reports errors
        return removed
    now, machine = time.time(), _machine()
    for name, mtime in entries:
        if is_dead_temp(name, tail, now - mtime, machine=machine):
            with contextlib.suppress(Exception):
                await ops.remove(posixpath.join(head, name))
                removed.append(posixpath.join(head, name))
    return removed


def changed_message(path: str, expect: str | None, found: bytes | None) -> str | None:
    """Why the file is not the version the caller read (None when it is)."""
    if expect is None:
        return None if found is None else f"{path} already exists; read it before replacing it."
    if found is None:
        return f"{path} no longer exists; it was removed after it was read."
    if hashlib.sha256(found).hexdigest() != expect:
        return f"{path} changed on the host since it was read; reload it and try again."
    return None


async def backup_name(path: str, exists: Callable[[str], Awaitable[bool]]) -> str:
    """`<path>.bak-YYYYmmdd-HHMMSS`, with `-N` appended while that name is taken."""
    base = f"{path}.bak-{time.strftime('%Y%m%d-%H%M%S')}"
    name, n = base, 1
    while await exists(name):
        name, n = f"{base}-{n}", n + 1
    return name


def _refuse_if_changed(path: str, expect: str | None, found: bytes | None) -> None:
    if (why := changed_message(path, expect, found)) is not None:
        raise FileChanged(why)


async def write_atomic(ops: FileOps, path: str, data: bytes | str, expect_sha256: str | None) -> WriteResult:
    """Replace `path` with `data`: a reader sees the old or the new file, never a mix.

    `expect_sha256` is the SHA-256 of the content the caller read (None: the file must not exist);
    anything else there raises `FileChanged` and nothing is touched. An in-place edit made while the
    write runs is kept and raises `FileChanged` too (module doc). The new file keeps the old one's
    permission bits (0644 for a new file); the old content stays in a timestamped backup.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    real = await ops.realpath(path)
    held = await ops.hold(real)
    try:
        found = await held.read() if held is not None else None
        _refuse_if_changed(path, expect_sha256, found)
        mode = await ops.mode(real) if found is not None else NEW_FILE_MODE
        head = posixpath.dirname(real)
        await remove_dead_temps(ops, real)
        tmp = temp_name(real)
        backup = None
        try:
            await ops.write_new(tmp, raw, mode)
            faults.hit("after-fsync")
            if found is not None:
                # the name may point at another file by now (replaced by a rename): what is there must match
                _refuse_if_changed(path, expect_sha256, await ops.read_or_none(real))
                backup = await backup_name(real, ops.lexists)
                await ops.keep_copy(real, backup, found, mode)
                faults.hit("after-backup")
            await ops.rename(tmp, real)
            faults.hit("after-rename")
        except BaseException:
            with contextlib.suppress(Exception):
                await ops.remove(tmp)
            raise
        if held is not None and (late := await held.read()) != found:
            await _put_back(ops, real, backup, late, mode)
            raise FileChanged(f"{path} was edited on the host while it was being replaced: the edit is kept and "
                              "nothing was written; reload it and try again.")
        await ops.fsync_dir(head or ".")
        return WriteResult(backup, hashlib.sha256(raw).hexdigest())
    finally:
        if held is not None:
            with contextlib.suppress(Exception):
                await held.close()


async def _put_back(ops: FileOps, real: str, backup: str | None, edited: bytes, mode: int) -> None:
    """The old file, edited during the write, back in its place: the backup when it is that very file (a
    hard link holds the edit too), renamed back so a writer still holding it keeps writing into the
    file in place; else its bytes written back the same atomic way."""
    if backup is not None and await ops.read_or_none(backup) == edited:
        await ops.rename(backup, real)
    else:
        tmp = temp_name(real)
        try:
            await ops.write_new(tmp, edited, mode)
            await ops.rename(tmp, real)
        except BaseException:
            with contextlib.suppress(Exception):
                await ops.remove(tmp)
            raise
    await ops.fsync_dir(posixpath.dirname(real) or ".")


def fsync_dir(path: str | Path) -> None:
    """Make a rename in this machine's directory `path` durable (best effort)."""
    with contextlib.suppress(OSError):  # some filesystems refuse fsync on a directory
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def replace_local(path: Path, data: bytes, *, mid_fault: str | None = None) -> None:
    """Replace this machine's file `path` atomically and durably (raises OSError).

    A reader, or the next run after a kill, sees the old or the new bytes; dead writers' temps of
    the same file are removed first. `mid_fault` is a `faults` point hit with half the temp written.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    now, machine = time.time(), _machine()
    with contextlib.suppress(OSError):
        for entry in os.scandir(path.parent):
            with contextlib.suppress(OSError):
                if is_dead_temp(entry.name, path.name, now - entry.stat().st_mtime, machine=machine):
                    os.unlink(entry.path)
    tmp = Path(temp_name(str(path)))
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            half = len(data) // 2
            f.write(data[:half])
            if mid_fault is not None:
                f.flush()
                faults.hit(mid_fault)
            f.write(data[half:])
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    fsync_dir(path.parent)
