"""The session's live side without a server: the log followed into telemetry and events, the
connection view through a dropped SSH connection, a failure in the log, the accuracy check."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from eagle3_tui.profile import Profile
from eagle3_tui.session import (
    CheckFinished,
    ConnectionChanged,
    LogBatch,
    Notice,
    Session,
    StatsUpdated,
)
from eagle3_tui.sglang.logline import DecodeStats


def decode(n: int, accept: float) -> str:
    return (f"[2025-12-09 10:00:{n % 60:02d}] Decode batch, #running-req: 4, #token: 900, token usage: 0.01, "
            f"accept len: {accept:.2f}, accept rate: 0.40, cuda graph: True, gen throughput (token/s): {50 + n:.2f}, "
            "#queue-req: 0, \n")


async def wait_until(pred, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.05)


@pytest.fixture
def data_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


async def test_log_into_telemetry_across_a_dropped_connection(sshd, ssh_host, tmp_path, data_dir):
    log = tmp_path / "server.log"
    log.write_text("old line\n")
    prof = Profile(name="live", log_path=str(log), port=1, state_dir=str(tmp_path / "st"))
    session = Session(prof, host=ssh_host)
    events: list = []
    session.add_listener(events.append)
    try:
        await session.attach()
        assert session.conn.kind == "connected" and session.server.state == "stopped"
        await wait_until(lambda: any(isinstance(e, LogBatch) for e in events))  # the last lines at attach
        with log.open("a") as f:
            for i in range(3):
                f.write(decode(i, 1.5 + i / 10))
        await wait_until(lambda: session.telemetry.decode_lines == 3)
        assert session.telemetry.series["accept_len"].values() == pytest.approx([1.5, 1.6, 1.7])
        # listeners hear the stats batched (at most 10 batches a second), so shortly after the telemetry
        await wait_until(lambda: any(isinstance(e, StatsUpdated) for e in events), timeout=2.0)

        sshd.kill_connection(ssh_host.local_port)
        await wait_until(lambda: any(isinstance(e, ConnectionChanged) and e.conn.kind == "reconnecting"
                                     for e in events))
        with log.open("a") as f:
            for i in range(3, 5):
                f.write(decode(i, 1.5 + i / 10))
        await wait_until(lambda: session.telemetry.decode_lines == 5)
        assert session.conn.kind == "connected"

        # every decode line once: none lost, none twice. The telemetry is filed at once, the listeners
        # hear the batch up to EMIT_INTERVAL_S later (CI failed on reading them in between).
        def seen() -> list[float]:
            return [e.accept_len for b in events if isinstance(b, LogBatch)
                    for e in b.events if isinstance(e, DecodeStats)]
        await wait_until(lambda: len(seen()) >= 5, timeout=5.0)
        assert seen() == pytest.approx([1.5, 1.6, 1.7, 1.8, 1.9])

        # a failure whose traceback ends the log is delivered once the log goes quiet
        with log.open("a") as f:
            f.write("[2025-12-09 10:01:00] Scheduler hit an exception: Traceback (most recent call last):\n"
                    '  File "scheduler.py", line 1, in event_loop\nRuntimeError: CUDA error: illegal memory access\n')
        session.views.set_state("ready")  # as if attached to a running server
        await wait_until(lambda: any(isinstance(e, Notice) and "illegal memory access" in e.message for e in events))
    finally:
        await session.close()


async def test_check_through_the_session(demo_world, tmp_path, data_dir):
    from eagle3_tui.profile import demo_profile

    prof = demo_profile(demo_world, port=1, state_dir=tmp_path / "demo")
    session = Session(prof)
    events: list = []
    session.add_listener(events.append)
    try:
        await session.attach()  # no server: the check needs only the draft and the data
        assert session.conn.kind == "local"
        report = await session.accuracy.run(samples=32)
        assert session.check is report
        names = {w.name for w in report.wirings}
        assert {"training", "serving default"} <= names
        done = [e for e in events if isinstance(e, CheckFinished)]
        assert done and done[-1].error is None
        assert [r.kind for r in session.records.rows()][-1] == "check"
        # the served wiring (no layer-id key: SGLang's default) gets its predicted accept length
        await session.survey.refresh_findings()
        assert session.facts.predicted_accept_len is not None
    finally:
        await session.close()


async def test_restart_spares_a_shell_in_the_servers_group(tmp_path, data_dir):
    """A server started from a script without job control shares the script's group: only it is stopped."""
    import os
    import signal
    import subprocess

    from eagle3_tui.remote.local import LocalHost

    shell = subprocess.Popen(["sh", "-c", "sleep 300 & echo $! > child.pid; while :; do sleep 0.2; done"],
                             cwd=tmp_path, start_new_session=True)
    host = LocalHost()
    session = Session(Profile(name="grp", local=True, port=1, state_dir=str(tmp_path / "st")), host=host)
    try:
        await wait_until(lambda: (tmp_path / "child.pid").exists() and (tmp_path / "child.pid").read_text().strip())
        child = int((tmp_path / "child.pid").read_text())
        session.views.set_server(session.server.with_process(child, shell.pid, session.server.started_at))
        await session.restarter.stop_current(time.monotonic())
        pids = {p.pid for p in await host.processes()}
        assert child not in pids, "the server process is stopped"
        assert shell.poll() is None, "the shell sharing its group is not"
    finally:
        os.killpg(shell.pid, signal.SIGKILL)
        shell.wait(5)
        await session.close()
        await host.close()


async def test_a_server_whose_group_is_gone_is_stated_exited_with_its_log(tmp_path, data_dir, monkeypatch):
    """The monitor reports a process group gone; the session looks again (nothing runs) and the monitor
    states the server `failed`, "exited", with the log's last lines and its failure line."""
    import subprocess

    import eagle3_tui.session.live.monitor as monitor
    from eagle3_tui.remote.local import LocalHost
    from tests.plugins.ports import free_port

    monkeypatch.setattr(monitor, "POLL_INTERVAL_S", 0.2)
    log = tmp_path / "server.log"
    log.write_text("loading\n[2025-12-09 10:00:01] Scheduler hit an exception: CUDA error: an illegal memory access\n")
    gone = subprocess.Popen(["true"], start_new_session=True)
    gone.wait(10)  # its group is gone before the session looks
    host = LocalHost()
    session = Session(Profile(name="gone", local=True, port=free_port(), log_path=str(log),
                              state_dir=str(tmp_path / "st")), host=host)
    try:
        await session.attach()
        session.views.set_server(session.server.with_process(gone.pid, gone.pid, None).with_state("ready"))
        await wait_until(lambda: session.server.state == "failed")
        assert "exited" in session.server.message and "illegal memory access" in session.server.message
        assert session.server.log_tail and session.server.log_tail[-1].endswith("an illegal memory access")
    finally:
        await session.close()
        await host.close()
