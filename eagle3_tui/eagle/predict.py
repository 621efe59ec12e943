"""Offline prediction of the accept length SGLang measures, for any (steps, topk, draft tokens).

One tree pass of the draft per topk over the data (batched causal, as the chain check) grows at every
position the tree SGLang's `draft_forward` grows there (eagle/tree.py): step 0 is the draft over the
data (the target's hidden states; the data's tokens as the committed prefix), each later step runs
the topk kept nodes as slots, fed their parent slot's output state, attending to the prefix plus the
slot's own earlier keys (SGLang's KV layout for topk > 1), their tokens the draft's own picks. Every
(steps, draft tokens) with that topk is then read off the same pass: the draft_tokens - 1 best
nodes of the first `steps` steps are selected, and a node is accepted when its ancestors are and its
token is the target's token at its depth along the data (the labels the chain check uses).

A greedy server only ever drafts from its own greedy text, while training data departs from the
target's argmax (on the demo world a third of the time). Past such a point the data's labels answer
for a context the server would not be in, so depth j is judged only where the data agrees with the
target's argmax through depth j - 1: a_j = P(depth >= j | depth >= j - 1, data greedy through j - 1),
and the prediction is tau = 1 + sum_j prod_{i<=j} a_i, the chain check's formula with the tree's
per-depth acceptance.

Those rates are taken only at the positions a greedy server would verify from (`server_visits`): it
verifies again right after what it committed, so it lands seldom inside the long runs a deep chain
accepts. Over every position the mean is an arithmetic average where the server's is nearer a harmonic
one: it overshoots the server, the more the deeper the chain.

Like accuracy.py it needs only the standard library and torch, and ships in the check's zip.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eagle3_tui.eagle.spec_config import SpecConfig, normalize_grid


@dataclass(frozen=True)
class Prediction:
    """One row of the check's `predictions`: the accept length predicted for `config` on one wiring
    (None when no position of the data reached that deep)."""

    config: SpecConfig
    accept_len: float | None
    wiring: str = "?"
    boundaries: tuple[int, ...] | None = None
    positions: int = 0

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Prediction | None:
        """A report row (JSON); None for a row that does not hold a configuration."""
        try:
            config = SpecConfig(int(row["steps"]), int(row["topk"]), int(row["draft_tokens"]))
        except (KeyError, TypeError, ValueError):
            return None
        acc = row.get("accept_len")
        bounds = row.get("boundaries")
        return cls(config, float(acc) if isinstance(acc, (int, float)) else None, str(row.get("wiring") or "?"),
                   tuple(int(b) for b in bounds) if isinstance(bounds, list) else None, int(row.get("positions") or 0))


def prediction_list(rows: Iterable[Mapping[str, Any]]) -> list[Prediction]:
    """A report's `predictions` rows, typed, in order (malformed rows left out)."""
    return [p for p in map(Prediction.from_row, rows) if p is not None]


@dataclass
class TreePass:
    """One topk's expansion at every position of a batch: per step, scores (B, T, n), target-id tokens
    (B, T, n) and the flat indices of the kept nodes (B, T, topk); n = topk at step 0, topk**2 after."""

    topk: int
    scores: list[Any]
    tokens: list[Any]
    kept: list[Any]


