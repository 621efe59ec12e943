"""The accuracy check run on the host for this session (its defaults from what the session knows), and the
training data it and the doctor read the trained wiring from."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle3_tui.errors import UserError
from eagle3_tui.session.check.job import CheckDefaults, CheckEvent, EventHandler, check_request
from eagle3_tui.session.check.job import run_check as run_check_job
from eagle3_tui.session.events import CheckFinished, CheckProgress
from eagle3_tui.session.host.served import parse_argv
from eagle3_tui.session.host.training_data import TrainingData, read_head, read_trained_template, resolve
from eagle3_tui.session.store.records import jsonable

if TYPE_CHECKING:
    from eagle3_tui.eagle.accuracy import CheckReport
    from eagle3_tui.profile import Profile
    from eagle3_tui.remote.host import Host
    from eagle3_tui.session.attached.known import Known
    from eagle3_tui.session.attached.recorder import Recorder
    from eagle3_tui.session.attached.survey import Survey
    from eagle3_tui.session.views import Views


class AccuracyCheck:
    """The check and the training data (see the module docstring)."""

    def __init__(self, host: Host, profile: Profile, views: Views, known: Known, survey: Survey,
                 recorder: Recorder) -> None:
        self._host = host
        self._profile = profile
        self._views = views
        self._known = known
        self._survey = survey
        self._recorder = recorder

    def _defaults(self) -> CheckDefaults:
        t, profile, spec = self._known.target, self._profile, self._known.spec
        launched = parse_argv(spec.argv) if spec is not None else None
        return CheckDefaults(
            draft_dir=profile.draft_path or t.checkpoint_path or (launched.draft_model_path if launched else None),
            data_glob=profile.data_glob, data_slots=profile.data_slots, steps=self._views.server.steps,
            num_layers=t.num_layers, python=profile.remote_python,
            target=str(Path(t.target_config_path).parent) if t.target_config_path else profile.target_path,
        )

    async def run(self, *, on_event: EventHandler | None = None, record: bool = True, **opts: Any) -> CheckReport:
        """The standalone accuracy check on the host; cancel the task to cancel the job.

        `on_event` also sees every line of the job; `record=False` leaves the ledger alone.
        """
        draft, data_glob, options = check_request(opts, self._defaults())

        def progress(ev: CheckEvent) -> None:
            if on_event is not None:
                on_event(ev)
            if ev.done is not None and ev.total is not None:
                self._views.emit(CheckProgress(ev.done, ev.total, ev.eta_s, ev.wiring))

        try:
            report = await run_check_job(self._host, draft_dir=draft, data_glob=data_glob, on_event=progress,
                                         **options)
        except asyncio.CancelledError:
            self._views.emit(CheckFinished(None, "cancelled"))
            raise
        except UserError as err:
            self._views.emit(CheckFinished(None, str(err)))
            raise
        self._known.check = report
        if record:
            self._recorder.record("check", jsonable(report), "accuracy check")
        with contextlib.suppress(Exception):
            await self._survey.refresh_findings()
        self._views.emit(CheckFinished(report, None))
        return report

    async def use_training_data(self, data_glob: str, slots: Sequence[int] | None = None, *,
                                save: bool = False) -> TrainingData:
        """Learn the trained wiring from the data: its first file read on the host, `slots` (the boundaries
        its slots hold) checked against it, else inferred where the layout tells. The profile's data_glob
        and data_slots from now on (the check uses them too); `save`: also in the host's hosts.toml."""
        import json

        from eagle3_tui.eagle.wiring import config_layer_ids

        profile = self._profile
        head = await read_head(self._host, profile.remote_python or self._host.python, data_glob)
        target = self._known.target
        ids = None
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            ids = config_layer_ids(json.loads(target.draft_text or "{}"))[0]
        got = resolve(head, slots, num_layers=target.num_layers, config_ids=ids)
        got = dataclasses.replace(got, template=await read_trained_template(self._host, head.first))
        if save:
            self._save_data_settings(got)
        self._known.training = got
        profile.data_glob, profile.data_slots = got.glob, got.slots
        return got

    def _save_data_settings(self, got: TrainingData) -> None:
        from eagle3_tui.profile.write import Value, save_profile_values

        profile = self._profile
        if not profile.source:
            raise UserError(f"the {profile.name} profile is not read from a file: nothing to save it to")
        values: dict[str, Value] = {"data_glob": got.glob}
        if got.slots is not None:
            values["data_slots"] = got.slots
        save_profile_values(profile.source, profile.name, values)
