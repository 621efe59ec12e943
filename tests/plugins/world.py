"""The demo world and the sim server as test fixtures.

- `demo_world` (session): `eagle3_tui.sim.world.ensure_world()`, i.e. the cached world under the
  user cache dir (`EAGLE3_TUI_CACHE_DIR` overrides the root). The first run of the suite builds it
  (about 4 minutes of one CPU); every later test and run reuses it. While it is not cached, the
  tests that use it get a longer timeout (a collection hook) so the build is not cut off.
- `make_draft_dir(world, dest, layer_ids=None)`: a draft dir whose config.json carries
  `eagle_config.eagle_aux_hidden_state_layer_ids = layer_ids` (or no key), weights symlinked.
- `start_sim_server(world, workdir, *, args=(), draft_dir=None, ...) -> SimServer`: starts
  `python -m eagle3_tui.sim.server` on a free 127.0.0.1 port in its own process group, log
  redirected to `workdir/server.log`, and waits for "The server is fired up and ready to roll!"
  (or for the process to exit, when `wait_ready=False` / it fails). `SimServer.stop()` sends TERM.
- `sim_server` (function fixture): a factory `sim_server(*args, draft_dir=None, layer_ids=None,
  wait_ready=True)` bound to `demo_world` and `tmp_path` that stops every server it started.
  Without `args` the server speculates with 3 steps, topk 1 and 4 draft tokens.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from eagle3_tui.remote.procgroup import stop_group
from tests.plugins.ports import free_port

__all__ = [
    "SERVER_START_S",
    "SimServer",
    "demo_world",
    "free_port",
    "make_draft_dir",
    "pytest_collection_modifyitems",
    "sim_server",
    "start_sim_server",
    "stop_processes_under",
    "stray_process_guard",
]

# The first test that needs the demo world builds it (about 4 minutes of one CPU): more than the
# suite's per-test timeout on a busy machine. Only while the world is not cached yet.
BUILD_TIMEOUT_S = 1800

READY = "The server is fired up and ready to roll!"
# How long a sim server may take to say it is ready before a test gives up on it: a deadline for a
# failure, not a measurement. Loading torch and the world takes seconds when idle and many times that on
# a 2-core machine with the suite's workers and other load beside it.
SERVER_START_S = 180.0
SPEC_ARGS = (
    "--speculative-algorithm",
    "EAGLE3",
    "--speculative-num-steps",
    "3",
    "--speculative-eagle-topk",
    "1",
    "--speculative-num-draft-tokens",
    "4",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Give tests that use the demo world room for its one-time build, when it is not cached yet."""
    from eagle3_tui.sim.world import cached_world

    users = [i for i in items if {"demo_world", "sim_server"} & set(getattr(i, "fixturenames", ()))]
    if users and cached_world() is None:
        for item in users:
            item.add_marker(pytest.mark.timeout(BUILD_TIMEOUT_S))


@pytest.fixture(scope="session")
def demo_world() -> Any:
    import torch

    from eagle3_tui.sim.world import ensure_world

    torch.set_num_threads(1)  # a 2-core machine shared by parallel work: one thread builds fastest
    return ensure_world(progress=lambda msg: print(msg, file=sys.stderr, flush=True))


def make_draft_dir(world: Any, dest: Path, layer_ids: Sequence[int] | None = None) -> Path:
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    cfg = json.loads((Path(world.draft_dir) / "config.json").read_text())
    cfg.pop("eagle_config", None)
    if layer_ids is not None:
        cfg["eagle_config"] = {
            "eagle_aux_hidden_state_layer_ids": list(layer_ids),
            "use_aux_hidden_state": True,
        }
    (dest / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    weights = dest / "model.safetensors"
    if not weights.exists():
        weights.symlink_to(Path(world.draft_dir) / "model.safetensors")
    return dest


def check_fields(world: Any) -> dict[str, Any]:
    """The host-profile fields a check over the world needs: its draft, target and training data."""
    return {"draft_path": world.draft_dir, "target_path": world.target_dir, "data_glob": world.data_glob,
            "data_slots": list(world.slot_boundaries)}


@dataclass
class SimServer:
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def wait_for(self, text: str, timeout: float = SERVER_START_S) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if text in self.log_text():
                return True
            if self.proc.poll() is not None:
                return text in self.log_text()
            time.sleep(0.05)
        return False

    def stop(self, timeout: float = 15.0) -> int:
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        return int(self.proc.returncode)


def start_sim_server(
    world: Any,
    workdir: Path,
    *,
    args: Sequence[str] = SPEC_ARGS,
    draft_dir: Path | None = None,
    wait_ready: bool = True,
    timeout: float = SERVER_START_S,
    log_name: str = "server.log",
) -> SimServer:
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    argv = [sys.executable, "-m", "eagle3_tui.sim.server", "--model-path", str(world.target_dir)]
    if "--speculative-algorithm" in args:
        argv += ["--speculative-draft-model-path", str(draft_dir or world.draft_dir)]
    argv += [*args, "--host", "127.0.0.1", "--port", str(port)]
    log_path = workdir / log_name
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=workdir
        )
    server = SimServer(proc, port, log_path)
    if wait_ready and not server.wait_for(READY, timeout):
        server.stop()
        raise AssertionError(f"sim server did not become ready:\n{server.log_text()[-3000:]}")
    if not wait_ready:
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
    return server


def stop_processes_under(path: Path, grace: float = 10.0) -> list[str]:
    """Stop (TERM, grace, KILL) the process group of every process whose command line names `path`;
    return their command lines. For tests whose servers a Session launched detached: a failed or
    timed-out test must not leave a sim server eating the CPU of every test after it."""
    marker = str(path).encode()
    own = {os.getpid(), os.getpgid(0)}
    groups: dict[int, str] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in own:
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            pgid = os.getpgid(int(entry.name))
        except (OSError, ProcessLookupError):
            continue
        if marker in cmdline and pgid not in own:
            groups[pgid] = cmdline.replace(b"\0", b" ").decode(errors="replace")[:200]
    for pgid in groups:
        stop_group(pgid, grace)
    return list(groups.values())


@pytest.fixture(scope="session", autouse=True)
def stray_process_guard(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """At the end of the run, stop whatever a test left running under the run's temp dir, and say so."""
    yield
    left = stop_processes_under(tmp_path_factory.getbasetemp())
    if left:
        print(f"\nstopped {len(left)} process group(s) left running by tests:", *left, sep="\n  ",
              file=sys.stderr)


@pytest.fixture
def sim_server(demo_world: Any, tmp_path: Path) -> Iterator[Callable[..., SimServer]]:
    started: list[SimServer] = []

    def factory(
        *args: str,
        draft_dir: Path | None = None,
        layer_ids: Sequence[int] | None = None,
        wait_ready: bool = True,
        timeout: float = SERVER_START_S,
    ) -> SimServer:
        n = len(started)
        if layer_ids is not None and draft_dir is None:
            draft_dir = make_draft_dir(demo_world, tmp_path / f"draft{n}", layer_ids)
        server = start_sim_server(
            demo_world,
            tmp_path / f"server{n}",
            args=args or SPEC_ARGS,
            draft_dir=draft_dir,
            wait_ready=wait_ready,
            timeout=timeout,
        )
        started.append(server)
        return server

    yield factory
    for server in started:
        server.stop()
