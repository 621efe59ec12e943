"""One typed Textual message per session event, so the session's listener (called from any task or
thread) hands each event to the UI thread, and the screen handles each kind with its own `@on`.

The events are the session's frozen dataclasses; a message only carries one onto the message queue.
`message_for` maps an event to its message through `event_messages()`, a type-to-type table that a
test holds against every member of `eagle3_tui.session.SessionEvent`: an event type added to the
session without a message here fails that test instead of being dropped silently.

The session package is imported only when the table is first built (after the first frame).
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from textual.message import Message

if TYPE_CHECKING:
    from eagle3_tui import session as ev


class SessionMessage(Message):
    """Base of the messages that carry one session event; `event` is the event itself.

    Plain classes, not dataclasses: they only carry `event`, and thirteen dataclass builds cost more
    than the rest of this module on the way to the console's first frame."""

    event: Any

    def __init__(self, event: Any) -> None:
        super().__init__()
        self.event = event

    def __rich_repr__(self) -> Any:
        yield self.event


class FromSession:
    """The messages, named after the events they carry (`@on(FromSession.LogBatch)`)."""

    class ConnectionChanged(SessionMessage):
        event: ev.ConnectionChanged

    class ServerChanged(SessionMessage):
        event: ev.ServerChanged

    class LogBatch(SessionMessage):
        event: ev.LogBatch

    class StatsUpdated(SessionMessage):
        """New decode stats: a pure "the rings changed" ping, so queued copies coalesce into one."""

        event: ev.StatsUpdated

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, FromSession.StatsUpdated)

    class HttpSample(SessionMessage):
        """A chart point read over HTTP (no log file): shown as a line in the log pane."""

        event: ev.HttpSample

    class FindingsChanged(SessionMessage):
        event: ev.FindingsChanged

    class RestartProgress(SessionMessage):
        event: ev.RestartProgress

    class CheckProgress(SessionMessage):
        event: ev.CheckProgress

    class CheckFinished(SessionMessage):
        event: ev.CheckFinished

    class BenchProgress(SessionMessage):
        event: ev.BenchProgress

    class BenchFinished(SessionMessage):
        event: ev.BenchFinished

    class LedgerChanged(SessionMessage):
        event: ev.LedgerChanged

    class Notice(SessionMessage):
        event: ev.Notice


@cache
def event_messages() -> dict[type[Any], type[SessionMessage]]:
    """Session event type → the message that carries it."""
    from eagle3_tui import session as s

    return {
        s.ConnectionChanged: FromSession.ConnectionChanged,
        s.ServerChanged: FromSession.ServerChanged,
        s.LogBatch: FromSession.LogBatch,
        s.StatsUpdated: FromSession.StatsUpdated,
        s.HttpSample: FromSession.HttpSample,
        s.FindingsChanged: FromSession.FindingsChanged,
        s.RestartProgress: FromSession.RestartProgress,
        s.CheckProgress: FromSession.CheckProgress,
        s.CheckFinished: FromSession.CheckFinished,
        s.BenchProgress: FromSession.BenchProgress,
        s.BenchFinished: FromSession.BenchFinished,
        s.LedgerChanged: FromSession.LedgerChanged,
        s.Notice: FromSession.Notice,
    }


def message_for(event: object) -> SessionMessage | None:
    """The message for one event; None for a type the console does not know (a newer session)."""
    cls = event_messages().get(type(event))
    return cls(event) if cls is not None else None
