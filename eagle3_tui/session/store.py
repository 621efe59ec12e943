"""What this machine remembers about a host between runs: the last launch (argv, cwd, env without
secrets, log, port) and a stack of applied changes for rollback. Files under the profile's local
state dir, never on the host. A mixin of `Session`.
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle3_tui.session.discovery import LaunchSpec

if TYPE_CHECKING:
    from eagle3_tui.profile import Profile

UNDO_DEPTH = 20


class LocalStateMixin:
    profile: Profile

    # ------------------------------------------------------------ local state (undo, last launch)

    def _state_file(self, name: str) -> Path:
        return self.profile.local_state_dir() / name

    def _save_launch(self, spec: LaunchSpec) -> None:
        """The last launch seen or made, so a later process can relaunch or roll back (no secrets)."""
        with contextlib.suppress(OSError):
            p = self._state_file("launch.json")
            p.parent.mkdir(parents=True, exist_ok=True)
            d = json.loads(spec.to_json())
            d["profile_command"] = self.profile.launch_command
            p.write_text(json.dumps(d, indent=2))

    def _load_launch(self) -> LaunchSpec | None:
        """The saved launch, unless the profile's launch command changed since it was saved."""
        try:
            d = json.loads(self._state_file("launch.json").read_text())
            if self.profile.launch_command and d.get("profile_command") != self.profile.launch_command:
                return None
            return LaunchSpec.from_dict(d)
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _undo_stack(self) -> list[dict[str, Any]]:
        try:
            d = json.loads(self._state_file("undo.json").read_text())
        except (OSError, ValueError):
            return []
        stack = d.get("stack") if isinstance(d, dict) else None
        return [u for u in stack if isinstance(u, dict) and u.get("kind") in ("layers", "flags")] if stack else []

    def _write_undo_stack(self, stack: list[dict[str, Any]]) -> None:
        p = self._state_file("undo.json")
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps({"stack": stack[-UNDO_DEPTH:]}, indent=2))

    def _save_undo(self, undo: dict[str, Any]) -> None:
        """Push one applied change; rollback undoes the newest first."""
        self._write_undo_stack([*self._undo_stack(), undo])

    def _load_undo(self) -> dict[str, Any] | None:
        stack = self._undo_stack()
        return stack[-1] if stack else None

    def _clear_undo(self) -> None:
        with contextlib.suppress(OSError):
            self._write_undo_stack(self._undo_stack()[:-1])

    def can_rollback(self) -> str | None:
        """The preset the next rollback undoes, or None."""
        u = self._load_undo()
        return str(u.get("preset")) if u else None

