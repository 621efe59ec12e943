"""A systemd unit logging to the journal only: `journalctl -u UNIT -f -o cat` feeds the one log feed.

No systemd (so no journal) runs in CI: `journalctl` on PATH is a FAKE that records its arguments and
follows a plain file the test writes (what `-o cat` prints: the message only).
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from eagle3_tui.remote.local import LocalHost
from eagle3_tui.session.events import ConnView, LogBatch, ServerView, SessionEvent
from eagle3_tui.session.host.deployment import ProcView, classify, journal_source
from eagle3_tui.session.live.journal import JournalFollow
from eagle3_tui.session.live.logfeed import LogFeed
from eagle3_tui.session.live.runstate import RunTracker
from eagle3_tui.session.views import Views
from eagle3_tui.telemetry.metrics import Telemetry

DECODE = ("[2026-12-01 10:24:03] Decode batch, #running-req: 1, #token: 54, token usage: 0.00, accept len: 1.38, "
          "accept rate: 0.34, cpu graph: False, gen throughput (token/s): 70.77, #queue-req: 0, ")


async def test_journal_lines_reach_the_feed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    journal = tmp_path / "journal.txt"
    journal.write_text("[2026-12-01 10:24:03] The server is fired up and ready to roll!\n")
    calls = tmp_path / "calls"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "journalctl"
    fake.write_text(f'#!/bin/sh\n# a FAKE journalctl (no journal in CI)\necho "$*" >> {calls}\nexec tail -n +1 -f {journal}\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    dep = classify(ProcView(9, cgroup="0::/system.slice/sglang.service\n", stdout="socket:[5]"))
    assert dep.kind == "systemd" and journal_source("sglang") == "journalctl -u sglang"
    host = LocalHost()
    views = Views(ConnView("local"), ServerView())
    heard: list[SessionEvent] = []
    views.add_listener(heard.append)
    telemetry = Telemetry()
    feed = LogFeed(host, RunTracker(), views, telemetry)
    follow = JournalFollow(host, feed, views, "sglang")
    follow.start(asyncio.ensure_future)
    try:
        with journal.open("a") as f:
            for _ in range(3):
                f.write(DECODE + "\n")
        deadline = time.monotonic() + 20
        while not telemetry.series["accept_len"].window(0, time.time() + 1):
            assert time.monotonic() < deadline, heard
            await asyncio.sleep(0.1)

        # the listeners hear the lines batched, up to EMIT_INTERVAL_S after the telemetry has them
        def lines() -> list[str]:
            return [line for ev in heard if isinstance(ev, LogBatch) for line in ev.lines]
        while not any(DECODE in line for line in lines()):
            assert time.monotonic() < deadline, heard
            await asyncio.sleep(0.05)
        assert "ready to roll" in lines()[0]
        assert calls.read_text().split() == ["-u", "sglang.service", "-f", "-o", "cat", "-n", "200", "--no-pager"]
    finally:
        await follow.stop()
        await feed.close()
        await host.close()
