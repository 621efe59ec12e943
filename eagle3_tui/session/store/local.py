"""What this machine remembers about a host between runs: the last launch (argv, cwd, env without
secrets, log, port) and a stack of applied changes for rollback.

Files under the profile's local state dir, never on the host. A lost launch file means "nothing
remembered" (the session falls back to the profile); an undo file that is there but unreadable is
said (`problem`), never taken for an empty history. Both are replaced atomically (temp, fsync,
rename), so a kill mid-write leaves the previous version. An undo record is written before the
change it describes (`state: "pending"`) and completed after (`"done"`): see changes.py.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

from eagle3_tui.errors import UserError
from eagle3_tui.profile import Profile
from eagle3_tui.remote.atomic import replace_local
from eagle3_tui.session.launch import LaunchSpec

UNDO_DEPTH = 20
UNDO_KINDS = ("layers", "flags")

Undo = dict[str, Any]
"""One applied change, as JSON: kind "layers" (path, sha256_before, sha256_after, backup_path, preset)
or "flags" (argv_before, argv_after, preset); `state` "pending" until the change is complete."""


class LocalStore:
    """launch.json and undo.json in `profile.local_state_dir()`."""

    def __init__(self, profile: Profile) -> None:
        self._profile = profile
        self.problem: str | None = None
        """Why undo.json could not be read (None when it is fine or absent)."""

    def _file(self, name: str) -> Path:
        return self._profile.local_state_dir() / name

    def check_writable(self) -> None:
        """Refuse (UserError) unless an undo record can be written durably: before any change to the host."""
        d = self._profile.local_state_dir()
        probe = d / f".write-probe-{os.getpid()}"
        try:
            d.mkdir(parents=True, exist_ok=True)
            replace_local(probe, b"probe\n")
            probe.unlink()
        except OSError as err:
            raise UserError(
                f"cannot keep an undo record in {d} ({err.strerror or err}): nothing was changed on the host "
                "(fix state_dir in the profile or the folder's permissions)"
            ) from None

    # ------------------------------------------------------------ the last launch

    def save_launch(self, spec: LaunchSpec) -> None:
        """The last launch seen or made, so a later process can relaunch or roll back (no secrets)."""
        with contextlib.suppress(OSError):
            p = self._file("launch.json")
            p.parent.mkdir(parents=True, exist_ok=True)
            d = json.loads(spec.to_json())
            d["profile_command"] = self._profile.launch_command
            replace_local(p, json.dumps(d, indent=2).encode("utf-8"))

    def load_launch(self) -> LaunchSpec | None:
        """The saved launch, unless the profile's launch command changed since it was saved."""
        try:
            d = json.loads(self._file("launch.json").read_text())
            if self._profile.launch_command and d.get("profile_command") != self._profile.launch_command:
                return None
            return LaunchSpec.from_dict(d)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    # ------------------------------------------------------------ a restart in progress

    def begin_restart(self, record: dict[str, Any]) -> None:
        """Written before a restart stops the server; cleared when it ends with a stated outcome."""
        with contextlib.suppress(OSError):
            replace_local(self._file("restart.json"), json.dumps(record, indent=2).encode("utf-8"))

    def unfinished_restart(self) -> dict[str, Any] | None:
        try:
            d = json.loads(self._file("restart.json").read_bytes().decode("utf-8"))
        except (OSError, ValueError):
            return None
        return d if isinstance(d, dict) else None

    def end_restart(self) -> None:
        with contextlib.suppress(OSError):
            self._file("restart.json").unlink()

    # ------------------------------------------------------------ the undo stack

    def _stack(self) -> list[Undo]:
        p = self._file("undo.json")
        self.problem = None
        try:
            d = json.loads(p.read_bytes().decode("utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError, RecursionError) as err:
            why = err.strerror if isinstance(err, OSError) and err.strerror else "not valid JSON"
            self.problem = (f"the undo history {p} cannot be read ({why}): rollback cannot tell what was "
                            "applied; the backups beside the changed files are untouched")
            return []
        stack = d.get("stack") if isinstance(d, dict) else None
        if not isinstance(stack, list):
            self.problem = f"the undo history {p} has no list of changes: rollback cannot tell what was applied"
            return []
        return [u for u in stack if isinstance(u, dict) and u.get("kind") in UNDO_KINDS]

    def _write_stack(self, stack: list[Undo], mid_fault: str | None = None) -> None:
        data = json.dumps({"stack": stack[-UNDO_DEPTH:]}, indent=2).encode("utf-8")
        p = self._file("undo.json")
        if self.problem is not None and p.exists():  # keep the unreadable history for a human, never overwrite it
            with contextlib.suppress(OSError):
                p.rename(p.with_name(f"undo.json.unreadable-{int(time.time())}"))
        replace_local(p, data, mid_fault=mid_fault)

    def push_undo(self, undo: Undo, *, mid_fault: str | None = None) -> None:
        """Push one change (durably, before the change when it is pending); rollback undoes the newest first."""
        self._write_stack([*self._stack(), undo], mid_fault)

    def replace_top(self, undo: Undo, *, mid_fault: str | None = None) -> None:
        """Complete (or correct) the newest record."""
        stack = self._stack()
        self._write_stack([*stack[:-1], undo] if stack else [undo], mid_fault)

    def peek_undo(self) -> Undo | None:
        stack = self._stack()
        return stack[-1] if stack else None

    def pop_undo(self) -> None:
        with contextlib.suppress(OSError):
            self._write_stack(self._stack()[:-1])

    def rollback_preset(self) -> str | None:
        """The preset the next rollback undoes, or None."""
        u = self.peek_undo()
        return str(u.get("preset")) if u else None
