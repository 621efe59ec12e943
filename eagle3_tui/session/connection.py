"""The host a profile names, its connection state as the UI's `ConnView`, and how parts reach the server's HTTP API."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from eagle3_tui.session.events import ConnView

if TYPE_CHECKING:
    from eagle3_tui.profile import Profile
    from eagle3_tui.remote.host import ConnState, Host
    from eagle3_tui.sglang.client import SGLangClient

ClientFactory = Callable[[], Awaitable["SGLangClient"]]
"""How a part gets the server's HTTP client (through the port forward when remote)."""


def make_host(profile: Profile) -> Host:
    """LocalHost for a local profile, else an SSHHost with the profile's ssh config, key policy and Python."""
    if profile.local:
        from eagle3_tui.remote.local import LocalHost

        return LocalHost()
    from eagle3_tui.remote.ssh import SSHHost

    return SSHHost(
        profile.target,
        accept_new_host_key=profile.accept_new_host_key,
        python=profile.remote_python or "python3",
        config=[os.path.expanduser(profile.ssh_config)] if profile.ssh_config else None,
    )


def conn_view(state: ConnState, *, local: bool) -> ConnView:
    """A closed connection reads as failed; a local host that is up reads as `local`."""
    if state.kind == "connected" and local:
        return ConnView("local")
    if state.kind == "closed":
        return ConnView("failed", reason=state.reason or "closed")
    return ConnView(state.kind, attempt=state.attempt, next_try_s=state.wait_s or None, reason=state.reason or None)
