"""The deployment part: where the attached server runs, and what that decides for the other parts.

One found server sets: the log decoder (a container's engine log), the restart strategy (its engine,
systemd; None: the console's own relaunch) and the other nodes, the status bar's label, the journal
followed for a unit that logs nowhere else, and which actions are refused, with the reason. A
remembered launch whose server is not running keeps its owner, so that nothing relaunches a
container's or a unit's command on the host. The restarter reads `strategy` and `nodes` from here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING

from eagle3_tui.session.deploy.container import ContainerRestart, EngineLogDecoder, FileView
from eagle3_tui.session.deploy.nodes import NodeGroup, host_factory
from eagle3_tui.session.deploy.systemd import SystemdRestart
from eagle3_tui.session.host.deployment import Deployment
from eagle3_tui.session.live.journal import JournalFollow
from eagle3_tui.session.restart.strategy import Parts, RestartStrategy

if TYPE_CHECKING:
    from eagle3_tui.profile import Profile
    from eagle3_tui.remote.host import Host
    from eagle3_tui.session.connection import ClientFactory
    from eagle3_tui.session.launch import LaunchSpec
    from eagle3_tui.session.live.logfeed import LogFeed
    from eagle3_tui.session.live.runstate import RunTracker
    from eagle3_tui.session.tasks import TaskSet
    from eagle3_tui.session.views import Views


class DeploymentPart:
    def __init__(self, host: Host, profile: Profile, views: Views, feed: LogFeed, tracker: RunTracker,
                 client: ClientFactory, tasks: TaskSet) -> None:
        self._host = host
        self._profile = profile
        self._views = views
        self._feed = feed
        self._tasks = tasks
        self._parts = Parts(host, views, feed, tracker, profile.restart_deadline_s, client)
        self.current = Deployment()
        """Where the attached server runs (deployment.py)."""
        self.strategy: RestartStrategy | None = None
        """Who restarts it when not the console itself (its engine, systemd)."""
        self.nodes: NodeGroup | None = None
        """The other nodes of a multi-node server, restarted with the head."""
        self._journal: JournalFollow | None = None

    def fit(self, dep: Deployment, running_argv: Sequence[str]) -> None:
        """The found server's deployment into the feed, the restart and the server view."""
        if dep.nodes > 1:
            dep = dataclasses.replace(dep, node_hosts=tuple(self._profile.nodes))
        self.current = dep
        self._feed.decode = EngineLogDecoder() if dep.kind == "container" else None
        self.strategy = self._strategy_for(dep, running_argv)
        self.nodes = self._nodes_for(dep)
        self._views.set_server(self._views.server.with_deployment(dep.label or None))
        self._follow_journal(dep)

    def fit_remembered(self, spec: LaunchSpec) -> None:
        """Before a restart with no server adopted: a remembered owner still owns the restart."""
        if self.strategy is None and spec.owner and self.current.kind == "process":
            self.fit(Deployment.from_owner(spec.owner, log=spec.log_path), spec.argv)

    def check(self, action: str, *, into_log: bool = False) -> None:
        """Raise the reason `action` cannot be done safely for this deployment (nothing when it can)."""
        self.current.check(action, into_log=into_log)

    def release_to_log(self) -> None:
        """The user asked to restart a pane's or pipe's server into a log file: the console's own path."""
        self.strategy = None
        self.nodes = None
        self.current = Deployment("process", pid=self.current.pid)

    def files(self) -> Host:
        """Where the server's own paths are read: through the container's root, else the host itself."""
        dep = self.current
        return FileView(self._host, dep) if dep.kind == "container" and dep.pid is not None else self._host

    async def close(self) -> None:
        if self._journal is not None:
            await self._journal.stop()

    def _strategy_for(self, dep: Deployment, running_argv: Sequence[str]) -> RestartStrategy | None:
        if dep.kind == "container":
            return ContainerRestart(self._parts, dep)
        if dep.kind == "systemd" and dep.unit:
            return SystemdRestart(self._parts, dep, running_argv)
        return None

    def _nodes_for(self, dep: Deployment) -> NodeGroup | None:
        """The head of several nodes restarts them all (kept across rediscovery: it remembers the nodes seen)."""
        if dep.nodes <= 1 or dep.refusal("restart") is not None:
            return None
        old = self.nodes
        if old is not None and (old.deployment.dist_init, old.deployment.node_hosts) == (dep.dist_init, dep.node_hosts):
            old.deployment = dep
            return old
        return NodeGroup(self._parts, dep, host_factory(self._profile, self._host))

    def _follow_journal(self, dep: Deployment) -> None:
        """A unit logging to the journal only: follow `journalctl -u UNIT -f` (a new unit replaces it)."""
        old = self._journal
        if old is not None and dep.kind == "systemd" and dep.log is None and old.unit == dep.unit:
            return  # the same unit found again (a rediscovery): keep following, no line twice
        self._journal = None
        if old is not None:
            self._tasks.spawn(old.stop())
        if dep.kind == "systemd" and dep.unit and dep.log is None:
            self._journal = JournalFollow(self._host, self._feed, self._views, dep.unit)
            self._journal.start(self._tasks.spawn)
