"""Several nodes: the sim's node flags, and the one restart path restarting every node from the head."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eagle3_tui.profile import Profile
from eagle3_tui.remote.errors import ConnectionLost
from eagle3_tui.remote.local import LocalHost
from eagle3_tui.session import Session
from eagle3_tui.session.events import RestartFailed
from eagle3_tui.session.host.discovery import discover_servers
from eagle3_tui.sim.nodes import check_flags, parse_addr
from tests.plugins.world import READY, free_port, stop_processes_under


def ns(**kw: object) -> argparse.Namespace:
    return argparse.Namespace(**{"nnodes": 1, "node_rank": 0, "dist_init_addr": None, **kw})


def test_sim_node_flags_are_checked_in_one_sentence() -> None:
    assert parse_addr("10.0.0.1:5000") == ("10.0.0.1", 5000) and parse_addr("[::1]:5000") == ("::1", 5000)
    with pytest.raises(ValueError, match="is not HOST:PORT"):
        parse_addr("10.0.0.1")
    assert check_flags(ns()) is None and check_flags(ns(nnodes=2, node_rank=1, dist_init_addr="h:1")) is None
    assert check_flags(ns(nnodes=2, node_rank=2, dist_init_addr="h:1")) == "--node-rank 2 is not within --nnodes 2"
    assert check_flags(ns(nnodes=2)) == "--dist-init-addr HOST:PORT is required with --nnodes > 1"
    assert check_flags(ns(nnodes=2, dist_init_addr="h:99999")) == "--dist-init-addr 'h:99999' is not HOST:PORT"


def test_sim_node_whose_head_does_not_answer_exits_and_a_head_that_cannot_bind_says_so(demo_world, tmp_path) -> None:
    import socket

    held = socket.socket()
    held.bind(("127.0.0.1", 0))
    held.listen(1)
    busy = f"127.0.0.1:{held.getsockname()[1]}"
    base = [sys.executable, "-m", "eagle3_tui.sim.server", "--model-path", str(demo_world.target_dir),
            "--host", "127.0.0.1", "--nnodes", "2"]
    with held:
        head = subprocess.run([*base, "--port", str(free_port()), "--node-rank", "0", "--dist-init-addr", busy],
                              capture_output=True, text=True, timeout=30)
    node = subprocess.run([*base, "--port", str(free_port()), "--node-rank", "1", "--dist-timeout", "1",
                           "--dist-init-addr", f"127.0.0.1:{free_port()}"], capture_output=True, text=True, timeout=30)
    assert head.returncode == 1 and f"the dist-init address {busy} cannot be bound" in head.stderr
    assert node.returncode == 1 and "did not answer within 1 s" in node.stderr


# ---------------------------------------------------------------- two sim nodes on loopback


def _start_node(world, tmp: Path, name: str, model: Path, *, port: int, rank: int, dist: str) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "eagle3_tui.sim.server", "--model-path", str(model), "--host", "127.0.0.1",
            "--port", str(port), "--nnodes", "2", "--node-rank", str(rank), "--dist-init-addr", dist,
            "--dist-timeout", "30"]
    with open(tmp / f"{name}.log", "wb") as log:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=tmp)


async def _until(pred, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_two_nodes_restart_together_and_a_node_that_does_not_come_back_fails(demo_world, tmp_path):
    head_port, node_port, dist_port = free_port(), free_port(), free_port()
    dist = f"127.0.0.1:{dist_port}"
    node_model = tmp_path / "node1-model"  # node 1's own path to the target: removed to make it fail
    node_model.symlink_to(demo_world.target_dir)
    node = _start_node(demo_world, tmp_path, "node1", node_model, port=node_port, rank=1, dist=dist)
    head = _start_node(demo_world, tmp_path, "head", Path(demo_world.target_dir), port=head_port, rank=0, dist=dist)
    head_log, node_log = tmp_path / "head.log", tmp_path / "node1.log"
    prof = Profile(name="nodes", local=True, port=head_port, nodes=["127.0.0.1", "127.0.0.1"],
                   state_dir=str(tmp_path / "state"), restart_deadline_s=60.0)
    session = Session(prof, host=LocalHost())
    try:
        await _until(lambda: READY in head_log.read_text() and "joined the head" in node_log.read_text())
        await session.attach()
        assert session.deployment.nodes == 2 and session.server.pid == head.pid
        assert session.restarter.nodes is not None and session.server.deployment == "2 nodes: 127.0.0.1, 127.0.0.1"

        await session.control.restart()
        assert session.server.state == "ready" and session.server.pid not in (None, head.pid)
        # stop order: node 1 was stopped (SIGTERM) while its head still ran; it never lost the head
        old_node_log = next(p for p in tmp_path.glob("node1.log.*")).read_text()
        assert "node 1 of 2 shutting down (SIGTERM)" in old_node_log and "lost the head" not in old_node_log
        assert node.wait(5) == 0 and head.wait(5) == 0
        # start order: the head first, then node 1, which joined it
        servers = {s.deployment.node_rank: s for s in await discover_servers(session.host)
                   if s.deployment.dist_init == dist}
        assert set(servers) == {0, 1} and servers[0].pid == session.server.pid
        assert servers[0].start_time < servers[1].start_time
        await _until(lambda: "joined the head" in node_log.read_text(), 10)

        await session.control.stop()  # both stopped, node 1 first; each is remembered for the next start
        assert [s for s in await discover_servers(session.host) if s.deployment.dist_init == dist] == []
        assert "shutting down (SIGTERM)" in node_log.read_text()

        node_model.unlink()  # node 1 cannot start again: it exits at once
        t0 = time.monotonic()
        with pytest.raises(RestartFailed, match=r"node 1 of 2 \(127\.0\.0\.1\) did not come back: .*no config\.json"):
            await session.control.restart()
        assert time.monotonic() - t0 < 20  # the node's exit failed it, not the restart deadline
        assert session.server.state == "failed"
        assert any("has no config.json" in line for line in session.server.log_tail)  # node 1's own tail
        left = [s for s in await discover_servers(session.host) if s.deployment.dist_init == dist]
        assert left == []  # the failed restart stopped the head it launched
    finally:
        await session.close()
        stop_processes_under(tmp_path)


async def test_a_node_never_seen_refuses_the_restart_with_nothing_stopped(tmp_path) -> None:
    from eagle3_tui.session.deploy.nodes import NodeGroup, host_factory, node_spec
    from eagle3_tui.session.host.deployment import Deployment
    from eagle3_tui.session.host.discovery import ServerProcess
    from eagle3_tui.session.restart.strategy import Parts

    pane = ServerProcess(9, 9, None, ("python", "-m", "sglang.launch_server", "--model-path", "/m", "--port", "31000"),
                         "/w", {}, None, 31000, "sglang")
    assert node_spec(pane, 1).log_path == "/tmp/eagle3-tui-sglang-31000-node1.log"  # not the head's default log
    own = LocalHost()
    prof = Profile(name="nodes", local=True, nodes=["127.0.0.1", "gpu-b"])
    host_for = host_factory(prof, own)
    assert host_for("127.0.0.1") is own and host_for("localhost") is own
    assert host_for("gpu-b") is not own and host_for("gpu-b").name == "gpu-b"  # reached over SSH, not connected here
    dep = Deployment(nodes=2, dist_init=f"127.0.0.1:{free_port()}", node_hosts=("127.0.0.1", "127.0.0.1"))
    parts = Parts(own, None, None, None, 60.0, None)  # type: ignore[arg-type]  # find touches only the host
    with pytest.raises(RestartFailed, match=r"node 1 of 2 \(127\.0\.0\.1\): no server with --node-rank 1 "
                                            r"--dist-init-addr 127\.0\.0\.1:\d+ runs there .* nothing was stopped"):
        await NodeGroup(parts, dep, host_for).find(0.0)

    class Unreachable(LocalHost):
        async def connect(self, timeout: float | None = None) -> None:
            raise ConnectionLost("gpu-b: connection refused")

    with pytest.raises(RestartFailed, match=r"node 1 of 2 \(gpu-b\) cannot be reached: gpu-b: connection refused; "
                                            "nothing was stopped"):
        await NodeGroup(parts, dataclasses.replace(dep, node_hosts=("127.0.0.1", "gpu-b")),
                        lambda name: Unreachable()).find(0.0)
