"""A server in a tmux pane (stdout and stderr on the pane's pty): found as "tmux pane" with no log file,
its state from HTTP, `doctor --json` says so, a plain restart is refused with the reason, and
`restart --into-log` relaunches it detached into a log file through the one restart path.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from eagle3_tui.errors import UserError
from eagle3_tui.profile import Profile
from eagle3_tui.remote.procgroup import stop_group
from eagle3_tui.session import Session
from eagle3_tui.session.host.discovery import default_log_path
from tests.plugins.world import SPEC_ARGS, free_port


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/health", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False


def _stop_port_servers(port: int) -> None:
    """A failed test must not leave the relaunched server running: stop the group of any sim on the port."""
    marker = b"eagle3_tui.sim.server\0", f"--port\0{port}\0".encode()
    for entry in Path("/proc").iterdir():
        with contextlib.suppress(OSError, ValueError, ProcessLookupError):
            cmd = (entry / "cmdline").read_bytes()
            if all(m in cmd for m in marker):
                stop_group(os.getpgid(int(entry.name)), 10)


@pytest.fixture
def pane(demo_world: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    if shutil.which("tmux") is None:
        pytest.skip("no tmux here")
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    sock = f"e3t-{uuid.uuid4().hex[:8]}"
    port = free_port()
    argv = [sys.executable, "-m", "eagle3_tui.sim.server", "--model-path", str(demo_world.target_dir),
            "--speculative-draft-model-path", str(demo_world.draft_dir), *SPEC_ARGS, "--sim-background-load", "1",
            "--host", "127.0.0.1", "--port", str(port)]
    tmux = ["tmux", "-L", sock, "-f", "/dev/null"]
    subprocess.run([*tmux, "new-session", "-d", "-s", "sglang", "-c", str(tmp_path), shlex.join(argv)],
                   check=True, timeout=20)
    log = Path(default_log_path(port))
    try:
        deadline = time.monotonic() + 120
        while not _healthy(port):
            assert time.monotonic() < deadline, "the pane's sim server did not come up"
            time.sleep(0.3)
        yield {"port": port, "tmp": tmp_path, "tmux": tmux, "log": log, "world": demo_world}
    finally:
        subprocess.run([*tmux, "kill-server"], timeout=20, capture_output=True)
        _stop_port_servers(port)
        for f in (log, log.parent / f".{log.name}.pid"):
            f.unlink(missing_ok=True)


def _doctor_json(profile: Profile, port: int) -> dict[str, Any]:
    from tests.test_hostcmds import run

    prof = profile.local_state_dir().parent / "hosts.toml"
    prof.parent.mkdir(parents=True, exist_ok=True)
    prof.write_text(f'[localhost]\nstate_dir = "{profile.local_state_dir()}"\n')
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert run(["doctor", "--json", "--local", "--profile", str(prof), "--port", str(port)]) == 0
    return dict(json.loads(out.getvalue()))


async def _charted(session: Session, source: str | None, timeout: float = 20) -> None:
    """Until the monitor's poll says the charts come from `source` (None: from the log)."""
    deadline = time.monotonic() + timeout
    while session.server.charts_from != source or (source and session.telemetry.summary().accept_len is None):
        assert time.monotonic() < deadline, (session.server.charts_from, session.telemetry.summary())
        await asyncio.sleep(0.05)


async def test_tmux_pane_server_http_only_then_restart_into_a_log(pane: dict[str, Any],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import eagle3_tui.session.live.monitor as monitor
    from eagle3_tui.ui.viewmodel import charts_text

    monkeypatch.setattr(monitor, "POLL_INTERVAL_S", 0.2)
    port = pane["port"]
    profile = Profile(name="localhost", local=True, port=port, state_dir=str(pane["tmp"] / "state"),
                      restart_deadline_s=120)
    doc = await asyncio.to_thread(_doctor_json, profile, port)
    assert doc["deployment"] == {"kind": "pane", "engine": None, "id": None, "nodes": 1, "log": None}
    async with Session(profile) as session:
        assert session.deployment.kind == "pane" and session.deployment.terminal == "tmux"
        assert session.server.deployment == "tmux pane" and session.server.log_path is None
        info = await session.poll_server_info()  # what HTTP gives is what there is
        assert info and session.server.state == "ready" and session.server.speculative
        pane_pid = session.server.pid
        await _charted(session, "/server_info")  # no --enable-metrics: the DP ranks' internal_states
        assert charts_text(session.server) == ("charts from /server_info (no log file: tmux pane); "
                                               "R restarts it into a log file")
        with pytest.raises(UserError, match="restart --into-log"):
            await session.control.restart()
        with pytest.raises(UserError, match="restart --into-log"):
            await session.presets.apply(await session.presets.plan("no-speculation"))
        assert session.server.pid == pane_pid and _healthy(port)  # refused: untouched
        await session.control.restart(into_log=True)
        try:
            assert session.server.state == "ready" and session.server.pid != pane_pid
            assert session.server.log_path == str(pane["log"]) and "ready to roll" in pane["log"].read_text()
            assert session.deployment.kind == "process" and session.server.deployment is None
            await _charted(session, None)  # the log is followed again: charts from its lines
            panes = subprocess.run([*pane["tmux"], "list-panes", "-a"], capture_output=True, text=True, timeout=20)
            assert panes.returncode != 0 or not panes.stdout.strip()  # the pane's server ended with its pane
        finally:
            await session.control.stop()


async def test_pane_found_over_ssh(pane: dict[str, Any], ssh_host: Any) -> None:
    """The same classification over the real sshd fixture: /proc read through the SSH host."""
    from eagle3_tui.session.host.discovery import discover_servers

    found = [s for s in await discover_servers(ssh_host) if s.port == pane["port"]]
    assert len(found) == 1
    dep = found[0].deployment
    assert (dep.kind, dep.terminal, dep.log, dep.label) == ("pane", "tmux", None, "tmux pane")
