"""Temp folders of remote jobs that were killed before they could clean up, removed by the next job.

A job (the accuracy check) works in `<tmp>/eagle3-check-*` on the host and removes it on every exit
it sees (a normal end, an error, ctrl-C, SIGTERM). A SIGKILL, a power cut or a lost connection sees
nothing: the folder stays. The next job removes such folders: named like ours, not named by any
running process's command line (the job runs `<folder>/accuracy.pyz`), and older than
`LEFTOVER_AGE_S` (so a folder another job just made, before its process started, is spared).
"""

from __future__ import annotations

import posixpath
import time
from typing import TYPE_CHECKING

from eagle3_tui.errors import UserError

if TYPE_CHECKING:
    from eagle3_tui.remote.host import Host

PREFIX = "eagle3-check-"
LEFTOVER_AGE_S = 120.0


def is_leftover(path: str, *, mtime: float, now: float, running_argv: list[str], keep: str) -> bool:
    """Whether `path` is a dead job's folder (pure)."""
    if path == keep or not posixpath.basename(path).startswith(PREFIX):
        return False
    if now - mtime < LEFTOVER_AGE_S:
        return False
    return not any(path + "/" in argv or argv.endswith(path) for argv in running_argv)


async def remove_leftovers(host: Host, keep: str) -> list[str]:
    """Remove dead jobs' folders beside `keep` (this job's own folder); the paths removed. Best effort."""
    root = posixpath.dirname(keep)
    try:
        found = await host.glob(posixpath.join(root, PREFIX + "*"))
        running = [" ".join(p.argv) for p in await host.processes()]
    except UserError:
        return []
    removed: list[str] = []
    now = time.time()
    for path in found:
        try:
            st = await host.stat(path)
            if st.is_dir and is_leftover(path, mtime=st.mtime, now=now, running_argv=running, keep=keep):
                res = await host.run(["rm", "-rf", "--", path], timeout=60)
                if res.exit_code == 0:
                    removed.append(path)
        except UserError:
            continue
    return removed
