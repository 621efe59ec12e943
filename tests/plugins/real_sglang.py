"""Real SGLang 0.5.23 serving the demo world on this CPU, as test fixtures (the `real_sglang` lane).

- `start_real_sglang(world, workdir, *, draft_dir=..., steps=3, topk=1, draft_tokens=4, extra=(), log=True,
  wait_ready=True) -> RealServer`: starts the server as a user does, `python -m sglang.launch_server ...
  2> server.log` (stdout to its own file; `log=False`: no log file at all, stdout and stderr to /dev/null), in its own
  process group, with the environment `session.real_sglang` gives (SGLANG_USE_CPU_ENGINE, OMP_NUM_THREADS,
  PYTHONPATH with real_engines/sglang/cpu_support; `user_env` over the test's own), and waits for SGLang's ready line (or its exit).
- `real_sglang`: one EAGLE-3 server (3 steps, topk 1 and 16 draft tokens asked for, which SGLang's topk-1 rule
  serves as 4; a draft copy without a layer-id key: SGLang's default wiring; `--log-requests`) shared by every test that does not
  restart it. `real_sglang_taken`: that same server handed to one test that restarts and ends it (the lane's
  story); such tests run last (`pytest_collection_modifyitems`), and a test asking for the shared server after
  it was taken gets a new one.
- `real_sglang_env`: the installed SGLang; skips (or, with EAGLE3_TUI_REQUIRE_REAL_SGLANG=1 as CI sets,
  fails) with the one sentence saying how to build `.venv-sglang` where it is missing.
Every test using these gets the `real_sglang` marker from tests/plugins/lanes.py (`pytest -m real_sglang` runs the lane).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from eagle3_tui.remote.procgroup import stop_group
from eagle3_tui.session.demo.real_sglang import MISSING, RealSglang, find_real_sglang, server_argv
from tests.plugins.ports import free_port
from tests.plugins.world import make_draft_dir

__all__ = [
    "SHARED_USER_ENV",
    "RealServer",
    "real_sglang",
    "real_sglang_env",
    "real_sglang_taken",
    "start_real_sglang",
]

READY = "The server is fired up and ready to roll!"
# A server is ready in 20-40 s on 2 idle cores; on a 2-core machine busy with other suites it took over 240 s.
START_TIMEOUT_S = 420.0


# What the shared server's "user shell" adds to the environment the server needs: a switch SGLang reads
# (its batch lines then carry the forward counter, `Decode batch [N], ...`), so the conformance test holds
# the sim to it and the story sees a relaunch keep it.
SHARED_USER_ENV = {"SGLANG_LOG_FORWARD_ITERS": "1"}
LOG_REQUESTS = ("--log-requests", "--log-requests-level", "0")
"""The shared server logs each request as it finishes (0.5.23: to stdout, its own file here): meta_info only."""


@dataclass
class RealServer:
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path | None
    argv: list[str]
    env: dict[str, str]
    draft_dir: Path | None
    workdir: Path
    ready: bool = False
    stopped: bool = field(default=False)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")

    def wait_for(self, text: str, timeout: float = START_TIMEOUT_S) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log_text():
                return True
            if self.proc.poll() is not None:
                return text in self.log_text()
            time.sleep(0.3)
        return False

    def stop(self) -> None:
        if not self.stopped:
            self.stopped = True
            stop_group(self.proc.pid, 20.0)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def _wait_http_ready(server: RealServer, timeout: float) -> bool:
    """Without a log file: SGLang's /health answers 200 once the warm-up request went through."""
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and server.proc.poll() is None:
        try:
            if httpx.get(server.base_url + "/health", timeout=5).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    return False


def start_real_sglang(
    real: RealSglang,
    world: Any,
    workdir: Path,
    *,
    draft_dir: Path | None = None,
    speculative: bool = True,
    steps: int | None = 3,
    topk: int | None = 1,
    draft_tokens: int | None = 4,
    extra: tuple[str, ...] = (),
    log: bool = True,
    wait_ready: bool = True,
    port: int | None = None,
    user_env: dict[str, str] | None = None,
) -> RealServer:
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    if speculative and draft_dir is None:
        draft_dir = make_draft_dir(world, workdir / "draft")
    port = port or free_port()
    argv = server_argv(
        real, target=world.target_dir, draft=draft_dir if speculative else None, port=port, steps=steps,
        topk=topk, draft_tokens=draft_tokens, decode_log_interval=10, extra=extra,
    )
    env = real.env({**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, **(user_env or {})})
    log_path = workdir / "server.log" if log else None
    # log=False: neither stream goes to a file (discovery would take a stdout file for the log)
    with open(workdir / "stdout.log" if log else os.devnull, "wb") as out:
        err = open(log_path, "wb") if log_path else open(os.devnull, "wb")
        with err:
            proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env, cwd=workdir, start_new_session=True)
    server = RealServer(proc, port, log_path, argv, env, draft_dir if speculative else None, workdir)
    if wait_ready:
        server.ready = server.wait_for(READY) if log else _wait_http_ready(server, START_TIMEOUT_S)
        if not server.ready:
            tail = "\n".join(server.log_text().splitlines()[-30:])
            server.stop()
            raise AssertionError(f"real SGLang did not become ready (exit {proc.poll()}):\n{tail}")
    else:
        try:
            proc.wait(timeout=START_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pass
    return server


@pytest.fixture(scope="session")
def real_sglang_env() -> RealSglang:
    real = find_real_sglang()
    if real is None:
        if os.environ.get("EAGLE3_TUI_REQUIRE_REAL_SGLANG") == "1":
            pytest.fail(MISSING)
        pytest.skip(MISSING)
    return real


class SharedServer:
    """The lane's one shared server, started on first use; restarted only if a test took it before another
    asked for it (the collection order below makes that not happen)."""

    def __init__(self, real: RealSglang, world: Any, factory: pytest.TempPathFactory) -> None:
        self.real, self.world, self.factory = real, world, factory
        self.server: RealServer | None = None
        self.started: list[RealServer] = []

    def get(self) -> RealServer:
        if self.server is None or self.server.stopped or self.server.proc.poll() is not None:
            self.server = start_real_sglang(self.real, self.world, self.factory.mktemp("real-sglang"),
                                            draft_tokens=16, user_env=SHARED_USER_ENV, extra=LOG_REQUESTS)
            self.started.append(self.server)
        return self.server

    def take(self) -> RealServer:
        server, self.server = self.get(), None
        return server


@pytest.fixture(scope="session")
def _real_sglang_shared(real_sglang_env: RealSglang, demo_world: Any,
                        tmp_path_factory: pytest.TempPathFactory) -> Iterator[SharedServer]:
    shared = SharedServer(real_sglang_env, demo_world, tmp_path_factory)
    try:
        yield shared
    finally:
        for server in shared.started:
            server.stop()


@pytest.fixture
def real_sglang(_real_sglang_shared: SharedServer) -> RealServer:
    return _real_sglang_shared.get()


@pytest.fixture
def real_sglang_taken(_real_sglang_shared: SharedServer) -> RealServer:
    return _real_sglang_shared.take()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that take the shared server (and restart or end it) run after every test that shares it."""
    taking = [i for i in items if "real_sglang_taken" in getattr(i, "fixturenames", ())]
    if taking:
        items[:] = [i for i in items if i not in taking] + taking

