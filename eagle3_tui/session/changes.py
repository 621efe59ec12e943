"""Applying a preset's plan to the host, and undoing it: the one place a change is written.

A layer-id plan rewrites the draft config atomically (the host keeps a timestamped backup and refuses
when the file changed since it was read); a flag plan changes the remembered launch command. Each
change pushes an undo record (store.py) that `undo` reverts byte for byte. Neither restarts: the
session does that after, through the one restart path.
"""

from __future__ import annotations

import hashlib
import shlex
from dataclasses import dataclass
from typing import TYPE_CHECKING

from eagle3_tui.errors import UserError
from eagle3_tui.session.discovery import LaunchSpec
from eagle3_tui.session.store import LocalStore, Undo

if TYPE_CHECKING:
    from eagle3_tui.remote.host import Host
    from eagle3_tui.session.presets import ApplyPlan


@dataclass(frozen=True)
class Changed:
    """What a change (or its undo) left: the launch to restart with, and the draft config text when written."""

    spec: LaunchSpec
    draft_text: str | None = None
    preset: str | None = None


class Changes:
    """Writes plans to the host and keeps their undo records in the local store."""

    def __init__(self, host: Host, store: LocalStore) -> None:
        self._host = host
        self._store = store

    async def apply(self, plan: ApplyPlan, spec: LaunchSpec) -> Changed:
        """Write the plan (config file or launch command) and push its undo record."""
        name = plan.preset.name
        undo: Undo
        if plan.kind == "layers":
            res = await self._host.write_atomic(plan.path, plan.after.encode("utf-8"),
                                                expect_sha256=plan.before_sha256)
            undo = {"kind": "layers", "path": plan.path, "backup_path": res.backup_path, "sha256_after": res.sha256,
                    "preset": name}
            changed = Changed(spec, plan.after, name)
        else:
            new_argv = tuple(shlex.split(plan.after))
            undo = {"kind": "flags", "argv_before": list(spec.argv), "argv_after": list(new_argv), "preset": name}
            changed = Changed(spec.with_argv(new_argv), None, name)
            self._store.save_launch(changed.spec)
        self._store.push_undo(undo)
        return changed

    def next_undo(self) -> Undo:
        undo = self._store.peek_undo()
        if undo is None:
            raise UserError("nothing to roll back: no preset was applied from this machine")
        return undo

    async def undo(self, undo: Undo, spec: LaunchSpec | None) -> Changed:
        """Restore the config backup (refusing if the file changed since) or the previous argv; pop it."""
        if spec is None:
            raise UserError("the launch command to roll back to is unknown")
        text = None
        if undo["kind"] == "layers":
            backup = undo.get("backup_path")
            if not backup:
                raise UserError(f"no backup of {undo['path']} was made (the file did not exist)")
            data = await self._host.read_bytes(backup)
            current = await self._host.read_bytes(undo["path"])
            await self._host.write_atomic(undo["path"], data, expect_sha256=hashlib.sha256(current).hexdigest())
            text = data.decode("utf-8", "replace")
        else:
            spec = spec.with_argv(undo["argv_before"])
            self._store.save_launch(spec)
        self._store.pop_undo()
        return Changed(spec, text, str(undo.get("preset")))
