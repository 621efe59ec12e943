"""Fault test: the follower loses nothing and repeats nothing while the connection is cut 20 times
and the file is rotated twice, with a writer appending as fast as it can."""

from __future__ import annotations

import asyncio
import os
import random
import threading
from pathlib import Path
from typing import Any

from eagle3_tui.remote import FollowBatch, FollowEvent
from tests.plugins.sshd import SshdServer

TOTAL = 200_000
KILLS = 20


def _writer(log: Path, rotate_at: set[int], done: threading.Event) -> None:
    """Append 1..TOTAL, one write per line; at the chosen lines rename the file away (logrotate
    style, to distinct names) and continue in a new file at the same path."""
    f = open(log, "a", buffering=1)  # line buffered: every line is its own append
    rotations = 0
    try:
        for i in range(1, TOTAL + 1):
            if i in rotate_at:
                f.close()
                rotations += 1
                os.rename(log, log.with_name(f"{log.name}.{rotations}"))
                f = open(log, "a", buffering=1)
            f.write(f"{i}\n")
    finally:
        f.close()
        done.set()


async def test_exactly_once_through_kills_and_rotations(sshd: SshdServer, ssh_host_factory: Any, tmp_path: Path) -> None:
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    # a small SSH window keeps the data in flight (sent, not yet read) small, so the kills land
    # all along the stream instead of in the last stretch
    host = await ssh_host_factory(backoff_initial=0.02, backoff_cap=0.2, window=16384)
    log = tmp_path / "server.log"
    log.write_text("")
    rotate_at = set(rng.sample(range(20_000, TOTAL - 20_000), 2))
    # one kill in each stretch of 8,000 lines, at a random point of it (a kill is due once the
    # count passes its mark and the previous kill's reconnect has happened)
    kill_at = [8_000 * k + rng.randrange(500, 7_500) for k in range(KILLS)]
    got: list[str] = []
    events: list[str] = []
    kills: list[int] = []
    first_gen = host.generation
    done = threading.Event()

    async def consume() -> None:
        async with host.follow(str(log), start="begin") as fol:
            async for item in fol:
                if isinstance(item, FollowEvent):
                    events.append(item.kind)
                    if item.kind == "opened" and not writer.is_alive() and not done.is_set():
                        writer.start()  # the file is being followed: start writing
                    continue
                assert isinstance(item, FollowBatch)
                got.extend(item.lines)
                if len(got) >= TOTAL:
                    return

    async def killer() -> None:
        """Cut the connection once the count passes each mark (at most once per connection)."""
        last_kill_gen = -1
        while kill_at:
            if len(got) >= kill_at[0] and host.generation != last_kill_gen and host.local_port:
                if sshd.kill_connection(host.local_port):
                    kills.append(len(got))
                    kill_at.pop(0)
                    last_kill_gen = host.generation
            await asyncio.sleep(0.002)

    writer = threading.Thread(target=_writer, args=(log, rotate_at, done), daemon=True)
    kill_task = asyncio.ensure_future(killer())
    try:
        await asyncio.wait_for(consume(), 180)
    finally:
        kill_task.cancel()
        done.wait(30)
    assert len(kills) == KILLS, f"seed {seed}: only {len(kills)} kills landed"
    for _ in range(400):  # the last kill may land after the final line was already on its way
        if host.generation - first_gen == KILLS:
            break
        await asyncio.sleep(0.05)
    assert host.generation - first_gen == KILLS, f"seed {seed}"
    assert events.count("rotated") >= 2, f"seed {seed}: {events}"
    # exactly 1..200000, in order (compare cheaply first, then show where it broke)
    expected = [str(i) for i in range(1, TOTAL + 1)]
    if got != expected:
        bad = next((k for k, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b), min(len(got), TOTAL))
        raise AssertionError(
            f"seed {seed}: {len(got)} lines; first difference at index {bad}: "
            f"got {got[bad - 2 : bad + 3]} expected {expected[bad - 2 : bad + 3]}; kills at {kills}, rotations {sorted(rotate_at)}"
        )