def tree_pass(model: Any, ids: Any, aux: Any, steps: int, topk: int) -> TreePass:
    """Grow SGLang's tree at every position of (B, T) in `steps` steps (steps - 1 batched forwards)."""
    import torch

    b, t = ids.shape
    k = topk
    pos0 = torch.arange(t, device=ids.device).expand(b, t)
    logits, state, kv = model._step(ids, model.project_aux(aux), pos0, None, None)
    p, idx = torch.softmax(logits.float(), dim=-1).topk(k, dim=-1)  # (B, T, k), best first
    tok = model.to_target_ids(idx)
    out = TreePass(k, [p], [tok], [torch.arange(k, device=ids.device).expand(b, t, k)])
    kept_score, inputs = p, tok
    slots = state[:, :, None].expand(b, t, k, state.shape[-1])
    # slot rows: (b, m) -> row b * k + m; every slot sees the same step-0 keys
    ks = [[key.repeat_interleave(k, dim=0)] for key, _ in kv]
    vs = [[val.repeat_interleave(k, dim=0)] for _, val in kv]
    causal = torch.tril(torch.ones(t, t, dtype=torch.bool, device=ids.device))
    diag = torch.eye(t, dtype=torch.bool, device=ids.device)
    rows_pos = torch.arange(t, device=ids.device).expand(b * k, t)
    offset = k
    for s in range(1, steps):
        x_ids = inputs.permute(0, 2, 1).reshape(b * k, t)
        x_state = slots.permute(0, 2, 1, 3).reshape(b * k, t, -1)
        mask = torch.cat([causal] + [diag] * s, dim=1)
        past = [(torch.cat(ks[i], dim=2), torch.cat(vs[i], dim=2)) for i in range(len(ks))]
        logits, state, kv = model._step(x_ids, x_state, rows_pos + s, past, mask)
        for i, (key, val) in enumerate(kv):
            ks[i].append(key)
            vs[i].append(val)
        p, idx = torch.softmax(logits.float(), dim=-1).topk(k, dim=-1)  # (B*k, T, k)
        p = p.view(b, k, t, k).permute(0, 2, 1, 3)  # (B, T, slot, child)
        tok = model.to_target_ids(idx).view(b, k, t, k).permute(0, 2, 1, 3).reshape(b, t, k * k)
        expanded = (kept_score[..., None] * p).reshape(b, t, k * k)
        kept_score, keep = expanded.topk(k, dim=-1)
        out.scores.append(expanded)
        out.tokens.append(tok)
        out.kept.append(keep + offset)
        offset += k * k
        inputs = tok.gather(-1, keep)
        state = state.view(b, k, t, -1).permute(0, 2, 1, 3)  # (B, T, slot, H)
        parent = (keep // k)[..., None].expand(b, t, k, state.shape[-1])
        slots = state.gather(2, parent)
    return out


def accept_lengths(tp: TreePass, lab: Any, steps: int, draft_tokens: int) -> tuple[Any, Any]:
    """Per position: (accepted depth under (steps, topk, draft_tokens), whether its labels reach that deep).

    `lab` (B, T + steps + 1): the target's token after data position j at index j, -1 where unknown;
    the node at depth d (step d - 1) grown at position t must equal lab[t + d]."""
    import torch

    b, t = tp.scores[0].shape[:2]
    k = tp.topk
    idx = torch.arange(t, device=lab.device)
    scores = torch.cat(tp.scores[:steps], dim=-1)
    n = scores.shape[-1]
    sel = torch.zeros(b, t, n, dtype=torch.bool, device=scores.device)
    sel.scatter_(-1, scores.topk(min(draft_tokens - 1, n), dim=-1).indices, True)
    oks: list[Any] = []
    depth = torch.zeros(b, t, dtype=torch.long, device=scores.device)
    valid = torch.ones(b, t, dtype=torch.bool, device=scores.device)
    start = 0
    for s in range(steps):
        want = lab[:, idx + 1 + s].to(scores.device)
        valid &= want >= 0
        width = tp.scores[s].shape[-1]
        ok = sel[..., start : start + width] & (tp.tokens[s] == want[..., None])
        if s > 0:
            # node (slot, child) of step s hangs under the kept node of step s - 1 in that slot
            parents = tp.kept[s - 1].repeat_interleave(k, dim=-1)
            ok &= torch.cat(oks, dim=-1).gather(-1, parents)
        oks.append(ok)
        depth = torch.where(ok.any(-1), torch.full_like(depth, s + 1), depth)
        start += width
    return depth, valid


def greedy_run(ids: Any, lab: Any, steps: int) -> Any:
    """Per position t: how many depths d = 1.. the data's next token equals the target's argmax
    (ids[t + d] == lab[t + d]), capped at `steps`."""
    import torch

    b, t = ids.shape
    idx = torch.arange(t, device=ids.device)
    run = torch.ones(b, t, dtype=torch.bool, device=ids.device)
    out = torch.zeros(b, t, dtype=torch.long, device=ids.device)
    for d in range(1, steps + 1):
        nxt = ids[:, (idx + d).clamp(max=t - 1)]
        run &= (nxt == lab[:, idx + d].to(ids.device)) & (idx + d < t)
        out += run.long()
    return out


def server_visits(depth: Any, run: Any, greedy_root: Any, counted: Any) -> Any:
    """(B, T) bool: the positions a greedy server verifies from, walking each row as it decodes.

    A server verifies at a position, commits the accepted drafts and the bonus token, and verifies
    next right after them: from position t with d drafts accepted, next at t + d + 1. Averaging the
    accept length over every position instead weights each one equally, while the server lands
    seldom inside the long runs a deep chain accepts and often where drafts fail: the mean over
    positions is above the server's, the more so the deeper the chain (the renewal, or inspection,
    paradox). The walk follows the data only while the data is the target's greedy text
    (`run`: greedy depths after t); where it departs, the server's text would differ, and the walk
    resumes at the next position whose root token is greedy (`greedy_root`), as a server's first
    verify after a prompt does."""
    import torch

    b, t = depth.shape
    visits = torch.zeros(b, t, dtype=torch.bool, device=depth.device)
    nxt = torch.zeros(b, dtype=torch.long, device=depth.device)
    step = torch.minimum(depth, run) + 1
    for p in range(t):
        at = counted[:, p] & greedy_root[:, p] & (nxt <= p)
        visits[:, p] = at
        nxt = torch.where(at, p + step[:, p], nxt)
    return visits


def tau(reach: Sequence[int], accepted: Sequence[int]) -> tuple[list[float], float]:
    """Per-depth conditional acceptance a_j = accepted[j] / reach[j] and tau = 1 + sum_j prod a."""
    rates = [a / r if r else 0.0 for r, a in zip(reach, accepted)]  # noqa: B905 (3.8)
    total, prod = 1.0, 1.0
    for a in rates:
        prod *= a
        total += prod
    return rates, total


def predict_grid(model: Any, batches: Iterable[tuple[Any, Any, Any, Any]], grid: Sequence[SpecConfig],
                 device: Any) -> list[dict]:
    """Mean accept length per config over `batches` of (ids, aux, lab, counted) (aux on its device).
    One tree pass per topk, as deep as the deepest config with that topk."""
    import torch

    grid = normalize_grid(grid)
    by_topk: dict[int, int] = {}
    for s, k, _ in grid:
        by_topk[k] = max(by_topk.get(k, 0), s)
    reach = {c: [0] * c[0] for c in grid}
    hits = {c: [0] * c[0] for c in grid}
    counts = {c: 0 for c in grid}
    with torch.inference_mode():
        for ids, aux, lab, counted in batches:
            ids, aux = ids.to(device), aux.to(device)
            lab, counted = lab.to(device), counted.to(device)
            run = greedy_run(ids, lab, max(by_topk.values()) + 1)
            greedy_root = ids == lab[:, : ids.shape[1]]
            for k, deepest in by_topk.items():
                tp = tree_pass(model, ids, aux, deepest, k)
                for c in (c for c in grid if c[1] == k):
                    depth, valid = accept_lengths(tp, lab, c[0], c[2])
                    valid &= counted & server_visits(depth, run, greedy_root, counted)
                    counts[c] += int(valid.sum())
                    for j in range(1, c[0] + 1):
                        at = valid & (depth >= j - 1) & (run >= j - 1)
                        reach[c][j - 1] += int(at.sum())
                        hits[c][j - 1] += int((at & (depth >= j)).sum())
    rows = []
    for c in grid:
        rates, t = tau(reach[c], hits[c])
        rows.append({"steps": c[0], "topk": c[1], "draft_tokens": c[2],
                     "accept_len": round(t, 4) if counts[c] else None,
                     "depth_accept": [round(a, 4) for a in rates], "positions": counts[c]})
    return rows


def predict_wirings(model: Any, wirings: Sequence[Any], grid: Sequence[SpecConfig], device: Any,
                    batches_for: Callable[[Any, int], Iterable[tuple[Any, Any, Any, Any]]]) -> list[dict]:
    """`predict_grid` for each wiring (`batches_for(wiring, deepest steps)` assembles its batches);
    each row names its wiring and boundaries."""
    grid = normalize_grid(grid)
    deepest = max((s for s, _, _ in grid), default=1)
    rows: list[dict] = []
    for w in wirings:
        for row in predict_grid(model, batches_for(w, deepest), grid, device):
            row["wiring"] = w.name
            row["boundaries"] = list(w.boundaries) if w.boundaries is not None else None
            rows.append(row)
    return rows


def predict_for_report(model: Any, served_forward: Any, data: Any, labels: Any, wirings: Sequence[Any],
                       opts: Any, device: Any, dtype: Any, report: Any,
                       assemble: Callable[..., tuple[Any, ...]],
                       batches: Callable[[Any, int], list[list[int]]]) -> list[dict]:
    """The check's `predictions`: the grid in `opts.predict` for the best wiring and for the one SGLang
    serves from the draft config when that differs, with the served forward. `assemble` and
    `batches` are accuracy.py's (its batches shrink by the widest topk: each slot is a row)."""
    best = report.best()
    served = report.result("draft config")
    names = [best.name] if best is not None else []
    if served is not None and served.top1 is not None and best is not None and served.slots != best.slots:
        names.append(served.name)
    chosen = [w for n in names for w in wirings if w.name == n and w.runnable]
    if not chosen:
        return []
    widest = max(k for _, k, _ in opts.predict)
    per_batch = max(1, opts.batch_tokens // widest)

    def batches_for(w: Any, steps: int) -> Iterable[tuple[Any, Any, Any, Any]]:
        for b in batches(data, per_batch):
            ids, aux, lab, _lab_in, counted = assemble(data, b, labels, w, steps, dtype)
            yield ids, aux, lab, counted

    before = model.fwd
    model.fwd = served_forward
    try:
        return predict_wirings(model, chosen, opts.predict, device, batches_for)
    finally:
        model.fwd = before
