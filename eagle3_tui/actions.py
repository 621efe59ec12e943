"""The actions that change the host, listed once: what `--readonly` refuses in the session, the headless
commands and the console (its keys, help and palette), and what a deployment must allow for each.
Pure and light (the console's keys read it before the session is imported)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HostAction:
    name: str
    """The action's one name: the session method, the subcommand and the console's action."""
    what: str
    """What it does, as "refusing to ..." says it."""
    needs: tuple[str, ...] = ()
    """What the deployment must allow (`Deployment.refusal` names); an apply's needs depend on its preset."""


HOST_ACTIONS: tuple[HostAction, ...] = (
    HostAction("apply", "apply a preset"),
    HostAction("rollback", "roll back the last apply", ("restart",)),
    HostAction("restart", "restart the server", ("restart",)),
    HostAction("start", "start the server"),
    HostAction("stop", "stop the server", ("stop",)),
    HostAction("sweep", "run a flag sweep (it restarts the server)", ("flags", "restart")),
)
CHANGES_HOST: frozenset[str] = frozenset(a.name for a in HOST_ACTIONS)
_BY_NAME = {a.name: a for a in HOST_ACTIONS}


def host_action(name: str) -> HostAction | None:
    return _BY_NAME.get(name)
