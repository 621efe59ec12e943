"""Hostile strings are data; nothing the host layer starts outlives the client that closed."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from eagle3_tui.remote import FollowBatch, Host

NASTY = [
    "two words",
    "it's",
    'say "hi"',
    "a;b",
    "$(touch pwned)",
    "`touch pwned`",
    "line1\nline2",
    "-n",
    "*",
    "$HOME",
    "back\\slash",
    "trailing space ",
    "",
    "ünïcødé",
    "| cat /etc/passwd > pwned &",
]


@pytest.fixture
def host(any_host: Host) -> Host:
    return any_host


def _no_pwned(*dirs: Path) -> None:
    for d in (*dirs, Path.home(), Path("/")):
        assert not (d / "pwned").exists(), f"a command was executed: {d / 'pwned'} exists"


async def test_arguments_are_data(host: Host, tmp_path: Path) -> None:
    res = await host.run([sys.executable, "-c", "import sys, json; print(json.dumps(sys.argv[1:]))", *NASTY],
                         cwd=str(tmp_path))
    import json

    assert json.loads(res.stdout) == NASTY
    async with host.stream(["printf", "%s\\n", "$(touch pwned);x", "a b"]) as s:
        assert [line async for line in s] == ["$(touch pwned);x", "a b"]
    _no_pwned(tmp_path)


async def test_paths_are_data(host: Host, tmp_path: Path) -> None:
    weird = tmp_path / "dir with space; $(touch pwned) it's\nnewline"
    weird.mkdir()
    res = await host.run(["pwd"], cwd=str(weird))
    assert res.stdout == f"{weird}\n"
    cfg = weird / "cfg `touch pwned`.json"
    w = await host.write_atomic(str(cfg), "{}\n", expect_sha256=None)
    assert cfg.read_text() == "{}\n"
    await host.write_atomic(str(cfg), "[]\n", expect_sha256=w.sha256)
    assert await host.read_text(str(cfg)) == "[]\n"
    assert (await host.stat(str(cfg))).size == 3
    assert await host.glob(str(weird / "*.json")) == [str(cfg)]
    log = weird / "log $(touch pwned).log"
    log.write_text("x\n")
    async with host.follow(str(log), start="begin") as fol:
        async for item in fol:
            if isinstance(item, FollowBatch):
                assert item.lines == ["x"]
                break
    slog = weird / "server 'log'.log"
    pgid = await host.spawn_detached(
        ["sh", "-c", 'printf "%s|" "$@"', "sh", "a b", "$(touch pwned)"],
        cwd=str(weird),
        env={"X": "$(touch pwned); y"},
        log_path=str(slog),
    )
    for _ in range(100):
        if slog.exists() and slog.read_text():
            break
        await asyncio.sleep(0.05)
    assert slog.read_text() == "a b|$(touch pwned)|"
    assert await host.stop_group(pgid, 1) in ("not-running", "stopped")
    _no_pwned(tmp_path, weird)


async def test_stop_group_refuses_dangerous_ids(host: Host) -> None:
    from eagle3_tui.remote import HostError

    for bad in (0, 1, -5):
        with pytest.raises(HostError):
            await host.stop_group(bad, 1)
    with pytest.raises(HostError):
        await host.spawn_detached(["true"], cwd="/", env={"BAD NAME": "x"}, log_path="/tmp/x.log")


def _ps_args() -> list[str]:
    return subprocess.run(["ps", "-ww", "-eo", "args="], capture_output=True, text=True, check=True).stdout.splitlines()


async def test_nothing_is_left_running_after_close(host: Host, tmp_path: Path) -> None:
    """A follower, a stream (running a job that ignores nothing but its watchdog) and an in-flight
    command are all gone from `ps` once the host is closed."""
    token = uuid.uuid4().hex
    log = tmp_path / f"follow-{token}.log"
    log.write_text("a\n")
    fol = host.follow(str(log), start="begin")
    first = await asyncio.wait_for(fol.__anext__(), 20)
    assert first is not None
    sleeper = "import sys, time; print('up', flush=True); time.sleep(300)"
    stream = host.stream([sys.executable, "-c", sleeper, f"{token}-stream"])
    await stream.__aenter__()
    assert await asyncio.wait_for(stream.__anext__(), 20) == "up"
    job = asyncio.ensure_future(host.run([sys.executable, "-c", sleeper, f"{token}-run"], timeout=600))
    for _ in range(100):
        if any(f"{token}-run" in a for a in _ps_args()):
            break
        await asyncio.sleep(0.05)
    running = [a for a in _ps_args() if token in a]
    assert any(f"follow-{token}" in a for a in running)
    assert any(f"{token}-stream" in a for a in running)
    assert any(f"{token}-run" in a for a in running)
    await host.close()
    await asyncio.wait([job], timeout=60)  # generous: a loaded machine is slow, the test asserts that it ends
    assert job.done()  # ended with the host (an error, or the exit of a killed command)
    if not job.cancelled():
        job.exception()
    left: list[str] = []
    for _ in range(100):
        left = [a for a in _ps_args() if token in a]
        if not left:
            break
        await asyncio.sleep(0.05)
    assert left == []
