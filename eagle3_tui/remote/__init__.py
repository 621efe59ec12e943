"""Hosts, local and SSH: commands, a lossless follower, atomic writes, process groups, port forwards.

Knows nothing of SGLang. `Host` (host.py) is the contract; `LocalHost` (local.py) and `SSHHost`
(ssh.py, imported on demand because it pulls in asyncssh) implement it; errors are in errors.py,
the values it hands out in types.py. One of each, shared by both hosts: the follow loop (follow_client.py,
over the `FollowTransport` protocol; the shipped follow_on_host.py), the atomic write (atomic.py, over
`FileOps`), and the local process-group stop/wait (procgroup.py, also shipped in the watchdog).
"""

from eagle3_tui.remote.errors import (
    AuthFailed,
    ChangedHostKey,
    CommandTimeout,
    ConnectionLost,
    FileChanged,
    HostError,
    HostKeyError,
    RemoteFileNotFound,
    UnknownHostKey,
)
from eagle3_tui.remote.host import (
    ConnState,
    FileStat,
    FollowBatch,
    FollowCursor,
    FollowEvent,
    Host,
    ProcessInfo,
    RunResult,
    WriteResult,
)
from eagle3_tui.remote.local import LocalHost

__all__ = [
    "AuthFailed",
    "ChangedHostKey",
    "CommandTimeout",
    "ConnState",
    "ConnectionLost",
    "FileChanged",
    "FileStat",
    "FollowBatch",
    "FollowCursor",
    "FollowEvent",
    "Host",
    "HostError",
    "HostKeyError",
    "LocalHost",
    "ProcessInfo",
    "RemoteFileNotFound",
    "RunResult",
    "UnknownHostKey",
    "WriteResult",
]
