"""The session's answer to a host-changing action (eagle3_tui/actions.py lists them) when read-only."""

from __future__ import annotations

from eagle3_tui.actions import host_action
from eagle3_tui.session.events import ReadOnlyError


def refuse_readonly(name: str, detail: str = "", *, how: str = "drop --readonly to allow changes") -> ReadOnlyError:
    """The one sentence a read-only session or command answers a host-changing action with."""
    act = host_action(name)
    what = act.what if act is not None else name
    return ReadOnlyError(f"read-only: refusing to {what}{f' ({detail})' if detail else ''}; {how}")
