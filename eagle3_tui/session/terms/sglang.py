"""SGLang's terms: its own flags with their effective values, and, where the installed release is known,
its capture rule (`session/presets/catalog.py`, `session/host/served.py`)."""

from __future__ import annotations

from collections.abc import Sequence

from eagle3_tui.eagle.spec_config import SpecConfig
from eagle3_tui.profile import Preset
from eagle3_tui.session.events import Served
from eagle3_tui.session.host.served import parse_argv, served
from eagle3_tui.session.presets import catalog as sg
from eagle3_tui.session.presets.catalog import ApplyPlan
from eagle3_tui.session.terms.base import ConfigFlags, EngineTerms, PresetInputs
from eagle3_tui.sglang.logline import LogReader

SWEEP_FLAGS = ("speculative-num-steps", "speculative-eagle-topk", "speculative-num-draft-tokens")


class SGLangTerms(EngineTerms):
    def log_reader(self) -> LogReader:
        return LogReader()

    def presets(self, argv: Sequence[str] | None, inputs: PresetInputs) -> list[Preset]:
        builtins = sg.builtin_presets(data_slots=inputs.data_slots, current=parse_argv(argv),
                                      installed=inputs.installed)
        builtins += self.advice_presets(inputs.findings)
        return sg.all_presets(builtins, inputs.user_presets, inputs.num_layers, inputs.installed)

    def plan_flags(self, preset: Preset, argv: Sequence[str], target_arch: str | None = None) -> ApplyPlan:
        return sg.plan_flags(preset, argv=argv, target_arch=target_arch)

    def plan_layers(self, preset: Preset, *, path: str, before: str, inputs: PresetInputs) -> ApplyPlan:
        return sg.plan_layers(preset, path=path, before=before, num_layers=inputs.num_layers,
                              embed_capture=inputs.embed_capture, fc_num_aux=inputs.fc_num_aux,
                              installed=inputs.installed)

    def served(self, argv: Sequence[str], inputs: PresetInputs, presets: Sequence[Preset]) -> Served | None:
        args = parse_argv(argv)
        if args is None:
            return None
        view, _ = served(args, target_arch=inputs.target_arch, draft_text=inputs.draft_text,
                         num_layers=inputs.num_layers, presets=presets, installed=inputs.installed)
        return view

    def config_flags(self, cfg: SpecConfig) -> ConfigFlags:
        return dict(zip(SWEEP_FLAGS, cfg, strict=True))

    def sweep_argv(self, cfg: SpecConfig, argv: Sequence[str]) -> list[str]:
        return sg.set_flags(argv, self.config_flags(cfg))
