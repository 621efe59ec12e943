"""What this machine remembers about a host between runs: the last launch (argv, cwd, env without
secrets, log, port) and a stack of applied changes for rollback.

Files under the profile's local state dir, never on the host. A lost or unreadable file means
"nothing remembered", never an error: the session then falls back to the profile.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from eagle3_tui.profile import Profile
from eagle3_tui.session.discovery import LaunchSpec

UNDO_DEPTH = 20
UNDO_KINDS = ("layers", "flags")

Undo = dict[str, Any]
"""One applied change, as JSON: kind "layers" (path, backup_path, sha256_after, preset) or
"flags" (argv_before, argv_after, preset)."""


class LocalStore:
    """launch.json and undo.json in `profile.local_state_dir()`."""

    def __init__(self, profile: Profile) -> None:
        self._profile = profile

    def _file(self, name: str) -> Path:
        return self._profile.local_state_dir() / name

    # ------------------------------------------------------------ the last launch

    def save_launch(self, spec: LaunchSpec) -> None:
        """The last launch seen or made, so a later process can relaunch or roll back (no secrets)."""
        with contextlib.suppress(OSError):
            p = self._file("launch.json")
            p.parent.mkdir(parents=True, exist_ok=True)
            d = json.loads(spec.to_json())
            d["profile_command"] = self._profile.launch_command
            p.write_text(json.dumps(d, indent=2))

    def load_launch(self) -> LaunchSpec | None:
        """The saved launch, unless the profile's launch command changed since it was saved."""
        try:
            d = json.loads(self._file("launch.json").read_text())
            if self._profile.launch_command and d.get("profile_command") != self._profile.launch_command:
                return None
            return LaunchSpec.from_dict(d)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    # ------------------------------------------------------------ the undo stack

    def _stack(self) -> list[Undo]:
        try:
            d = json.loads(self._file("undo.json").read_text())
        except (OSError, ValueError):
            return []
        stack = d.get("stack") if isinstance(d, dict) else None
        return [u for u in stack if isinstance(u, dict) and u.get("kind") in UNDO_KINDS] if stack else []

    def _write_stack(self, stack: list[Undo]) -> None:
        p = self._file("undo.json")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps({"stack": stack[-UNDO_DEPTH:]}, indent=2))

    def push_undo(self, undo: Undo) -> None:
        """Push one applied change; rollback undoes the newest first."""
        self._write_stack([*self._stack(), undo])

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
