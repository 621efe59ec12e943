"""Several nodes (`--nnodes N`): the one restart path restarts every node with the head, in SGLang's order.

The console attaches to the head (rank 0: it serves HTTP and logs the stats). Before anything is
stopped, each other node's server is found on its host (the profile's `nodes`, in rank order) by its
`--node-rank` and `--dist-init-addr`; a node not running now is launched again from what was seen of
it earlier in the session, and a node never seen refuses the restart with nothing stopped. Ranks > 0
are stopped first (highest first: a node whose head went away first fails on its own), then the head;
the head is launched first (it opens the address the others join), then the others. Readiness is the
head's; a node that exits meanwhile, or is gone once the head is ready, fails the restart naming that
node with its own log tail, and everything the restart launched is stopped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import posixpath
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from eagle3_tui.errors import UserError
from eagle3_tui.profile import LOCAL_NAMES
from eagle3_tui.session.events import RestartFailed
from eagle3_tui.session.host.discovery import ServerProcess, default_log_path, discover_servers
from eagle3_tui.session.launch import LaunchSpec
from eagle3_tui.session.live.logfeed import LOG_TAIL_LINES
from eagle3_tui.session.restart.strategy import NodeFailed
from eagle3_tui.session.restart_timing import FAILED_STOP_GRACE_S, STOP_GRACE_S

if TYPE_CHECKING:
    from eagle3_tui.profile import Profile
    from eagle3_tui.remote.host import Host
    from eagle3_tui.session.host.deployment import Deployment
    from eagle3_tui.session.restart.strategy import Parts

CONNECT_TIMEOUT_S = 30.0

HostFor = Callable[[str], "Host"]


@dataclass
class Node:
    """One node other than the head: how it is launched, and its process group while it runs."""

    rank: int
    host_name: str
    spec: LaunchSpec
    pgid: int | None
    launched: bool = False


def node_spec(proc: ServerProcess, rank: int) -> LaunchSpec:
    """The node's launch; a node not logging to a file gets one of its own (not the head's default)."""
    spec = proc.spec()
    if spec.log_path is None:
        own = posixpath.splitext(default_log_path(spec.port))[0] + f"-node{rank}.log"
        spec = dataclasses.replace(spec, log_path=own)
    return spec


def host_factory(profile: Profile, own: Host) -> HostFor:
    """The host of a node named in the profile's `nodes`: the session's own when it names that machine."""
    from eagle3_tui.session.connection import make_host

    def host_for(name: str) -> Host:
        if name == profile.target or (profile.local and name in LOCAL_NAMES):
            return own
        return make_host(dataclasses.replace(profile, name=name, address=name, local=name in LOCAL_NAMES))

    return host_for


class NodeGroup:
    """The nodes other than the head, driven by `Restarter` at its steps (find, stop, start, check)."""

    def __init__(self, parts: Parts, deployment: Deployment, host_for: HostFor) -> None:
        self._parts = parts
        self.deployment = deployment
        self._host_for = host_for
        self._nodes: dict[int, Node] = {}
        self._hosts: dict[str, Host] = {}

    @property
    def nodes(self) -> list[Node]:
        return [self._nodes[r] for r in sorted(self._nodes)]

    def _host(self, name: str) -> Host:
        host = self._hosts.get(name)
        if host is None:
            host = self._hosts[name] = self._host_for(name)
        return host

    def _who(self, node: Node | int, name: str | None = None) -> str:
        rank = node.rank if isinstance(node, Node) else node
        where = node.host_name if isinstance(node, Node) else name
        return f"node {rank} of {self.deployment.nodes} ({where})"

    def _is_node(self, proc: ServerProcess, rank: int) -> bool:
        dep = proc.deployment
        return dep.node_rank == rank and dep.nodes == self.deployment.nodes and dep.dist_init == self.deployment.dist_init

    async def find(self, t0: float) -> None:
        """Every other node's server, before anything is stopped (RestartFailed: nothing was touched)."""
        dep = self.deployment
        for rank in range(1, dep.nodes):
            name = dep.node_hosts[rank]
            try:
                host = self._host(name)
                await host.connect(CONNECT_TIMEOUT_S)
                servers = await discover_servers(host)
            except UserError as err:
                raise RestartFailed(f"{self._who(rank, name)} cannot be reached: {err}; nothing was stopped") from None
            proc = next((s for s in servers if self._is_node(s, rank)), None)
            known = self._nodes.get(rank)
            if proc is not None:
                if proc.deployment.kind != "process":
                    raise RestartFailed(f"{self._who(rank, name)} runs as a {proc.deployment.kind}: the console "
                                        "restarts several nodes only when each is a plain process; nothing was stopped")
                self._nodes[rank] = Node(rank, name, node_spec(proc, rank), proc.pgid)
            elif known is not None:
                known.pgid = None
                self._parts.progress("stopping", f"{self._who(known)} is not running: it is launched again", t0)
            else:
                raise RestartFailed(
                    f"{self._who(rank, name)}: no server with --node-rank {rank} --dist-init-addr {dep.dist_init} "
                    "runs there (and none was seen in this session): start it there, then restart; nothing was stopped")

    async def stop_others(self, t0: float) -> None:
        """Ranks > 0 first, highest first (the head is stopped after them)."""
        for node in reversed(self.nodes):
            if node.pgid is None:
                continue
            outcome = await self._host(node.host_name).stop_group(node.pgid, grace=STOP_GRACE_S)
            self._parts.progress("stopping", f"{self._who(node)}: process group {node.pgid}: {outcome}", t0)
            node.pgid = None

    async def start_others(self, t0: float) -> None:
        """After the head was launched: every other node, lowest rank first."""
        for node in self.nodes:
            spec = node.spec
            assert spec.log_path is not None
            self._parts.progress("launching", f"launching {self._who(node)}", t0)
            cwd = spec.cwd or posixpath.dirname(spec.log_path) or "/"
            node.pgid = await self._host(node.host_name).spawn_detached(list(spec.argv), cwd=cwd, env=spec.env,
                                                                       log_path=spec.log_path, clear_env=spec.env_whole)
            node.launched = True

    async def check_others(self) -> None:
        """Each launched node still runs (NodeFailed naming the first that does not, with its log tail)."""
        for node in self.nodes:
            if node.launched and node.pgid is not None and not await self._host(node.host_name).group_alive(node.pgid):
                node.pgid = None
                tail = await self._tail(node)
                last = next((line for line in reversed(tail) if line.strip()), "its log is empty")
                raise NodeFailed(f"{self._who(node)} did not come back: its server exited after the restart "
                                 f"(log {node.spec.log_path}): {last}", tail)

    async def _tail(self, node: Node) -> tuple[str, ...]:
        assert node.spec.log_path is not None
        return await self._host(node.host_name).tail_lines(node.spec.log_path, LOG_TAIL_LINES)

    async def stop_launched(self, t0: float) -> None:
        """A failed restart stops the nodes it launched (a head without them, or they without it, serve nothing)."""
        for node in reversed(self.nodes):
            if node.launched and node.pgid is not None:
                with contextlib.suppress(UserError):
                    outcome = await self._host(node.host_name).stop_group(node.pgid, grace=FAILED_STOP_GRACE_S)
                    self._parts.progress("failed", f"stopped {self._who(node)} (group {node.pgid}: {outcome})", t0)
                node.pgid = None

    async def done(self) -> None:
        """After a restart or stop: close the connections opened to the nodes (not the session's host)."""
        hosts, self._hosts = self._hosts, {}
        for node in self.nodes:
            node.launched = False
        for host in hosts.values():
            if host is not self._parts.host:
                with contextlib.suppress(Exception):
                    await host.close()
