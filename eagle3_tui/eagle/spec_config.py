"""The speculative-decoding flags EAGLE-3 drafting runs under: (steps, topk, draft tokens), one type.

SGLang and the check speak of the same three numbers: `--speculative-num-steps`, `--speculative-eagle-topk`,
`--speculative-num-draft-tokens`. `SpecConfig` is a named tuple so that a row of JSON (`[3, 1, 4]`), a
dict key and a comparison with a plain tuple keep working, while the code names its fields. Its one
rule is SGLang's: topk 1 serves draft tokens = steps + 1, and the tree must propose at least the draft
tokens asked. Standard library only (it ships in the check's zip).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import NamedTuple

_DESCRIBED = re.compile(r"\bsteps (\d+), topk (\d+), draft (\d+)\b")


class SpecConfig(NamedTuple):
    steps: int
    topk: int
    draft_tokens: int

    def __str__(self) -> str:
        return f"{self.steps}/{self.topk}/{self.draft_tokens}"

    def describe(self) -> str:
        return f"steps {self.steps}, topk {self.topk}, draft {self.draft_tokens}"

    @classmethod
    def described_in(cls, text: str) -> SpecConfig | None:
        """The first configuration `describe` wrote into `text` (a finding's title), or None."""
        m = _DESCRIBED.search(text)
        return cls(int(m[1]), int(m[2]), int(m[3])) if m else None

    @classmethod
    def of(cls, steps: object, topk: object, draft_tokens: object) -> SpecConfig:
        """As SGLang would run them (the topk-1 rule applied); ValueError with one sentence when it
        would refuse them."""
        text = f"{steps},{topk},{draft_tokens}"
        try:
            s, k, d = (int(str(v)) for v in (steps, topk, draft_tokens))
        except ValueError:
            raise ValueError(f"{text!r}: expected steps,topk,draft_tokens (e.g. 3,4,8)") from None
        if s < 1 or k < 1 or d < 2:
            raise ValueError(f"{text!r}: steps and topk must be >= 1 and draft tokens >= 2")
        if k == 1:
            d = s + 1
        if d - 1 > max_draft_tokens(s, k):
            raise ValueError(f"{text!r}: {s} steps of topk {k} propose only {max_draft_tokens(s, k)} "
                             f"nodes, fewer than the {d - 1} draft tokens asked (SGLang fails to start)")
        return cls(s, k, d)

    @classmethod
    def parse(cls, text: str) -> SpecConfig:
        """`S,K,D` (also `S/K/D`)."""
        parts = text.replace("/", ",").split(",")
        if len(parts) != 3:
            raise ValueError(f"{text!r}: expected steps,topk,draft_tokens (e.g. 3,4,8)")
        return cls.of(*(p.strip() for p in parts))


def max_draft_tokens(steps: int, topk: int) -> int:
    """How many nodes SGLang's expansion proposes: topk + (steps - 1) * topk**2."""
    return topk + (steps - 1) * topk * topk


# A small standard grid: chains of 3 and 5 steps, SGLang's Llama auto-choice (5, 4, 8) and common trees.
STANDARD_GRID: tuple[SpecConfig, ...] = (
    SpecConfig(3, 1, 4), SpecConfig(5, 1, 6), SpecConfig(7, 1, 8), SpecConfig(8, 1, 9), SpecConfig(3, 4, 8),
    SpecConfig(5, 4, 8), SpecConfig(5, 4, 16), SpecConfig(6, 8, 32),
)
"""Chains of 3 to 8 steps (a well-trained draft's best chain is often 6-8 at low load) and trees up to SGLang's
common 6/8/32; the chains are what a loaded server should serve (doctor/load_rules.py)."""


def normalize_grid(grid: Iterable[Iterable[int]]) -> list[SpecConfig]:
    """Configs as SGLang would run them, duplicates dropped, order kept; ValueError on one it refuses."""
    out: list[SpecConfig] = []
    for s, k, d in grid:
        c = SpecConfig.of(s, k, d)
        if c not in out:
            out.append(c)
    return out


def prediction_grid(served: SpecConfig | None, wanted: Iterable[Iterable[int]] = ()) -> list[SpecConfig]:
    """What a check predicts when not told: the served flags, then `wanted` (the flags the host's presets
    would serve, those its ledger saw), then the standard grid; as SGLang would run them, configurations
    it refuses left out. The console and `eagle3-tui check` both predict this grid."""
    out: list[SpecConfig] = []
    for s, k, d in [*([served] if served is not None else []), *wanted, *STANDARD_GRID]:
        try:
            c = SpecConfig.of(s, k, d)
        except ValueError:
            continue
        if c not in out:
            out.append(c)
    return out
