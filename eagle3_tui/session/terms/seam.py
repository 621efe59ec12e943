"""Any other engine's terms (vLLM), read and written through the engine seam (`session/presets/engine.py`,
`session/host/served.served_by_engine`)."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from eagle3_tui.eagle.spec_config import SpecConfig
from eagle3_tui.engines import Launch
from eagle3_tui.engines.base import LogFeed as EngineLogFeed
from eagle3_tui.errors import UserError
from eagle3_tui.profile import Preset
from eagle3_tui.session.events import Served
from eagle3_tui.session.host.served import served_by_engine
from eagle3_tui.session.presets import engine as ep
from eagle3_tui.session.presets.catalog import ApplyPlan
from eagle3_tui.session.terms.base import ConfigFlags, EngineTerms, PresetInputs


class SeamTerms(EngineTerms):
    def _launch(self, argv: Sequence[str] | None) -> Launch | None:
        if argv is None:
            return None
        with contextlib.suppress(UserError):
            return self.engine.parse_launch(argv)
        return None

    def log_reader(self) -> EngineLogFeed:
        return self.engine.log_feed()

    def presets(self, argv: Sequence[str] | None, inputs: PresetInputs) -> list[Preset]:
        own = ep.builtin_presets(self.engine, data_slots=inputs.data_slots, current=self._launch(argv))
        own += self.advice_presets(inputs.findings)
        by_name = {p.name: p for p in [*own, *inputs.user_presets]}
        return [ep.with_boundaries(self.engine, p, inputs.num_layers) for p in by_name.values()]

    def plan_flags(self, preset: Preset, argv: Sequence[str], target_arch: str | None = None) -> ApplyPlan:
        return ep.plan_flags(self.engine, preset, argv=argv)

    def plan_layers(self, preset: Preset, *, path: str, before: str, inputs: PresetInputs) -> ApplyPlan:
        return ep.plan_layers(self.engine, preset, path=path, before=before, num_layers=inputs.num_layers,
                              fc_num_aux=inputs.fc_num_aux)

    def served(self, argv: Sequence[str], inputs: PresetInputs, presets: Sequence[Preset]) -> Served | None:
        launch = self._launch(argv)
        if launch is None:
            return None
        return served_by_engine(self.engine, launch, draft_text=inputs.draft_text, num_layers=inputs.num_layers,
                                presets=presets)

    def config_flags(self, cfg: SpecConfig) -> ConfigFlags:
        return {ep.NUM_TOKENS_KEY: cfg.steps}

    def sweep_argv(self, cfg: SpecConfig, argv: Sequence[str]) -> list[str]:
        return list(self.engine.with_draft_tokens(self.engine.parse_launch(argv), cfg.steps).argv)
