"""Real SGLang 0.5.23 serving the demo world on this CPU, as test fixtures (the `real_sglang` lane).

- `start_real_sglang(world, workdir, *, draft_dir=..., steps=3, topk=1, draft_tokens=4, extra=(), log=True,
  wait_ready=True) -> RealServer`: starts the server as a user does, `python -m sglang.launch_server ...
  2> server.log` (stdout to its own file; `log=False`: no log file at all, stderr to /dev/null), in its own
  process group, with the environment `session.real_sglang` gives (SGLANG_USE_CPU_ENGINE, OMP_NUM_THREADS,
  PYTHONPATH with engines/sglang/cpu_support), and waits for SGLang's ready line (or its exit).
- `real_sglang` (session): one EAGLE-3 server (3 steps, topk 1, 4 draft tokens; a draft copy without a
  layer-id key: SGLang's default wiring) shared by every test that does not restart it.
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
from eagle3_tui.session.real_sglang import MISSING, RealSglang, find_real_sglang, server_argv
from tests.plugins.ports import free_port
from tests.plugins.world import make_draft_dir

__all__ = [
    "RealServer",
    "real_sglang",
    "real_sglang_env",
    "start_real_sglang",
]

READY = "The server is fired up and ready to roll!"
# A server is ready in 20-40 s on 2 idle cores; on a 2-core machine busy with other suites it took over 240 s.
START_TIMEOUT_S = 420.0


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
    env = real.env({k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    log_path = workdir / "server.log" if log else None
    with open(workdir / "stdout.log", "wb") as out:
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


@pytest.fixture(scope="session")
def real_sglang(real_sglang_env: RealSglang, demo_world: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealServer]:
    server = start_real_sglang(real_sglang_env, demo_world, tmp_path_factory.mktemp("real-sglang"))
    try:
        yield server
    finally:
        server.stop()

