"""Where the fleet meets hosts: SSH port forwards for `host` entries, and the profile a row drills into.

The fleet package knows no hosts (an import contract); the console and the headless command hand it these
tunnels, and open the one-server console on the profile `fleet_profile` makes for a row.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from eagle3_tui.errors import UserError
from eagle3_tui.profile import LOCAL_NAMES, Profile, load_profile
from eagle3_tui.session.connection import make_host

if TYPE_CHECKING:
    from eagle3_tui.fleet import FleetEntry
    from eagle3_tui.remote.host import Host


def fleet_profile(entry: FleetEntry, profile_path: str | Path | None = None, *, accept_new_host_key: bool = False,
                  ) -> Profile:
    """The host profile of a fleet row: its SSH host (hosts.toml's table when there is one) with the row's
    port, or the base URL's host (this machine when it is a loopback address)."""
    overrides = {"accept_new_host_key": True} if accept_new_host_key else None
    if entry.host is not None:
        prof = load_profile(entry.host, profile_path, overrides)
        prof.port = entry.port
        return prof
    parts = urlsplit(entry.base_url or "")
    host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    if host in LOCAL_NAMES:
        prof = load_profile(None, profile_path, overrides, local=True)
    else:
        prof = load_profile(host, profile_path, overrides)
    prof.port = port
    return prof


class SSHTunnels:
    """One SSH connection per host, one local port forward per server port; all closed together."""

    def __init__(self, profile_path: str | Path | None = None, *, accept_new_host_key: bool = False) -> None:
        self._profile_path = profile_path
        self._accept = accept_new_host_key
        self._hosts: dict[str, Host] = {}
        self._lock = asyncio.Lock()

    async def base_url(self, entry: FleetEntry) -> str:
        if entry.base_url is not None:
            return entry.base_url
        if entry.host is None or entry.port is None:
            raise UserError(f"{entry.name}: neither a base_url nor a host and port")
        async with self._lock:  # one connection per host even when its servers ask at once
            host = self._hosts.get(entry.host)
            if host is None:
                profile = fleet_profile(entry, self._profile_path, accept_new_host_key=self._accept)
                host = self._hosts[entry.host] = make_host(profile)
        local = await host.forward(entry.port)
        return f"http://127.0.0.1:{local}"

    async def aclose(self) -> None:
        hosts, self._hosts = list(self._hosts.values()), {}
        for host in hosts:
            with contextlib.suppress(Exception):
                await host.close()
