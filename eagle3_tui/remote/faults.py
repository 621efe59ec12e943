"""Fault injection for the interruption tests: `EAGLE3_TUI_FAULT=<point>` makes this process SIGKILL
itself when it reaches that point, the way a power cut or `kill -9` would stop it there.

Points (in the order an `apply` passes them): `undo-pending-mid` (undo.json's temp half written),
`undo-pending` (the write-ahead record durable), `after-temp` (the host's temp file written, not
fsynced), `after-fsync`, `after-backup`, `after-rename`, `undo-done-mid`, `after-undo` (the record
completed, before the restart). Unset, `hit` is one dictionary lookup.
"""

from __future__ import annotations

import os
import signal

ENV = "EAGLE3_TUI_FAULT"


def hit(point: str) -> None:
    """SIGKILL this process when the environment names `point`."""
    if os.environ.get(ENV) == point:
        os.kill(os.getpid(), signal.SIGKILL)
