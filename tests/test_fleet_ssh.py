"""A fleet entry given by `host` (SSH): its /metrics read through an SSH port forward to the test sshd on
127.0.0.1, with the host's hosts.toml table (its ssh_config), as `eagle3-tui fleet` and the console do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from eagle3_tui.fleet import DirectFleet, parse_fleet
from eagle3_tui.session import SSHTunnels
from tests.fleet_fakes import fake_server, sglang_metrics


async def test_host_entry_is_read_through_an_ssh_port_forward(sshd: Any, tmp_path: Path) -> None:
    profile = sshd.write_profile(tmp_path / "hosts.toml")
    with fake_server() as srv:
        srv.set("/metrics", sglang_metrics(2.3, 500.0))
        spec = parse_fleet({"timeout_s": 5, "server": [
            {"name": "over-ssh", "host": sshd.alias, "port": srv.port, "engine": "sglang"},
            {"name": "no-such-port", "host": sshd.alias, "port": 1, "engine": "sglang"},
        ]})
        tunnels = SSHTunnels(profile)
        async with httpx.AsyncClient() as http:
            fleet = DirectFleet(spec, http, tunnels=tunnels)
            try:
                rows = {r.name: r for r in await fleet.refresh()}
            finally:
                await fleet.aclose()
        assert rows["over-ssh"].status == "ok" and rows["over-ssh"].accept_now == 2.3
        assert [p for p, _ in srv.queries][:1] == ["/metrics"]  # it came through the forward
        assert rows["no-such-port"].status == "down" and "\n" not in rows["no-such-port"].reason
