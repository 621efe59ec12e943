"""The sim as one real SGLang release (`--sglang-version V`): that release's capture rule for the
declared target architecture, what graphed decode replays, start-up failures and the auto-choice.

The rules are `sglang.installed`'s version table (`answer(read_release(None, version=V), ...)`), so the
sim and the session's model of a real install cannot drift apart. The world's tensors stay as they are:
only which boundaries are fed to the draft, and when, follow the release.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eagle3_tui.eagle.spec_config import SpecConfig
    from eagle3_tui.sglang.installed import Answer

SIM_ARCHS = {"llama": "LlamaForCausalLM", "qwen3": "Qwen3ForCausalLM", "deepseek_v3": "DeepseekV3ForCausalLM"}
"""The architectures the demo world's tiny target can be declared as (`--sim-target-arch`)."""


@dataclass(frozen=True)
class SimRelease:
    """What one release does with this draft config's ids on the declared target."""

    version: str
    answer: Answer
    cuda_graph: bool
    """Decode runs under CUDA graphs (SGLang's default; off with --disable-cuda-graph)."""

    @property
    def fails(self) -> str | None:
        return self.answer.fails if self.cuda_graph else self.answer.fails_without_cuda_graph

    @property
    def prefill(self) -> tuple[int, ...]:
        got = self.answer.captures if self.cuda_graph else self.answer.captures_without_cuda_graph
        return tuple(got or ())

    @property
    def decode(self) -> tuple[int, ...]:
        """What every decode step feeds the draft: the graphs' snapshot, or prefill's without graphs."""
        if self.cuda_graph and self.answer.captures_cuda_graph is not None:
            return tuple(self.answer.captures_cuda_graph)
        return self.prefill


def target_arch(declared: str | None, config_arch: str) -> str:
    """The HF architecture the sim serves as: the declared one, else the world's config."""
    return SIM_ARCHS.get(declared or "", config_arch)


def sim_release(
    version: str | None, arch: str, num_layers: int, layer_ids: tuple[int, ...] | None, *, cuda_graph: bool
) -> SimRelease | None:
    """The release's behaviour for these ids, or None for the sim that models no release."""
    if not version:
        return None
    from eagle3_tui.sglang.installed import answer, lookup, read_release

    got = answer(read_release(None, version=version), lookup(arch), num_layers, layer_ids)
    return SimRelease(version, got, cuda_graph)


def auto_spec(version: str | None, arch: str) -> SpecConfig | None:
    """The release's auto-chosen (steps, topk, draft tokens) for the target, or None (0.5.6's rule)."""
    if not version:
        return None
    from eagle3_tui.sglang.installed import read_release

    rules = read_release(None, version=version).spec
    return rules.auto_spec(arch) if rules.has_eagle3 else None


def apply_release(engine: Any, rel: SimRelease) -> None:
    """Feed the draft what the release captures: prefill's boundaries through the engine's capture plan,
    and decode's when graphed decode replays others. Raises RuntimeError where start-up fails."""
    from eagle3_tui.sim.engine import CapturePlan

    if rel.fails is not None:
        raise RuntimeError(f"SGLang {rel.version}: {rel.fails}")
    plan = engine.plan
    if plan is None:
        return
    prefill = rel.prefill
    engine.plan = CapturePlan(plan.layer_ids, tuple(b for b in prefill if b > 0), 0 in prefill, plan.num_layers)
    engine.decode_boundaries = rel.decode if rel.decode != prefill else None
