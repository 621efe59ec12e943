"""Fit a session's parts to the deployment its server was found in (the session calls these at its hooks).

One found server sets: the log decoder (a container's engine log), the restart strategy (its engine,
systemd; None: the console's own relaunch), the status bar's label, and which actions are refused,
with the reason. A remembered launch whose server is not running keeps its owner, so that nothing
relaunches a container's or a unit's command on the host.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from eagle3_tui.errors import UserError
from eagle3_tui.session.deploy_container import ContainerRestart, EngineLogDecoder, FileView
from eagle3_tui.session.deploy_journal import JournalFollow
from eagle3_tui.session.deploy_nodes import NodeGroup, host_factory
from eagle3_tui.session.deploy_restart import Parts, RestartStrategy
from eagle3_tui.session.deploy_systemd import SystemdRestart
from eagle3_tui.session.deployment import Deployment

if TYPE_CHECKING:
    import asyncio

    from eagle3_tui.profile import Profile
    from eagle3_tui.remote.host import Host
    from eagle3_tui.session.discovery import LaunchSpec
    from eagle3_tui.session.logfeed import LogFeed
    from eagle3_tui.session.restart import Restarter
    from eagle3_tui.session.state import RunTracker
    from eagle3_tui.session.views import Views
    from eagle3_tui.sglang.client import SGLangClient

INTO_LOG_KINDS = ("pane", "pipe")


class Session(Protocol):
    """The parts of a `Session` the wiring fits (a protocol, so this module never imports the facade)."""

    host: Host
    views: Views
    feed: LogFeed
    tracker: RunTracker
    profile: Profile
    restarter: Restarter
    deployment: Deployment

    async def client(self) -> SGLangClient: ...

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]: ...


def parts_of(session: Session) -> Parts:
    return Parts(session.host, session.views, session.feed, session.tracker,
                 session.profile.restart_deadline_s, session.client)


def strategy_for(dep: Deployment, parts: Parts, running_argv: Sequence[str]) -> RestartStrategy | None:
    if dep.kind == "container":
        return ContainerRestart(parts, dep)
    if dep.kind == "systemd" and dep.unit:
        return SystemdRestart(parts, dep, running_argv)
    return None


def wire(session: Session, dep: Deployment, running_argv: Sequence[str]) -> None:
    """The found server's deployment into the session's feed, restarter and server view."""
    if dep.nodes > 1:
        dep = dataclasses.replace(dep, node_hosts=tuple(session.profile.nodes))
    session.deployment = dep
    session.feed.decode = EngineLogDecoder() if dep.kind == "container" else None
    session.restarter.strategy = strategy_for(dep, parts_of(session), running_argv)
    session.restarter.nodes = _nodes_for(session, dep)
    session.views.set_server(session.views.server.with_deployment(dep.label or None))
    _follow_journal(session, dep)


def _nodes_for(session: Session, dep: Deployment) -> NodeGroup | None:
    """The head of several nodes restarts them all (kept across rediscovery: it remembers the nodes seen)."""
    if dep.nodes <= 1 or dep.refusal("restart") is not None:
        return None
    old = session.restarter.nodes
    if old is not None and (old.deployment.dist_init, old.deployment.node_hosts) == (dep.dist_init, dep.node_hosts):
        old.deployment = dep
        return old
    return NodeGroup(parts_of(session), dep, host_factory(session.profile, session.host))


_JOURNALS: weakref.WeakKeyDictionary[Session, JournalFollow] = weakref.WeakKeyDictionary()


def _follow_journal(session: Session, dep: Deployment) -> None:
    """A unit logging to the journal only: follow `journalctl -u UNIT -f` (one per session; a new unit replaces it)."""
    old = _JOURNALS.get(session)
    if old is not None and dep.kind == "systemd" and dep.log is None and old.unit == dep.unit:
        return  # the same unit found again (a rediscovery): keep following, no line twice
    _JOURNALS.pop(session, None)
    if old is not None:
        session._spawn(old.stop())
    if dep.kind == "systemd" and dep.unit and dep.log is None:
        follow = JournalFollow(session.host, session.feed, session.views, dep.unit)
        _JOURNALS[session] = follow
        follow.start(session._spawn)


def wire_remembered(session: Session, spec: LaunchSpec) -> None:
    """Before a restart with no server adopted: a remembered owner still owns the restart."""
    if session.restarter.strategy is None and spec.owner and session.deployment.kind == "process":
        wire(session, Deployment.from_owner(spec.owner, log=spec.log_path), spec.argv)


def check_action(dep: Deployment, action: str, *, into_log: bool = False) -> None:
    """Raise the reason `action` cannot be done safely for this deployment (nothing when it can)."""
    if into_log:
        if dep.kind not in INTO_LOG_KINDS:
            raise UserError(f"restart --into-log is for a server in a terminal pane or a pipe; this one is a {dep.kind}")
        return
    why = dep.refusal(action)
    if why is None and action == "flags":  # a flag preset is applied by a restart
        why = dep.refusal("restart")
    if why is not None:
        raise UserError(f"{dep.label or dep.kind}: {why}")


def release_to_log(session: Session) -> None:
    """The user asked to restart a pane's or pipe's server into a log file: the console's own path."""
    session.restarter.strategy = None
    session.restarter.nodes = None
    session.deployment = Deployment("process", pid=session.deployment.pid)


def files_of(host: Host, dep: Deployment) -> Host:
    """Where the server's own paths are read: through the container's root, else the host itself."""
    return FileView(host, dep) if dep.kind == "container" and dep.pid is not None else host


def refusals(dep: Deployment) -> dict[str, str]:
    """Every action refused for this deployment, with its reason (for disabling them in the UI)."""
    return {a: why for a in ("restart", "stop", "flags") if (why := dep.refusal(a)) is not None}
