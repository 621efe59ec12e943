"""What decides the demo world's tensors: the `Recipe` and the training text (no torch here, so
`ensure_world()` on a cached world stays cheap for the UI)."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field
from pathlib import Path

# The training text: the first 12,000 bytes of CPython 3.11's Lib/textwrap.py (Python Software
# Foundation License) with runs of spaces collapsed, shipped beside this file so every Python version
# builds the same world. It is small enough for the target to nearly memorise in its step budget:
# greedy continuations then follow the text instead of collapsing into a short loop.
CORPUS_FILE = Path(__file__).with_name("corpus.txt")


# The sim's greedy benchmark (sim/measure.py): this many demo prompts (sim/prompts.py), this many new
# tokens each. The world's held-out rows are the target's responses to the same requests.
BENCH_REQUESTS = 32
BENCH_NEW_TOKENS = 64


@dataclass(frozen=True)
class Recipe:
    """Everything that decides the world's tensors; its hash is the cache key."""

    seed: int = 0
    num_layers: int = 12
    hidden_size: int = 128
    heads: int = 4
    intermediate_size: int = 256
    seq_len: int = 128
    target_steps: int = 250
    target_batch: int = 16
    target_lr: float = 4e-3
    copy_fraction: float = 0.3
    copy_min: int = 4
    copy_max: int = 64
    num_sequences: int = 320
    # held-out rows are the target's greedy responses to the first this many demo prompts, this many
    # tokens long: the requests the sim's greedy benchmark sends (sim/prompts.py), regenerated as EAGLE-3
    # pipelines regenerate their responses, with the loss mask on the response only
    heldout_sequences: int = BENCH_REQUESTS
    heldout_new_tokens: int = BENCH_NEW_TOKENS
    # and this many more greedy tokens past each response, outside the loss mask: a server verifying a deep
    # chain near a response's end drafts past max_new_tokens and counts what it accepted there, so the
    # check needs the target's tokens there to judge those drafts (15 steps: 16)
    heldout_label_tail: int = 16
    draft_vocab_size: int = 160
    draft_intermediate_size: int = 256
    draft_steps: int = 300
    draft_batch: int = 16
    draft_lr: float = 3e-3
    ttt_steps: int = 3
    slot_boundaries: tuple[int, ...] = field(default=(0, 2, 6, 9))

    def key(self, corpus_digest: str) -> str:
        text = repr(sorted(asdict(self).items())) + corpus_digest + RECIPE_VERSION
        return hashlib.sha256(text.encode()).hexdigest()[:16]


RECIPE_VERSION = "3"


def corpus_bytes() -> bytes:
    """The training text (printable ASCII and newlines)."""
    return CORPUS_FILE.read_bytes()
