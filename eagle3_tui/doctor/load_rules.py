"""Rules that know the load: the batch the deployment runs (its decode lines' `#running-req`) against the
CUDA-graph batch limit, the width of the draft tree, and the concurrency a benchmark measured at.

A speculative iteration verifies `draft tokens` per request: at one request a wide tree is nearly free (the
GPU reads the weights once either way), at forty the verify pass is compute-bound and every extra draft
token costs as much as a real one. SGLang captures CUDA graphs for batches up to `--cuda-graph-max-bs`;
a decode batch above it runs eagerly, the launch overhead the graphs exist to hide paid every iteration.
"""

from __future__ import annotations

from eagle3_tui.doctor.facts import Facts
from eagle3_tui.doctor.findings import Evidence, Finding
from eagle3_tui.sglang.launch import EffectiveSpec, effective

CUDA_GRAPH_BS = "cuda-graph-bs"
TREE_TOO_WIDE = "tree-too-wide"
BENCH_LOAD = "bench-load"

VERIFY_TOKEN_KNEE = 256
"""Tokens per verify forward past which a GPU's matmuls are compute-bound: a dense bf16 GEMM stops being
bound by reading the weights near the chip's FLOP:byte ratio (about 300 on H100/H200, 150-200 on A100)."""
LOAD_RATIO = 2.0
"""A benchmark at a concurrency more than this far (either way) from the served load measures another regime."""


def _ints(values: list[str]) -> list[int]:
    out = []
    for v in values:
        try:
            out.append(int(v))
        except ValueError:
            break
    return out


def graph_max_bs(f: Facts) -> tuple[int, str] | None:
    """The largest decode batch SGLang captured a CUDA graph for, and where it was read; None when graphs
    are off or the limit is unknown (SGLang chose it from the GPU's memory and /server_info was not read)."""
    sa = f.server_args or {}
    if sa.get("disable_cuda_graph") is True or (f.launch is not None and f.launch.has_flag("--disable-cuda-graph")):
        return None
    v = sa.get("cuda_graph_max_bs")
    if isinstance(v, int) and not isinstance(v, bool) and v > 0:
        return v, "/server_info cuda_graph_max_bs"
    bs = sa.get("cuda_graph_bs")
    if isinstance(bs, list) and bs and all(isinstance(x, int) for x in bs):
        return max(bs), "/server_info cuda_graph_bs"
    if f.launch is not None:
        toks = [*f.launch.config_argv, *f.launch.argv]
        for i, tok in enumerate(toks):
            if tok == "--cuda-graph-bs":
                got = _ints(toks[i + 1:])
                if got:
                    return max(got), f"{f.launch_source}: --cuda-graph-bs"
        given = f.launch.flag_value("--cuda-graph-max-bs")
        if given is not None and given.isdigit():
            return int(given), f"{f.launch_source}: --cuda-graph-max-bs {given}"
    return None


def _spec(f: Facts) -> EffectiveSpec | None:
    if f.effective is not None:
        return f.effective
    return effective(f.launch, target_arch=f.target_arch) if f.launch is not None else None


def _running_evidence(f: Facts) -> Evidence:
    mean = f"{f.running_reqs_mean:.1f}" if f.running_reqs_mean is not None else "?"
    peak = f"{f.running_reqs_peak:.0f}" if f.running_reqs_peak is not None else "?"
    return Evidence(f.log_path or "server log", f"#running-req over the live window: mean {mean}, peak {peak}")


def cuda_graph_bs(f: Facts) -> Finding | None:
    """More requests ran in one decode batch than the CUDA graphs were captured for."""
    peak = f.running_reqs_peak
    limit = graph_max_bs(f)
    if peak is None or limit is None or peak <= limit[0]:
        return None
    bs, where = limit
    ev = [_running_evidence(f), Evidence(where, f"CUDA graphs captured for decode batches up to {bs}")]
    return Finding(
        CUDA_GRAPH_BS, "warning",
        f"decode batches reached {peak:.0f} requests, above --cuda-graph-max-bs {bs}: those iterations run "
        "without CUDA graphs",
        ev,
        f"Raise --cuda-graph-max-bs to at least {int(peak)} (graph memory grows with it), or cap "
        f"--max-running-requests at {bs}.",
    )


def tree_too_wide(f: Facts) -> Finding | None:
    """A tree (topk > 1, or more draft tokens than a chain of the served steps) whose verify pass, at the batch
    served, is past the compute-bound knee."""
    spec = _spec(f)
    load = f.running_reqs_mean
    if spec is None or not spec.speculative or load is None or None in (spec.steps, spec.topk, spec.draft_tokens):
        return None
    steps, topk, d = int(spec.steps or 0), int(spec.topk or 1), int(spec.draft_tokens or 0)
    chain = steps + 1
    if topk <= 1 and d <= chain:
        return None
    tokens = load * d
    if tokens < VERIFY_TOKEN_KNEE:
        return None
    ev = [
        _running_evidence(f),
        Evidence(f.launch_source, f"steps {steps}, topk {topk}, draft tokens {d}: the target verifies {d} tokens "
                                  f"per request, ~{tokens:.0f} per iteration at this load"),
        Evidence("cost", f"past ~{VERIFY_TOKEN_KNEE} tokens a verify forward is compute-bound: each draft token "
                         "costs about what a generated one does, and a tree's extra branches are mostly rejected"),
    ]
    return Finding(
        TREE_TOO_WIDE, "warning",
        f"a tree of {d} draft tokens (topk {topk}) at ~{load:.0f} requests in flight: {tokens:.0f} tokens per "
        f"verify pass, compute-bound",
        ev,
        f"At this load serve a chain: --speculative-eagle-topk 1 --speculative-num-draft-tokens {chain} (steps "
        f"{steps}); keep the tree for low-concurrency deployments. `eagle3-tui sweep -c {max(1, round(load))}` "
        "measures both at this concurrency.",
    )


def bench_load(f: Facts) -> Finding | None:
    """The latest benchmark ran at a concurrency far from the load the deployment serves."""
    c, load = f.bench_concurrency, f.running_reqs_mean
    if not c or load is None or load < 1:
        return None
    if max(c, load) / max(min(c, load), 1e-9) <= LOAD_RATIO:
        return None
    return Finding(
        BENCH_LOAD, "info",
        f"the benchmark ran {c} request(s) at a time; the server runs ~{load:.0f}: its tok/s and the flag advice "
        "describe another load",
        [Evidence(f.bench_source, f"concurrency {c}"), _running_evidence(f)],
        f"Benchmark at the served load: `eagle3-tui bench -c match` (or -c {max(1, round(load))}).",
    )


LOAD_RULES = ((CUDA_GRAPH_BS, cuda_graph_bs), (TREE_TOO_WIDE, tree_too_wide), (BENCH_LOAD, bench_load))
