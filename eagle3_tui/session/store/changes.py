"""Applying a preset's plan to the host, and undoing it: the one place a change is written.

A layer-id plan rewrites the draft config atomically (the host keeps a timestamped backup and refuses
when the file changed since it was read); a flag plan changes the remembered launch command. Neither
restarts: the session does that after, through the one restart path.

Every change is written ahead: its undo record (which file, the SHA-256 before and after, or the
argv before and after) is durable in the local store, `state: "pending"`, before anything on the
host changes, and completed (`"done"`, with the backup's name) after. A process killed in between
leaves a pending record; `recover` (run when a session attaches) looks at the host and either
completes it (the new file is there: its backup is found by content) or drops it (the old file is
still there), and says which in one sentence. So `rollback` always has what it needs.
"""

from __future__ import annotations

import glob
import hashlib
import shlex
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from eagle3_tui.errors import UserError
from eagle3_tui.remote import faults
from eagle3_tui.remote.errors import RemoteFileNotFound
from eagle3_tui.session.launch import LaunchSpec
from eagle3_tui.session.store.local import LocalStore, Undo

if TYPE_CHECKING:
    from eagle3_tui.remote.host import Host
    from eagle3_tui.session.presets.catalog import ApplyPlan

BACKUPS_SEARCHED = 10


def _sha(data: bytes | None) -> str | None:
    return hashlib.sha256(data).hexdigest() if data is not None else None


@dataclass(frozen=True)
class Changed:
    """What a change (or its undo) left: the launch to restart with, and the draft config text when written."""

    spec: LaunchSpec
    draft_text: str | None = None
    preset: str | None = None


class Changes:
    """Writes plans to the host and keeps their undo records (written ahead) in the local store."""

    def __init__(self, host: Host, store: LocalStore) -> None:
        self._host = host
        self._store = store

    async def apply(self, plan: ApplyPlan, spec: LaunchSpec) -> Changed:
        """Write the undo record, then the plan (config file or launch command), then complete the record."""
        self._store.check_writable()  # before anything on the host changes
        if plan.kind == "layers":
            return await self._apply_layers(plan, spec)
        new_argv = tuple(shlex.split(plan.after))
        undo: Undo = {"kind": "flags", "argv_before": list(spec.argv), "argv_after": list(new_argv),
                      "preset": plan.preset.name, "state": "pending", "since": time.time()}
        self._write_ahead(undo)
        changed = Changed(spec.with_argv(new_argv), None, plan.preset.name)
        self._store.save_launch(changed.spec)
        self._complete({**undo, "state": "done"})
        return changed

    async def _apply_layers(self, plan: ApplyPlan, spec: LaunchSpec) -> Changed:
        data = plan.after.encode("utf-8")
        undo: Undo = {"kind": "layers", "path": plan.path, "sha256_before": plan.before_sha256 or None,
                      "sha256_after": _sha(data), "backup_path": None, "preset": plan.preset.name,
                      "state": "pending", "since": time.time()}
        self._write_ahead(undo)
        try:
            res = await self._host.write_atomic(plan.path, data, expect_sha256=plan.before_sha256 or None)
        except BaseException:
            # refused, or cut off: the host says whether the new file landed (never guess)
            await self._settle_quietly()
            raise
        self._complete({**undo, "backup_path": res.backup_path, "state": "done"})
        return Changed(spec, plan.after, plan.preset.name)

    def _write_ahead(self, undo: Undo) -> None:
        try:
            self._store.push_undo(undo, mid_fault="undo-pending-mid")
        except OSError as err:
            raise UserError(f"cannot write the undo record ({err.strerror or err}): nothing was changed on the host") from None
        faults.hit("undo-pending")

    def _complete(self, undo: Undo) -> None:
        try:
            self._store.replace_top(undo, mid_fault="undo-done-mid")
        except OSError as err:
            raise UserError(f"the change was made but its undo record could not be completed ({err.strerror or err}); "
                            "the next command finds and completes it") from None
        faults.hit("after-undo")

    async def _settle_quietly(self) -> None:
        try:
            await self.recover()
        except Exception:  # the record stays pending; the next attach settles it
            return

    # ------------------------------------------------------------ the record of an interrupted change

    async def recover(self) -> str | None:
        """Settle a pending record left by a killed or cut-off change; the sentence that says how (None: none)."""
        top = self._store.peek_undo()
        if self._store.problem is not None:
            return self._store.problem
        if top is None or top.get("state", "done") != "pending":
            return None
        preset = top.get("preset")
        if top["kind"] == "flags":
            self._store.replace_top({**top, "state": "done"})
            return (f"a change of the launch command for preset {preset} was interrupted; its undo record is kept: "
                    "`rollback` restores the previous command")
        return await self._recover_layers(top)

    async def _recover_layers(self, top: Undo) -> str:
        path, preset = str(top["path"]), top.get("preset")
        try:
            now = _sha(await self._host.read_bytes(path))
        except RemoteFileNotFound:
            now = None
        if now is not None and now == top.get("sha256_after"):
            backup = top.get("backup_path") or await self._find_backup(path, top.get("sha256_before"))
            self._store.replace_top({**top, "backup_path": backup, "state": "done"})
            kept = f"backup {backup}" if backup else "no backup was found"
            return (f"an apply of preset {preset} was interrupted after {path} was replaced ({kept}); the server "
                    "was not restarted with it: `rollback` restores the old file, `restart` serves the new one")
        self._store.pop_undo()
        if now == top.get("sha256_before"):
            return (f"an apply of preset {preset} was interrupted before {path} changed: the file is as it was "
                    "and the unfinished record is dropped")
        return (f"an apply of preset {preset} was interrupted and {path} now holds neither the old nor the new "
                "content (changed by someone else): the unfinished record is dropped, the backups beside it are kept")

    async def _find_backup(self, path: str, sha_before: str | None) -> str | None:
        """The newest `<path>.bak-*` holding the content from before the change."""
        if sha_before is None:
            return None
        for cand in sorted(await self._host.glob(glob.escape(path) + ".bak-*"), reverse=True)[:BACKUPS_SEARCHED]:
            try:
                if _sha(await self._host.read_bytes(cand)) == sha_before:
                    return cand
            except UserError:
                continue
        return None

    # ------------------------------------------------------------ undo

    def next_undo(self) -> Undo:
        undo = self._store.peek_undo()
        if self._store.problem is not None:
            raise UserError(self._store.problem)
        if undo is None:
            raise UserError("nothing to roll back: no preset was applied from this machine")
        if undo.get("state") == "pending":
            raise UserError(f"the change for preset {undo.get('preset')} is unfinished; run the command again to settle it")
        return undo

    async def undo(self, undo: Undo, spec: LaunchSpec | None) -> Changed:
        """Restore the config backup (refusing if the file changed since) or the previous argv; pop it.

        A kill before the pop leaves the record: running the rollback again restores the same bytes.
        """
        if spec is None:
            raise UserError("the launch command to roll back to is unknown")
        text = None
        if undo["kind"] == "layers":
            backup = undo.get("backup_path")
            if not backup:
                raise UserError(f"no backup of {undo['path']} was made (the file did not exist)")
            data = await self._host.read_bytes(backup)
            current = await self._host.read_bytes(undo["path"])
            await self._host.write_atomic(undo["path"], data, expect_sha256=_sha(current))
            text = data.decode("utf-8", "replace")
        else:
            spec = spec.with_argv(undo["argv_before"])
            self._store.save_launch(spec)
        self._store.pop_undo()
        return Changed(spec, text, str(undo.get("preset")))
