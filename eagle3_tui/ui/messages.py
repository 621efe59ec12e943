"""One typed Textual message per session event, so the session's listener (called from any task or
thread) hands each event to the UI thread, and the screen handles each kind with its own `@on`.

The events are the session's frozen dataclasses; a message only carries one onto the message queue.
`message_for` maps an event to its message through `event_messages()`, a type-to-type table that a
test holds against every member of `eagle3_tui.session.SessionEvent`: an event type added to the
session without a message here fails that test instead of being dropped silently.

The session package is imported only when the table is first built (after the first frame).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from textual.message import Message

if TYPE_CHECKING:
    from eagle3_tui import session as ev


@dataclass
class SessionMessage(Message):
    """Base of the messages that carry one session event; `event` is the event itself."""

    event: Any


class FromSession:
    """The messages, named after the events they carry (`@on(FromSession.LogBatch)`)."""

    @dataclass
    class ConnectionChanged(SessionMessage):
        event: ev.ConnectionChanged

    @dataclass
    class ServerChanged(SessionMessage):
        event: ev.ServerChanged

    @dataclass
    class LogBatch(SessionMessage):
        event: ev.LogBatch

    @dataclass
    class StatsUpdated(SessionMessage):
        """New decode stats: a pure "the rings changed" ping, so queued copies coalesce into one."""

        event: ev.StatsUpdated

        def can_replace(self, message: Message) -> bool:
            return isinstance(message, FromSession.StatsUpdated)

    @dataclass
    class HttpSample(SessionMessage):
        """A chart point read over HTTP (no log file): shown as a line in the log pane."""

        event: ev.HttpSample

    @dataclass
    class FindingsChanged(SessionMessage):
        event: ev.FindingsChanged

    @dataclass
    class RestartProgress(SessionMessage):
        event: ev.RestartProgress

    @dataclass
    class CheckProgress(SessionMessage):
        event: ev.CheckProgress

    @dataclass
    class CheckFinished(SessionMessage):
        event: ev.CheckFinished

    @dataclass
    class BenchProgress(SessionMessage):
        event: ev.BenchProgress

    @dataclass
    class BenchFinished(SessionMessage):
        event: ev.BenchFinished

    @dataclass
    class LedgerChanged(SessionMessage):
        event: ev.LedgerChanged

    @dataclass
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
