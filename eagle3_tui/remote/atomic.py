"""The one atomic file replacement, over a small file-ops protocol both hosts implement.

The order is what makes it safe (DESIGN.md, Safety): refuse if the file is not the version the
caller read; write a temp file beside it and fsync it; check again; keep the old content as a
timestamped backup; rename over the file; fsync the directory so the rename itself is durable.
`LocalHost` implements `FileOps` with os calls, `SSHHost` with SFTP requests.
"""

from __future__ import annotations

import contextlib
import hashlib
import posixpath
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Protocol

from eagle3_tui.remote.errors import FileChanged
from eagle3_tui.remote.types import WriteResult

NEW_FILE_MODE = 0o644


class FileOps(Protocol):
    """The file operations `write_atomic` needs; each raises a `HostError` with one sentence."""

    async def realpath(self, path: str) -> str:
        """The path with symlinks resolved (the link is kept, its target replaced)."""

    async def read_or_none(self, path: str) -> bytes | None:
        """The whole file, or None if it does not exist."""

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
    anything else there raises `FileChanged` and nothing is touched. The new file keeps the old
    one's permission bits (0644 for a new file); the old content stays in a timestamped backup.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
    real = await ops.realpath(path)
    found = await ops.read_or_none(real)
    _refuse_if_changed(path, expect_sha256, found)
    mode = await ops.mode(real) if found is not None else NEW_FILE_MODE
    head, tail = posixpath.split(real)
    tmp = posixpath.join(head, f".{tail}.tmp-{secrets.token_hex(4)}")
    backup = None
    try:
        await ops.write_new(tmp, raw, mode)
        if found is not None:
            _refuse_if_changed(path, expect_sha256, await ops.read_or_none(real))
            backup = await backup_name(real, ops.lexists)
            await ops.keep_copy(real, backup, found, mode)
        await ops.rename(tmp, real)
    except BaseException:
        with contextlib.suppress(Exception):
            await ops.remove(tmp)
        raise
    await ops.fsync_dir(head or ".")
    return WriteResult(backup, hashlib.sha256(raw).hexdigest())
