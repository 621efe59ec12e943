"""Errors that reach the user as one clear sentence instead of a traceback.

Raise `UserError` (or a subclass) anywhere a user mistake or a broken input is detected; the CLI
prints its message and exits non-zero, the UI shows it as a toast.
"""

from __future__ import annotations

import signal

# Exit statuses of the one exit path (cli.main): each way a command can end has its own.
EXIT_OK = 0
EXIT_USER = 2  # a UserError: the message says what to do
EXIT_CONNECTION_LOST = 3  # the host's connection went away and did not come back in time
EXIT_INTERNAL = 70  # a bug: one line, and EAGLE3_TUI_DEBUG=1 shows the traceback
EXIT_SIGNAL_BASE = 128  # killed by a signal: 128 + its number (SIGHUP 129, SIGINT 130, SIGTERM 143)


class UserError(Exception):
    """A problem the user can act on; `str(err)` is the whole message."""

    exit_code: int = EXIT_USER


SIGNAL_WORDS: dict[int, str] = {signal.SIGINT: "interrupted", signal.SIGTERM: "terminated", signal.SIGHUP: "hung up"}


def signal_line(signum: int) -> str:
    """The one line a command ended by `signum` leaves on stderr."""
    return f"eagle3-tui: {SIGNAL_WORDS.get(signum, 'stopped by a signal')}"


class Interrupted(KeyboardInterrupt):
    """A signal ended the work after its own cleanup ran (the console's quit path); cli.main says
    which in one line and exits 128 + its number, like a ctrl-C caught anywhere else."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
