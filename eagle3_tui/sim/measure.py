"""The sim's own accept length for a speculative config, measured in process (no HTTP, no scheduler).

The greedy demo requests the benchmark sends (`prompts.demo_prompts`), each decoded to the end by the
engine the sim server runs (in the dtype the server resolves, float16 for the demo world); accept
length = accepted drafts + the bonus token of every verify step, over verify steps (SGLang's
`spec_num_accept_tokens / spec_num_forward_ct`). All 32 demo prompts: the first 8 alone read a few %
lower than the whole set on some worlds.
The prediction tests and `benchmarks/predict_worlds_bench.py` hold the offline prediction to it.
"""

from __future__ import annotations

from pathlib import Path

from eagle3_tui.sim.recipe import BENCH_NEW_TOKENS, BENCH_REQUESTS

# (steps, topk, draft tokens) of tests/test_predict_demo.py and the benchmark: two chains and two trees
# sharing 8 and 16 verify tokens, and the chain of 3 the demo serves.
PREDICT_CONFIGS: tuple[tuple[int, int, int], ...] = ((3, 1, 4), (3, 4, 8), (5, 4, 16), (7, 1, 8), (15, 1, 16))


def measure_accept_len(target_dir: Path | str, draft_dir: Path | str, config: tuple[int, int, int], *,
                       requests: int = BENCH_REQUESTS, tokens: int = BENCH_NEW_TOKENS,
                       embed_patch: bool = True) -> float:
    """Accept length of the sim's engine over `requests` demo prompts of `tokens` new tokens each."""
    from eagle3_tui.sim.engine import Engine
    from eagle3_tui.sim.prompts import demo_prompts

    steps, topk, draft_tokens = config
    e = Engine(Path(target_dir), Path(draft_dir), num_steps=steps, embed_patch=embed_patch, topk=topk,
               num_draft_tokens=draft_tokens)
    acc = ver = 0
    for text in demo_prompts()[:requests]:
        seq = e.new_sequence(e.tokenizer.encode(text), tokens, frozenset())
        e.prefill(seq)
        while not seq.finished:
            e.step(seq)
        acc, ver = acc + seq.accepted_drafts, ver + seq.verify_ct
    return (acc + ver) / ver if ver else 1.0
