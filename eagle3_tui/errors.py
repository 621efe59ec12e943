"""Errors that reach the user as one clear sentence instead of a traceback.

Raise `UserError` (or a subclass) anywhere a user mistake or a broken input is detected; the CLI
prints its message and exits non-zero, the UI shows it as a toast.
"""

from __future__ import annotations


class UserError(Exception):
    """A problem the user can act on; `str(err)` is the whole message."""

    exit_code: int = 2
