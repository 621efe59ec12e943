"""The presets offered for the server, planned, applied (the draft config written, or the launch command
changed) and rolled back, each through the one restart path."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from eagle3_tui.errors import UserError
from eagle3_tui.session.host.inputs import draft_config_problem
from eagle3_tui.session.presets.catalog import ApplyPlan, find_preset

if TYPE_CHECKING:
    from eagle3_tui.profile import Preset
    from eagle3_tui.remote.host import Host
    from eagle3_tui.session.attached.known import Known
    from eagle3_tui.session.attached.recorder import Recorder
    from eagle3_tui.session.attached.survey import Survey
    from eagle3_tui.session.control.server import ServerControl
    from eagle3_tui.session.deploy.part import DeploymentPart
    from eagle3_tui.session.store.changes import Changed, Changes
    from eagle3_tui.session.store.local import LocalStore
    from eagle3_tui.telemetry.metrics import Telemetry


class Presets:
    """The presets for the server: listed, planned, applied, rolled back."""

    def __init__(self, host: Host, known: Known, survey: Survey, control: ServerControl, changes: Changes,
                 store: LocalStore, deploy: DeploymentPart, recorder: Recorder, telemetry: Telemetry) -> None:
        self._host = host
        self._known = known
        self._survey = survey
        self._control = control
        self._changes = changes
        self._store = store
        self._deploy = deploy
        self._recorder = recorder
        self._telemetry = telemetry

    def available(self) -> list[Preset]:
        spec = self._known.spec
        return self._known.terms.presets(spec.argv if spec is not None else None, self._survey.preset_inputs())

    async def plan(self, preset_name: str) -> ApplyPlan:
        """What applying the preset would change, validated. Changes nothing."""
        preset = find_preset(self.available(), preset_name)
        known = self._known
        if preset.kind == "flags":
            if known.spec is None:
                raise UserError("no launch command known: attach to a running server or set launch_command in the profile")
            return known.terms.plan_flags(preset, known.spec.argv, known.target.arch)
        path = known.target.draft_config_path
        if path is None:
            raise UserError("the draft config path is unknown (no --speculative-draft-model-path and no draft_path in the profile)")
        path = self._deploy.current.editable_path(path)
        raw = await self._host.read_bytes(path)
        why = draft_config_problem(path, raw)
        if why is not None:
            raise UserError(f"preset {preset.name!r} cannot be applied: {why}")
        before = raw.decode("utf-8")
        known.target.draft_text = before
        return known.terms.plan_layers(preset, path=path, before=before, inputs=self._survey.preset_inputs())

    async def apply(self, plan: ApplyPlan) -> None:
        """Validate, write atomically with a backup (or change the launch command), ledger row, restart."""
        async with self._control.changing("apply", "flags" if plan.kind == "flags" else "restart",
                                          detail=plan.preset.name):
            if plan.problems:
                raise UserError(f"preset {plan.preset.name!r} cannot be applied: {plan.problems[0]}")
            await self._control.check_target(self._known.spec, f"apply preset {plan.preset.name!r}")
            if self._known.spec is None:
                raise UserError("no server to restart after the change: none was found and the profile has no "
                                "launch command")
            done = await self._changes.apply(plan, self._known.spec)
            self._changed(done, "preset", {"diff": plan.diff, "warnings": plan.warnings},
                          f"applied {plan.preset.name}", f"preset {plan.preset.name}")
            await self._control.run(reason=f"preset {plan.preset.name}")

    async def rollback(self) -> None:
        """Undo the last applied preset (the config backup byte for byte, or the previous argv) and restart."""
        async with self._control.changing("rollback", "restart"):
            undo = self._changes.next_undo()
            await self._control.check_target(self._known.spec or self._survey.remembered_spec(), "roll back")
            done = await self._changes.undo(undo, self._known.spec or self._survey.remembered_spec())
            self._changed(done, "rollback", {}, f"rolled back {done.preset}", "rollback")
            await self._control.run(reason="rollback")

    def _changed(self, done: Changed, kind: str, results: dict[str, Any], note: str, mark: str) -> None:
        self._known.spec = done.spec
        if done.draft_text is not None:
            self._known.target.draft_text = done.draft_text
        self._recorder.record(kind, results, note)
        self._telemetry.mark(time.time(), mark)
        self._survey.update_served()

    def can_rollback(self) -> str | None:
        """The preset the next rollback undoes, or None."""
        return self._store.rollback_preset()
