"""SGLang's tree drafting (eagle/tree.py) against a hand-worked example.

The example follows SGLang 0.5.6's code path step by step: `srt/speculative/spec_utils.py`
select_top_k_tokens (step 0 keeps the topk; step i scores = parent score x child prob over topk*topk,
the topk best kept, parents recorded as `topk_cs_index + topk**2 * (i - 1) + topk`),
`srt/speculative/eagle_utils.py` organize_draft_results (topk of the flattened scores, sorted) and
sgl_kernel's build_tree_kernel_efficient (the parent of flat node j is parent_list[j // topk]).
"""

from __future__ import annotations

import itertools

import pytest

from eagle3_tui.eagle.tree import DraftTree, TreeBuilder, build_tree, top_indices, tree_mask, verify_greedy

ROOT = 7


def _worked(draft_tokens: int) -> tuple[TreeBuilder, DraftTree]:
    """topk 2, steps 3 (sglang 0.5.6 spec_utils.select_top_k_tokens, worked by hand)."""
    b = TreeBuilder(2)
    # step 0: flat 0 (p .6, token 10), flat 1 (p .25, token 11)
    assert b.first([0.6, 0.25], [10, 11]) == [10, 11]
    # step 1: slot 0 (score .6) proposes 20 (.5) and 21 (.4): .30, .24 at flat 2, 3;
    #         slot 1 (score .25) proposes 22 (.9) and 23 (.05): .225, .0125 at flat 4, 5.
    #         kept: .30 and .24, both children of slot 0 -> the next slots continue from slot 0 twice.
    toks, src = b.expand([[0.5, 0.4], [0.9, 0.05]], [[20, 21], [22, 23]])
    assert toks == [20, 21] and src == [0, 0]
    # step 2: slot 0 (flat 2, .30) proposes 30 (.7), 31 (.1): .21, .03 at flat 6, 7;
    #         slot 1 (flat 3, .24) proposes 32 (.5), 33 (.25): .12, .06 at flat 8, 9.
    toks, src = b.expand([[0.7, 0.1], [0.5, 0.25]], [[30, 31], [32, 33]])
    assert toks == [30, 32] and src == [0, 1]
    return b, b.tree(ROOT, draft_tokens)


def test_scores_and_parent_list_as_sglang_lays_them_out() -> None:
    b, _ = _worked(6)
    assert b.scores == pytest.approx([0.6, 0.25, 0.30, 0.24, 0.225, 0.0125, 0.21, 0.03, 0.12, 0.06])
    assert b.tokens == [10, 11, 20, 21, 22, 23, 30, 31, 32, 33]
    # [-1, step-0 kept 0..topk-1, step-1 kept (flat 2, 3)]; the last step's kept (6, 8) come after
    assert b.parent_list[:5] == [-1, 0, 1, 2, 3]
    assert b.parent_list[5:] == [6, 8]


def test_selection_of_draft_tokens_minus_one_best_nodes() -> None:
    _, tree = _worked(6)
    # the 5 best scores: .6 (0), .30 (2), .25 (1), .24 (3), .225 (4); sorted by flat index
    assert tree.flat == (-1, 0, 1, 2, 3, 4)
    assert tree.tokens == (ROOT, 10, 11, 20, 21, 22)
    # flat 4 (token 22) is a leaf under flat 1: selected although its slot was not kept
    assert tree.parents == (-1, 0, 0, 1, 1, 2)
    assert tree.depths == (0, 1, 1, 2, 2, 2)
    _, tree8 = _worked(8)
    assert tree8.flat == (-1, 0, 1, 2, 3, 4, 6, 8)
    assert tree8.tokens == (ROOT, 10, 11, 20, 21, 22, 30, 32)
    assert tree8.parents == (-1, 0, 0, 1, 1, 2, 3, 4)
    assert tree8.depths == (0, 1, 1, 2, 2, 2, 3, 3)


def test_greedy_verify_takes_the_longest_matching_root_path() -> None:
    _, tree = _worked(8)
    # the target's argmax after each verify position (only the path matters)
    target = {0: 10, 1: 21, 4: 32, 7: 99}
    path = verify_greedy(tree, lambda i: target.get(i, -1))
    assert path == [0, 1, 4, 7]  # accept length 4: three drafts + the target's 99
    # the second child of the root, then a miss
    assert verify_greedy(tree, lambda i: {0: 11, 2: 22, 5: 5}.get(i, -1)) == [0, 2, 5]
    # a first-step miss: accept length 1
    assert verify_greedy(tree, [42] * 8) == [0]


def test_tree_mask_is_ancestors_and_self() -> None:
    _, tree = _worked(8)
    mask = tree_mask(tree)
    rows = [[j for j, m in enumerate(row) if m] for row in mask]
    assert rows[0] == [0]
    assert rows[7] == [0, 1, 4, 7]
    assert rows[5] == [0, 2, 5]


def test_topk_one_is_the_chain() -> None:
    b = TreeBuilder(1)
    b.first([0.9], [5])
    for t in (6, 7):
        toks, src = b.expand([[0.5]], [[t]])
        assert toks == [t] and src == [0]
    tree = b.tree(ROOT, 4)
    assert tree.tokens == (ROOT, 5, 6, 7)
    assert tree.parents == (-1, 0, 1, 2)
    assert verify_greedy(tree, [5, 6, 1, 1]) == [0, 1, 2]


def test_selection_is_the_best_nodes_whose_parents_are_in_the_tree() -> None:
    """A product of probabilities never exceeds its parent's score: the D-1 best nodes form a tree."""
    import random

    rng = random.Random(3)
    for topk, steps in itertools.product((2, 3, 4), (2, 3, 4)):
        b = TreeBuilder(topk)
        b.first(sorted((rng.random() for _ in range(topk)), reverse=True), list(range(topk)))
        for s in range(1, steps):
            probs = [sorted((rng.random() / topk for _ in range(topk)), reverse=True) for _ in range(topk)]
            b.expand(probs, [[100 * s + 10 * m + c for c in range(topk)] for m in range(topk)])
        total = len(b.scores)
        for d in (2, 4, 8, 16):
            if d - 1 > total:
                with pytest.raises(ValueError, match="out of range"):
                    b.tree(ROOT, d)
                continue
            tree = b.tree(ROOT, d)
            want = sorted(top_indices(b.scores, d - 1))
            assert list(tree.flat[1:]) == want
            assert all(p >= 0 for p in tree.parents[1:])
            assert all(tree.parents[i] < i for i in range(1, len(tree.parents)))


def test_an_unselected_parent_leaves_its_child_unlinked() -> None:
    # flat 2's parent (parent_list[1] = flat 0) is not selected
    tree = build_tree(ROOT, [1, 2], [11, 20], [-1, 0, 1], 2)
    assert tree.parents == (-1, 0, -1)
    assert verify_greedy(tree, lambda i: 20) == [0]
