"""Model and draft paths that are Hugging Face repo ids (`sglang serve Qwen/Qwen3-8B`), found in the
host's hub cache.

SGLang hands such an id to huggingface_hub, which downloads into (or reads from) the hub cache of the
server process. The layout (huggingface.co/docs/hub/local-cache, huggingface_hub's "Understand
caching" guide): `<cache>/models--<org>--<name>/refs/<revision>` holds a commit hash, and
`snapshots/<hash>/` holds the repo's files (symlinks into `../../blobs/`). The cache is `HF_HUB_CACHE`,
else `$HF_HOME/hub`, else `~/.cache/huggingface/hub` (huggingface_hub's constants also honour the legacy
`HUGGINGFACE_HUB_CACHE` and `XDG_CACHE_HOME`), all read from the server's own environment.

`resolve_model_path` reads only through `CacheFiles` (what `Host` offers), so it works over LocalHost,
SSH and a container's root alike. A path that exists as given wins over an id that merely looks alike.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from eagle3_tui.errors import UserError

if TYPE_CHECKING:
    from eagle3_tui.remote.types import FileStat

# huggingface_hub's validate_repo_id: `[namespace/]name` of word characters, '-' and '.', at most 96,
# no '--' or '..' (the cache folder uses '--' as the separator).
_REPO_ID = re.compile(r"^(?:[\w.-]+/)?[\w.-]+$")
_MAX_REPO_ID = 96
DEFAULT_REVISION = "main"


class CacheFiles(Protocol):
    """The file reads the lookup needs (`Host` and the container file view provide them)."""

    async def exists(self, path: str) -> bool: ...

    async def read_text(self, path: str) -> str: ...

    async def glob(self, pattern: str) -> list[str]: ...

    async def stat(self, path: str) -> FileStat: ...


@dataclass(frozen=True)
class Resolved:
    """A launch command's model path as the session reads it: a directory on the host (None: unknown),
    with the repo id and snapshot it came from, or the one sentence saying why it could not be found."""

    path: str | None
    repo_id: str | None = None
    revision: str | None = None
    problem: str | None = None


def repo_id_of(path: str) -> str | None:
    """`path` as a Hugging Face model repo id, or None when it cannot be one (absolute, `./x`, `~/x`)."""
    p = path.strip()
    if not p or p.startswith(("/", ".", "~")) or len(p) > _MAX_REPO_ID:
        return None
    if "--" in p or ".." in p or p.endswith((".", "-")) or not _REPO_ID.match(p):
        return None
    return p


def _expand_home(path: str, home: str | None) -> str:
    if home and (path == "~" or path.startswith("~/")):
        return home.rstrip("/") + path[1:]
    return path


def hub_cache_dir(environ: Mapping[str, str]) -> str:
    """The server's hub cache: HF_HUB_CACHE (legacy HUGGINGFACE_HUB_CACHE), else $HF_HOME/hub, else
    $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub (`~` as the server's HOME when known)."""
    home = environ.get("HOME") or None
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if environ.get(name):
            return _expand_home(environ[name], home)
    if environ.get("HF_HOME"):
        return posixpath.join(_expand_home(environ["HF_HOME"], home), "hub")
    base = _expand_home(environ.get("XDG_CACHE_HOME") or "~/.cache", home)
    return posixpath.join(base, "huggingface", "hub")


def repo_folder(cache: str, repo_id: str) -> str:
    """`<cache>/models--org--name` (huggingface_hub's repo_folder_name for a model repo)."""
    return posixpath.join(cache, "models--" + repo_id.replace("/", "--"))


def local_path(path: str, cwd: str | None) -> str:
    """The path as the server opens it: relative paths against its working directory."""
    if path.startswith(("/", "~")) or not cwd:
        return path
    return posixpath.normpath(posixpath.join(cwd, path))


async def _exists(files: CacheFiles, path: str) -> bool:
    try:
        return await files.exists(path)
    except UserError:
        return False


async def _ref(files: CacheFiles, folder: str, revision: str) -> str | None:
    """The commit a ref names (`refs/main`), or the revision itself when it is a snapshot's hash."""
    if await _exists(files, posixpath.join(folder, "snapshots", revision)):
        return revision
    try:
        text = await files.read_text(posixpath.join(folder, "refs", revision))
    except UserError:
        return None
    commit = text.strip()
    return commit if commit and "/" not in commit else None


async def _newest_snapshot(files: CacheFiles, folder: str) -> str | None:
    try:
        found = await files.glob(posixpath.join(folder, "snapshots", "*"))
    except UserError:
        return None
    best: tuple[float, str] | None = None
    for path in found:
        try:
            st = await files.stat(path)
        except UserError:
            continue
        if st.is_dir and (best is None or (st.mtime, path) > best):
            best = (st.mtime, path)
    return posixpath.basename(best[1]) if best else None


async def snapshot_dir(files: CacheFiles, cache: str, repo_id: str, revision: str | None = None) -> str | None:
    """The snapshot directory of a cached repo: the one `refs/<revision>` names when it is there, else
    the newest snapshot; None when the repo is not in the cache."""
    folder = repo_folder(cache, repo_id)
    commit = await _ref(files, folder, revision or DEFAULT_REVISION)
    if commit is not None:
        path = posixpath.join(folder, "snapshots", commit)
        if await _exists(files, path):
            return path
    newest = await _newest_snapshot(files, folder)
    return posixpath.join(folder, "snapshots", newest) if newest else None


async def resolve_model_path(
    files: CacheFiles, path: str | None, *, cwd: str | None, cache: str, role: str, revision: str | None = None
) -> Resolved:
    """Where the model path of a launch command is on the host. `role` ("draft" or "target") names the
    profile field the problem sentence points to."""
    if not path:
        return Resolved(None)
    local = local_path(path, cwd)
    rid = repo_id_of(path)
    if rid is None or (local.startswith("/") and await _exists(files, local)):
        return Resolved(local)
    snap = await snapshot_dir(files, cache, rid, revision)
    if snap is not None:
        return Resolved(snap, rid, posixpath.basename(snap))
    return Resolved(None, rid, None, f"{role} {rid} is a Hugging Face repo id not in the host's cache ({cache}): "
                                     f"give {role}_path in the profile")
