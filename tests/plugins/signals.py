"""Signals as a command started from a shell prompt has them."""

from __future__ import annotations

import signal


def sigint_as_at_a_prompt() -> None:
    """A `preexec_fn`: SIGINT at its default. A test run started as a background job (`make test &`) hands its
    children SIGINT ignored, and a command that inherits it ignored rightly ignores Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
