"""What the session knows of the attached server, written by one part and read by others: the launch a
restart runs, the target and draft read, the last accuracy check, the training data, the last benchmark."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import TYPE_CHECKING

from eagle3_tui.engines import Engine, get_engine
from eagle3_tui.errors import UserError
from eagle3_tui.session.host.probe import TargetInfo
from eagle3_tui.session.terms import EngineTerms, terms_for

if TYPE_CHECKING:
    from eagle3_tui.eagle.accuracy import CheckReport
    from eagle3_tui.session.host.training_data import TrainingData
    from eagle3_tui.session.launch import LaunchSpec
    from eagle3_tui.sglang.client import BenchResult


@dataclasses.dataclass
class Known:
    """The session's shared knowledge of its server (see the module docstring)."""

    spec: LaunchSpec | None = None
    """The launch a restart runs: the attached server's, else the remembered or profile's one."""
    target: TargetInfo = dataclasses.field(default_factory=TargetInfo)
    check: CheckReport | None = None
    training: TrainingData | None = None
    """The training data read for the doctor's trained wiring (use_training_data); None: the profile's slots."""
    last_bench: BenchResult | None = None
    recovered: str | None = None
    """What attaching found of an interrupted change (store/changes.py), in one sentence; None: nothing."""

    @property
    def engine(self) -> Engine:
        """The engine serving (the launch command's: `engines.engine_for_launch`); SGLang when none is known."""
        if self.spec is not None:
            with contextlib.suppress(UserError):
                return self.spec.engine
        return get_engine("sglang")

    @property
    def terms(self) -> EngineTerms:
        """The serving engine's presets, plans and served fields (`session/terms`)."""
        return terms_for(self.engine)
