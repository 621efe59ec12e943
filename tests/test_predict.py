"""eagle/predict.py: the batched tree pass over every position reads the same trees and accept
depths as eagle/tree.py (SGLang's per-request algorithm) replayed position by position."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from eagle3_tui.eagle import predict as pr  # noqa: E402
from eagle3_tui.eagle.spec_config import SpecConfig, normalize_grid  # noqa: E402
from eagle3_tui.eagle.tree import TreeBuilder, verify_greedy  # noqa: E402

V, H = 12, 4


class ToyDraft:
    """A draft whose step depends only on (token, fed state): the per-request replay can call it."""

    def __init__(self, seed: int) -> None:
        g = torch.Generator().manual_seed(seed)
        self.emb = torch.randn(V, H, generator=g)
        self.w = torch.randn(H, V, generator=g) * 2

    def project_aux(self, aux: Any) -> Any:
        return aux

    def to_target_ids(self, ids: Any) -> Any:
        return (ids * 5) % V  # a permutation, as d2t maps draft ids to target ids

    def _step(self, ids: Any, hidden: Any, positions: Any, past: Any, mask: Any) -> Any:
        h = hidden + self.emb[ids]
        b, t = ids.shape
        kv = [(torch.zeros(b, 1, t, 1), torch.zeros(b, 1, t, 1))]
        if past is not None:  # the layout the real draft attends over: prefix + own slot keys
            assert mask.shape == (t, past[0][0].shape[2] + t)
        return h @ self.w, torch.tanh(h), kv

    def probs(self, tok: int, state: Any) -> tuple[Any, Any]:
        h = state + self.emb[tok]
        return torch.softmax(h @ self.w, -1), torch.tanh(h)


def _replay(m: ToyDraft, ids: Any, aux: Any, lab: Any, t: int, steps: int, topk: int, d: int) -> int:
    """SGLang's draft_forward + verify for the request whose root sits at position t."""
    b = TreeBuilder(topk)
    p0, st0 = m.probs(int(ids[t]), aux[t])
    p, i = p0.topk(topk)
    toks = b.first(p.tolist(), m.to_target_ids(i).tolist())
    states = [st0] * topk
    for _ in range(1, steps):
        outs = [m.probs(tok, s) for tok, s in zip(toks, states, strict=True)]
        tops = [o[0].topk(topk) for o in outs]
        toks, src = b.expand([tp.values.tolist() for tp in tops],
                             [m.to_target_ids(tp.indices).tolist() for tp in tops])
        states = [outs[j][1] for j in src]
    tree = b.tree(-1, d)
    depths = tree.depths
    return len(verify_greedy(tree, lambda n: int(lab[t + 1 + depths[n]]))) - 1


@pytest.mark.parametrize(("steps", "topk", "d"), [(3, 1, 4), (3, 2, 5), (3, 3, 8), (4, 3, 12), (2, 4, 9)])
def test_batched_pass_matches_the_per_request_algorithm(steps: int, topk: int, d: int) -> None:
    m = ToyDraft(steps * 10 + topk)
    t = 10
    g = torch.Generator().manual_seed(d)
    # as in SGLang, drafted tokens go back in as target ids (the draft embeds with the target's table)
    ids = torch.randint(0, V, (2, t), generator=g)
    aux = torch.randn(2, t, H, generator=g)
    tp = pr.tree_pass(m, ids, aux, steps, topk)
    # labels equal to each position's best guess half of the time, so paths run deep
    lab = torch.full((2, t + steps + 1), -1, dtype=torch.long)
    lab[:, :t] = torch.where(torch.rand(2, t, generator=g) < 0.5, tp.tokens[0][..., 0].roll(1, 1), ids)
    depth, valid = pr.accept_lengths(tp, lab, steps, d)
    for bi, ti in itertools.product(range(2), range(t)):
        if valid[bi, ti]:
            assert int(depth[bi, ti]) == _replay(m, ids[bi], aux[bi], lab[bi], ti, steps, topk, d), (bi, ti)
    assert valid.any()


def test_parse_config_applies_sglang_rules() -> None:
    assert SpecConfig.parse("3,4,8") == (3, 4, 8)
    assert SpecConfig.parse("5/1/16") == (5, 1, 6)  # topk 1: draft tokens = steps + 1
    assert SpecConfig.parse("2,2,7") == (2, 2, 7)  # all 2 + 4 nodes proposed, + the root
    with pytest.raises(ValueError, match="propose only 6 nodes"):
        SpecConfig.parse("2,2,8")
    with pytest.raises(ValueError, match="steps,topk,draft_tokens"):
        SpecConfig.parse("3,4")
    assert normalize_grid([(3, 1, 9), (3, 1, 4), (5, 4, 16)]) == [(3, 1, 4), (5, 4, 16)]


def test_tau_composes_per_depth_acceptance() -> None:
    rates, tau = pr.tau([100, 80, 40], [80, 40, 10])
    assert rates == [0.8, 0.5, 0.25]
    assert tau == pytest.approx(1 + 0.8 + 0.4 + 0.1)
    assert pr.tau([0, 0], [0, 0]) == ([0.0, 0.0], 1.0)


def test_greedy_run_counts_agreeing_depths() -> None:
    ids = torch.tensor([[1, 2, 3, 4, 5]])
    lab = torch.tensor([[9, 2, 3, 9, 5, -1, -1, -1, -1]])
    assert pr.greedy_run(ids, lab, 3).tolist() == [[2, 1, 0, 1, 0]]


def test_server_visits_walks_as_a_greedy_server_decodes() -> None:
    """From a visit with d drafts accepted the next is d + 1 on; where the data departs from the greedy
    text the walk resumes at the next greedy root; uncounted positions are never visited."""
    t = 10
    depth = torch.tensor([[2, 0, 0, 1, 0, 0, 3, 0, 0, 0]])
    run = torch.full((1, t), 9)
    yes = torch.ones(1, t, dtype=torch.bool)
    assert pr.server_visits(depth, run, yes, yes).nonzero()[:, 1].tolist() == [0, 3, 5, 6]
    # the data departs after one greedy token at position 0: positions 1 (committed) and 2 (the
    # departing token is the root) are not a server's; 3 is
    run[0, 0] = 1
    root = yes.clone()
    root[0, 2] = False
    assert pr.server_visits(depth, run, root, yes).nonzero()[:, 1].tolist() == [0, 3, 5, 6]
    counted = yes.clone()
    counted[0, 3] = False
    assert pr.server_visits(depth, run, root, counted).nonzero()[:, 1].tolist() == [0, 4, 5, 6]
