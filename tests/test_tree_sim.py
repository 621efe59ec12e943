"""The sim engine's tree drafting on the demo world: lossless (the output is the target's own greedy
text), topk 1 through the tree code is the chain, and trees accept more per verify than a chain."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.plugins.world import make_draft_dir

pytestmark = pytest.mark.slow


def _engine(world: Any, tmp: Path, steps: int, topk: int, draft_tokens: int) -> Any:
    import torch

    from eagle3_tui.sim.engine import Engine

    torch.set_num_threads(1)
    draft = make_draft_dir(world, tmp / "draft", layer_ids=world.fix_layer_ids)
    return Engine(Path(world.target_dir), draft, num_steps=steps, embed_patch=True, topk=topk,
                  num_draft_tokens=draft_tokens)


def _run(engine: Any, prompts: list[list[int]], new: int, *, tree: bool = False) -> tuple[list[list[int]], float]:
    outs, acc, ver = [], 0, 0
    for p in prompts:
        seq = engine.new_sequence(p, new, frozenset())
        engine.prefill(seq)
        while not seq.finished:
            engine._tree_step(seq) if tree else engine.step(seq)
        outs.append(seq.output)
        acc, ver = acc + seq.accepted_drafts, ver + seq.verify_ct
    return outs, (acc + ver) / ver if ver else 1.0


@pytest.fixture(scope="module")
def prompts(demo_world: Any) -> list[list[int]]:
    from eagle3_tui.sim.prompts import demo_prompts
    from eagle3_tui.sim.tokenizer import ByteTokenizer

    tok = ByteTokenizer.load(Path(demo_world.target_dir))
    return [tok.encode(t) for t in demo_prompts()[:4]]


def test_tree_decoding_is_lossless_and_accepts_more(demo_world: Any, tmp_path: Path, prompts: list[list[int]]) -> None:
    plain = _engine(demo_world, tmp_path, 0, 1, 1)
    want, _ = _run(plain, prompts, 32)
    chain = _engine(demo_world, tmp_path, 3, 1, 4)
    got_chain, chain_len = _run(chain, prompts, 32)
    tree = _engine(demo_world, tmp_path, 5, 4, 16)
    got_tree, tree_len = _run(tree, prompts, 32)
    assert got_chain == want and got_tree == want
    assert tree_len > chain_len > 1.0


def test_topk_one_through_the_tree_path_is_the_chain(demo_world: Any, tmp_path: Path,
                                                     prompts: list[list[int]]) -> None:
    chain = _engine(demo_world, tmp_path, 3, 1, 4)
    a, len_a = _run(chain, prompts[:2], 24)
    b, len_b = _run(chain, prompts[:2], 24, tree=True)
    assert a == b and len_a == pytest.approx(len_b)
