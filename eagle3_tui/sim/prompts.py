"""Prompts for the sim server's background load and the demo benchmark: excerpts of the training text.

Deterministic: evenly spaced line starts in the corpus, so every run sends the same requests.
"""

from __future__ import annotations

from functools import lru_cache


@lru_cache(maxsize=1)
def demo_prompts(count: int = 32, length: int = 48) -> tuple[str, ...]:
    from eagle3_tui.sim.recipe import corpus_bytes

    data = corpus_bytes()
    out = []
    step = max(1, (len(data) - length) // count)
    for i in range(count):
        start = data.find(b"\n", i * step) + 1
        chunk = data[start : start + length].decode("ascii", errors="replace")
        if chunk.strip():
            out.append(chunk)
    return tuple(out)
