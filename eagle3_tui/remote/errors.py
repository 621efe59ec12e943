"""Errors of the host layer; each is a `UserError`, so the CLI and the UI show its one sentence.

The split matters to callers: `UnknownHostKey`, `ChangedHostKey` and `AuthFailed` are never retried
(the user must act), `ConnectionLost` is transient (the supervisor reconnects), `FileChanged` and
`RemoteFileNotFound` are answers about files.
"""

from __future__ import annotations

from eagle3_tui.errors import UserError


class HostError(UserError):
    """Something went wrong talking to a host."""


class HostKeyError(HostError):
    """The host's key could not be trusted (either kind below)."""


class UnknownHostKey(HostKeyError):
    """The host's key is not in known_hosts (first contact); accepting it is the user's call."""


class ChangedHostKey(HostKeyError):
    """The host presented a key different from the one recorded: possibly an attack; never accepted."""


class AuthFailed(HostError):
    """The host refused every credential we offered."""


class ConnectionLost(HostError):
    """The connection is down (or never came up); transient, the supervisor keeps trying."""

    exit_code = 3  # errors.EXIT_CONNECTION_LOST: a command that ends on it says so by its status


class CommandTimeout(HostError):
    """A command ran past its deadline; it was stopped on the host."""


class FileChanged(HostError):
    """`write_atomic` refused: the file is not the version the caller read."""


class RemoteFileNotFound(HostError):
    """The path does not exist on the host."""

