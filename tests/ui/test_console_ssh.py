"""The console over real SSH (OpenSSH sshd on 127.0.0.1): the log follows through the connection, a
dropped connection is a toast and a state in the status bar, and nothing is lost when it comes back."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from eagle3_tui.profile import Profile
from eagle3_tui.session import Session
from eagle3_tui.ui.factory import make_app
from eagle3_tui.ui.launch import attach, close
from eagle3_tui.ui.options import Lifecycle
from eagle3_tui.ui.themes import builtin_theme_dir
from tests.ui.recorded import until_ready


async def wait_for(cond, what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)


def append(path: Path, *lines: str) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines))


@pytest.mark.timeout(120)
async def test_ssh_follow_drop_and_reconnect(sshd: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    log = tmp_path / "server.log"
    log.write_text("[2026-01-01 00:00:00] booting\n")
    profile = Profile(name=sshd.alias, log_path=str(log), state_dir=str(tmp_path / "state"))
    host = sshd.make_host()
    session = Session(profile, readonly=True, host=host)
    kinds: list[str] = []
    session.add_listener(lambda ev: kinds.append(ev.conn.kind) if type(ev).__name__ == "ConnectionChanged" else None)
    app = make_app(session, lifecycle=Lifecycle(start=attach, on_exit=close), theme_dirs=[builtin_theme_dir()])
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await until_ready(pilot)
            await wait_for(lambda: session.conn.kind == "connected", "the SSH connection")
            await pilot.pause(0.3)
            status = lambda: str(app.query_one("#status").render())  # noqa: E731
            log_lines = lambda: list(app.query_one("#log").lines)  # noqa: E731
            assert f"{sshd.alias} ● connected" in status()
            append(log, "line one over ssh", "line two over ssh")
            await wait_for(lambda: "line two over ssh" in log_lines(), "lines followed over SSH")

            # A longer outage: the status bar says reconnecting, a toast says so, lines written
            # meanwhile arrive once the connection is back.
            sshd.stop()
            await wait_for(lambda: session.conn.kind in ("reconnecting", "connecting"), "the drop to be seen")
            await pilot.pause(0.5)
            assert "reconnecting" in status() or "connecting" in status()
            assert any("connection lost" in n.message for n in app._notifications)
            append(log, "written while the link was down")
            sshd.start()
            await wait_for(lambda: session.conn.kind == "connected", "the reconnection", 60)
            await wait_for(lambda: "written while the link was down" in log_lines(), "the lines from the outage", 30)
            await pilot.pause(0.3)
            assert "● connected" in status()
            assert "reconnecting" in kinds or "connecting" in kinds[1:]
    finally:
        await session.close()
