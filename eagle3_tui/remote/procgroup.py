"""Process groups on THIS machine: is one alive, wait for it to go, stop it (TERM, grace, KILL).

Synchronous on purpose: a hang-up handler or an exit path may run when no event loop can (the UI
calls `stop_group` from its hang-up hook); async code calls it through `asyncio.to_thread`.
A group whose members are all zombies counts as gone, the rule the host-side `STOP` script uses.

Standard library only and Python 3.6 syntax (no `from __future__`): the stream watchdog that
`Host.stream` ships to a host is this file's source followed by its own few lines (scripts.py).
"""

import os
import signal
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from typing import Literal

    StopOutcome = Literal["stopped", "killed", "not-running"]

POLL_MIN = 0.01
POLL_MAX = 0.1


def signal_group(pgid: int, sig: int) -> bool:
    """Send `sig` to the group; False if it has no member left (other errors propagate)."""
    if int(pgid) < 2:
        raise ValueError(f"refusing to signal process group {pgid}")
    try:
        os.killpg(int(pgid), sig)
    except ProcessLookupError:
        return False
    return True


def _live_member_in_proc(pgid: int) -> bool:
    """Whether /proc shows a member of the group that is not a zombie."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False


def pid_alive(pid: int) -> bool:
    """True while process `pid` exists (someone else's process counts)."""
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def group_alive(pgid: int) -> bool:
    """True while the group has a member that is not a zombie."""
    try:
        os.killpg(int(pgid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's group: it exists
    if not os.path.isdir("/proc/self"):
        return True  # no /proc (macOS): zombies cannot be told apart
    return _live_member_in_proc(int(pgid))


def wait_group_gone(pgid: int, timeout: float) -> bool:
    """Wait up to `timeout` seconds for the group to have no live member; True if it is gone."""
    deadline = time.monotonic() + max(0.0, timeout)
    pause = POLL_MIN
    while group_alive(pgid):
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(pause, left))
        pause = min(pause * 2, POLL_MAX)
    return True


def stop_group(pgid: int, grace: float = 30.0, kill_wait: float = 5.0) -> "StopOutcome":
    """TERM the group, wait up to `grace` s for it to go, then KILL it and wait up to `kill_wait` s.

    Returns "not-running" (nothing alive to stop), "stopped" (gone after TERM) or "killed".
    """
    if not group_alive(pgid):
        return "not-running"
    if not signal_group(pgid, signal.SIGTERM) or wait_group_gone(pgid, grace):
        return "stopped"
    signal_group(pgid, signal.SIGKILL)
    wait_group_gone(pgid, kill_wait)
    return "killed"
