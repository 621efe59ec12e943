"""A restart whose SSH connection is cut (over the real sshd) after the stop, while a command is in
flight: the restart fails with the lost connection; once the host is back the session looks again and
says where the server stands (no server runs; `restart` finishes it), and `restart` does. A fake SGLang
(its ready line and /health at once) keeps it short: the restart path is under test, not the server."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from eagle3_tui.profile import load_profile
from eagle3_tui.session import Notice, RestartFailed, Session
from eagle3_tui.session.restart import restarter as restart_mod
from tests.plugins.world import free_port, stop_processes_under

FAKE_SGLANG = '''
import http.server, sys
port = int(sys.argv[sys.argv.index("--port") + 1])

class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass

server = http.server.HTTPServer(("127.0.0.1", port), Health)
print("[2026-12-01 09:00:00] The server is fired up and ready to roll!", file=sys.stderr, flush=True)
server.serve_forever()
'''


def _serving(tmp_path: Path, sshd) -> Path:
    """A profile for the fake server over the sshd, and the server already running (as found on attach)."""
    fake = tmp_path / "fake"
    (fake / "sglang").mkdir(parents=True)
    (fake / "sglang" / "__init__.py").write_text("")
    (fake / "sglang" / "launch_server.py").write_text(FAKE_SGLANG)
    port = free_port()
    argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", str(tmp_path), "--port", str(port)]
    log = tmp_path / "server.log"
    prof = sshd.write_profile(tmp_path / "hosts.toml", launch_command=argv, launch_cwd=fake, log_path=log,
                              state_dir=tmp_path / "state", port=port, restart_deadline_s=30)
    with log.open("ab") as out:
        subprocess.Popen(argv, cwd=fake, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True)
    return prof


@pytest.mark.timeout(90)
async def test_a_connection_cut_mid_restart_is_said_after_the_reconnect_and_restart_finishes_it(
        tmp_path, sshd, monkeypatch):
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    session = Session(load_profile(sshd.alias, str(_serving(tmp_path, sshd))))
    notices: list[str] = []
    session.add_listener(lambda ev: notices.append(ev.message) if isinstance(ev, Notice) else None)
    port_free = restart_mod.Restarter._port_free
    cut: list[int] = []

    async def cut_while_a_command_runs(self, spec):
        """Right after the stop, the port check: the connection is cut while a command runs."""
        if not cut:
            running = asyncio.ensure_future(self._host.run(["sleep", "5"], timeout=20))
            await asyncio.sleep(0.3)
            cut.extend(sshd.kill_connection(session.host.local_port))
            await running
        return await port_free(self, spec)

    try:
        await session.attach()
        assert session.server.state == "ready", session.server
        monkeypatch.setattr(restart_mod.Restarter, "_port_free", cut_while_a_command_runs)
        with pytest.raises(RestartFailed, match="Lost the connection") as failed:
            await session.control.restart()
        assert failed.value.exit_code == 3  # the CLI's status for a lost connection, not a refusal's 2
        assert cut, "the connection was not cut"
        for _ in range(300):  # the reconnect, then the look at the host
            if session.server.state != "failed":
                break
            await asyncio.sleep(0.05)
        said = "was cut off before it ended: no server runs now; `restart` finishes it"
        assert session.server.state == "stopped" and said in session.server.message, session.server
        assert any(said in n for n in notices), notices
        assert session.store.unfinished_restart() is not None  # the next attach would say it too
        await session.control.restart()
        assert session.server.state == "ready" and session.store.unfinished_restart() is None
    finally:
        await session.close()
        stop_processes_under(tmp_path)
