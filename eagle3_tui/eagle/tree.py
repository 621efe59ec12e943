"""EAGLE tree drafting as SGLang 0.5.6 does it, for one request, in plain Python.

Read from SGLang 0.5.6's `srt/speculative/` (`eagle_worker.py` draft_forward, `spec_utils.py`
select_top_k_tokens, `eagle_utils.py` organize_draft_results, and sgl_kernel's
build_tree_kernel_efficient / verify_tree_greedy that those call):

- step 0 takes the topk tokens of the draft's distribution after the last committed token; each
  becomes a "slot" that the next draft forward runs on. Scores are probabilities.
- step i >= 1: each of the topk slots proposes topk children; a child's score is its parent's score
  times its own probability (a product of probabilities along the path). Of those topk*topk
  children the topk best are kept and become the slots of the next forward.
- every proposed node (kept or not) lands in one flat list: step 0's topk nodes at 0..topk-1, step
  i's topk*topk children at topk + topk*topk*(i-1) + (slot * topk + child). The kept nodes are
  recorded in `parent_list` = [-1, step 0's kept, step 1's kept, ...] so that the parent of flat
  node j is `parent_list[j // topk]` (-1: the root, the last committed token).
- the num_draft_tokens - 1 best-scoring nodes overall are selected, then sorted by flat index
  (parents before children); the verify sequence is [root, selected...].
- greedy verification walks from the root: a child is accepted when its token equals the target's
  argmax at its parent; the walk stops at the first node with no such child. Accept length =
  1 + accepted (the target's token after the last accepted node is always committed).

Ties are broken by the lower index (SGLang's torch.topk leaves them to the kernel). Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field


def top_indices(values: Sequence[float], k: int) -> list[int]:
    """Indices of the k largest values, best first (ties: lower index first), as torch.topk sorted."""
    order = sorted(range(len(values)), key=lambda i: (-values[i], i))
    return order[:k]


@dataclass
class TreeBuilder:
    """Accumulates one request's draft steps (SGLang's score_list / token_list / parents_list)."""

    topk: int
    scores: list[float] = field(default_factory=list)  # flat, one per proposed node
    tokens: list[int] = field(default_factory=list)  # flat, aligned with scores
    parent_list: list[int] = field(default_factory=lambda: [-1])
    kept: list[float] = field(default_factory=list)  # the current slots' scores
    steps: int = 0

    def first(self, probs: Sequence[float], tokens: Sequence[int]) -> list[int]:
        """Step 0 from the root's topk (probs, tokens). Returns the tokens the slots run next."""
        if len(probs) != self.topk or len(tokens) != self.topk:
            raise ValueError(f"step 0 needs {self.topk} candidates")
        self.scores.extend(float(p) for p in probs)
        self.tokens.extend(int(t) for t in tokens)
        self.parent_list.extend(range(self.topk))
        self.kept = [float(p) for p in probs]
        self.steps = 1
        return [int(t) for t in tokens]

    def expand(self, probs: Sequence[Sequence[float]], tokens: Sequence[Sequence[int]]) -> tuple[list[int], list[int]]:
        """Step i >= 1 from each slot's topk (probs, tokens).

        Returns (tokens the new slots run next, the old slot each new slot continues from): the
        hidden state of a new slot is its parent slot's output state.
        """
        k = self.topk
        if len(probs) != k or any(len(p) != k for p in probs):
            raise ValueError(f"each of the {k} slots needs {k} candidates")
        expanded = [self.kept[m] * float(probs[m][c]) for m in range(k) for c in range(k)]
        flat_tokens = [int(tokens[m][c]) for m in range(k) for c in range(k)]
        offset = len(self.scores)
        self.scores.extend(expanded)
        self.tokens.extend(flat_tokens)
        keep = top_indices(expanded, k)
        self.kept = [expanded[j] for j in keep]
        self.steps += 1
        # SGLang appends the parents of the *next* step; the last step's entries are never used.
        self.parent_list.extend(offset + j for j in keep)
        return [flat_tokens[j] for j in keep], [j // k for j in keep]

    def tree(self, root: int, num_draft_tokens: int) -> DraftTree:
        """Select the num_draft_tokens - 1 best nodes and link them into the verify tree."""
        n = num_draft_tokens - 1
        if n > len(self.scores):
            # SGLang's torch.topk over the flattened scores fails the same way (the server crashes)
            raise ValueError(f"selected index k out of range: {n} draft tokens past the root, but {self.steps} "
                             f"steps of topk {self.topk} propose only {len(self.scores)} nodes")
        selected = sorted(top_indices(self.scores, n))
        # parent_list entries past the second-to-last step belong to no node (organize_draft_results
        # drops the last step's parents): cut them so a lookup past them fails loudly.
        used = 1 + self.topk * max(self.steps - 1, 0)
        return build_tree(root, selected, [self.tokens[j] for j in selected], self.parent_list[:used], self.topk)


@dataclass(frozen=True)
class DraftTree:
    """The verify sequence: position 0 is the root (last committed token), 1.. the selected nodes."""

    tokens: tuple[int, ...]  # root first
    parents: tuple[int, ...]  # parents[0] = -1; others index into tokens; -1 elsewhere: unreachable
    flat: tuple[int, ...]  # each selected node's flat index in the step lists (root: -1)

    @property
    def depths(self) -> tuple[int, ...]:
        out = [0] * len(self.tokens)
        for i in range(1, len(self.tokens)):
            p = self.parents[i]
            out[i] = out[p] + 1 if p >= 0 else 0
        return tuple(out)

    def children(self, node: int) -> list[int]:
        return [i for i in range(1, len(self.tokens)) if self.parents[i] == node]

    def ancestors(self, node: int) -> list[int]:
        """The path from the root to `node`, both included."""
        path = [node]
        while path[-1] > 0 and self.parents[path[-1]] >= 0:
            path.append(self.parents[path[-1]])
        return path[::-1]


def build_tree(root: int, selected: Sequence[int], tokens: Sequence[int], parent_list: Sequence[int],
               topk: int) -> DraftTree:
    """Parents of the selected flat nodes, as build_tree_kernel_efficient links them: node j's parent
    is the kept node parent_list[j // topk] (the root when j // topk == 0). A node whose parent was not
    selected (only possible on exact score ties) stays unlinked, as the kernel leaves it."""
    pos = {j: i + 1 for i, j in enumerate(selected)}
    parents = [-1]
    for j in selected:
        tb = j // topk
        if tb == 0:
            parents.append(0)
            continue
        parents.append(pos.get(parent_list[tb], -1))
    return DraftTree((int(root), *map(int, tokens)), tuple(parents), (-1, *map(int, selected)))


def verify_greedy(tree: DraftTree, target_next: Sequence[int] | Callable[[int], int]) -> list[int]:
    """The accepted path (verify positions, root first): from each accepted node, the child whose
    token is the target's argmax there. `target_next[i]` is the target's argmax after position i.
    Accept length = len(path); the committed tokens are the path's tokens after the root plus
    target_next at the path's end."""
    at = target_next if callable(target_next) else target_next.__getitem__
    path = [0]
    while True:
        want = at(path[-1])
        nxt = next((c for c in tree.children(path[-1]) if tree.tokens[c] == want), None)
        if nxt is None:
            return path
        path.append(nxt)


def tree_mask(tree: DraftTree) -> list[list[bool]]:
    """mask[i][j]: verify position i may attend to position j (its ancestors and itself)."""
    n = len(tree.tokens)
    mask = [[False] * n for _ in range(n)]
    for i in range(n):
        for j in tree.ancestors(i):
            mask[i][j] = True
    return mask
