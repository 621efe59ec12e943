"""The session's snapshots and its listeners: the one place views are replaced and events go out.

Every part that changes what the UI shows gets this object in its constructor, so "replace the
server view, tell the listeners" is written once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from eagle3_tui.session.events import (
    ConnectionChanged,
    ConnView,
    Notice,
    ServerChanged,
    ServerState,
    ServerView,
    SessionEvent,
)

Listener = Callable[[SessionEvent], None]
Severity = Literal["information", "warning", "error"]


class Views:
    """`conn` and `server` (frozen, replaced on change) and the listeners that hear every change."""

    def __init__(self, conn: ConnView, server: ServerView) -> None:
        self.conn = conn
        self.server = server
        self._listeners: list[Listener] = []

    def add_listener(self, fn: Listener) -> None:
        self._listeners.append(fn)

    def remove_listener(self, fn: Listener) -> None:
        if fn in self._listeners:
            self._listeners.remove(fn)

    def emit(self, event: SessionEvent) -> None:
        for fn in list(self._listeners):
            try:
                fn(event)
            except Exception:  # a broken listener must not break the session
                continue

    def notice(self, message: str, severity: Severity = "information") -> None:
        self.emit(Notice(message, severity))

    def set_server(self, new: ServerView) -> None:
        """Publish a new server view (one of `ServerView`'s typed `with_*` updates of `server`); listeners
        hear it only when it changed."""
        if new != self.server:
            self.server = new
            self.emit(ServerChanged(new))

    def set_state(self, state: ServerState, message: str = "", *, log_tail: Sequence[str] | None = None) -> None:
        self.set_server(self.server.with_state(state, message, log_tail=log_tail))

    def set_conn(self, view: ConnView, *, always: bool = False) -> None:
        if always or view != self.conn:
            self.conn = view
            self.emit(ConnectionChanged(view))
