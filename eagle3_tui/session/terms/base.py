"""What every engine's terms answer (`EngineTerms`) and what they are made from (`PresetInputs`)."""

from __future__ import annotations

import abc
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from eagle3_tui.doctor.advice import BETTER_FLAGS
from eagle3_tui.doctor.findings import Finding
from eagle3_tui.eagle.spec_config import SpecConfig
from eagle3_tui.engines import Engine
from eagle3_tui.engines.base import LogFeed as EngineLogFeed
from eagle3_tui.profile import Preset
from eagle3_tui.session.events import Served
from eagle3_tui.session.presets.catalog import ApplyPlan

if TYPE_CHECKING:
    from eagle3_tui.sglang.installed import Answer
    from eagle3_tui.sglang.logline import LogReader

ConfigFlags = dict[str, str | int | float | bool | None]


@dataclass(frozen=True)
class PresetInputs:
    """The target as read from the host, and what else the presets of one session come from."""

    target_arch: str | None = None
    num_layers: int | None = None
    draft_text: str | None = None
    embed_capture: bool | None = None
    fc_num_aux: int | None = None
    data_slots: Sequence[int] | None = None
    user_presets: Sequence[Preset] = ()
    installed: Answer | None = None
    """The installed SGLang release's answer for the target (SGLang only)."""
    findings: Sequence[Finding] = field(default_factory=tuple)


class EngineTerms(abc.ABC):
    """Presets, plans and served fields for one engine. Pure: the session reads and writes the host."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @abc.abstractmethod
    def log_reader(self) -> LogReader | EngineLogFeed:
        """A fresh reader of the engine's log (SGLang's own LogReader, with the run state's events)."""

    @abc.abstractmethod
    def presets(self, argv: Sequence[str] | None, inputs: PresetInputs) -> list[Preset]:
        """The built-ins for the served launch command `argv`, then the profile's, with their boundaries."""

    @abc.abstractmethod
    def plan_flags(self, preset: Preset, argv: Sequence[str], target_arch: str | None = None) -> ApplyPlan:
        """The launch command with a flags preset applied, checked."""

    @abc.abstractmethod
    def plan_layers(self, preset: Preset, *, path: str, before: str, inputs: PresetInputs) -> ApplyPlan:
        """The draft config `before` (at `path`) with a layers preset applied, checked."""

    @abc.abstractmethod
    def served(self, argv: Sequence[str], inputs: PresetInputs, presets: Sequence[Preset]) -> Served | None:
        """What `argv` serves (None: it does not parse)."""

    @abc.abstractmethod
    def config_flags(self, cfg: SpecConfig) -> ConfigFlags:
        """The flags preset that serves `cfg` (the sweep's, the doctor's advice)."""

    def advice_presets(self, findings: Sequence[Finding]) -> list[Preset]:
        """The doctor's `better-flags` advice as a flags preset (none while it advises nothing)."""
        for f in findings:
            cfg = SpecConfig.described_in(f.title) if f.rule_id == BETTER_FLAGS else None
            if cfg is not None:
                return [Preset(BETTER_FLAGS, "flags", flags=self.config_flags(cfg), builtin=True,
                               description=f"the doctor's advice: {f.title}")]
        return []

    @abc.abstractmethod
    def sweep_argv(self, cfg: SpecConfig, argv: Sequence[str]) -> list[str]:
        """`argv` serving `cfg` (the sweep's relaunches, which keep no records)."""
