"""Training for the demo world: the target on text that ships with Python, then the EAGLE-3 draft.

Everything is driven by a `Recipe` with fixed step counts (never time limits), one thread, and a
seed, so a build is reproducible. The contrast the demo needs comes from context: part of every
batch is text whose next byte is a copy from k positions back (k in 4..64), which the target learns
to continue; a draft can only follow that with the right hidden states wired in.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor

from eagle3_tui.eagle.drafter import Eagle3Drafter
from eagle3_tui.sim.recipe import RECIPE_VERSION, Recipe, corpus_bytes  # noqa: F401  (re-exported)
from eagle3_tui.sim.target import TargetModel
from eagle3_tui.sim.tokenizer import BOS_ID, VOCAB_SIZE


def target_config(r: Recipe) -> dict[str, Any]:
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": r.hidden_size,
        "intermediate_size": r.intermediate_size,
        "num_hidden_layers": r.num_layers,
        "num_attention_heads": r.heads,
        "num_key_value_heads": r.heads,
        "head_dim": r.hidden_size // r.heads,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "vocab_size": VOCAB_SIZE,
        "max_position_embeddings": 4096,
        "bos_token_id": BOS_ID,
        "eos_token_id": 257,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
    }


def sample_sequences(corpus: Tensor, count: int, r: Recipe, gen: torch.Generator) -> Tensor:
    """`count` sequences of `seq_len` ids: BOS + text, and for a `copy_fraction` of them the text
    turns periodic (x_t = x_{t-k}) from a random point on."""
    t = r.seq_len
    starts = torch.randint(0, corpus.numel() - t, (count,), generator=gen)
    out = torch.stack([corpus[s : s + t] for s in starts.tolist()])
    out[:, 0] = BOS_ID
    copy = torch.rand(count, generator=gen) < r.copy_fraction
    for i in torch.nonzero(copy).flatten().tolist():
        k = int(torch.randint(r.copy_min, r.copy_max + 1, (1,), generator=gen))
        m = int(torch.randint(k + 1, max(k + 2, t // 2), (1,), generator=gen))
        for j in range(m, t):
            out[i, j] = out[i, j - k]
    return out


@torch.no_grad()
def greedy_continue(model: TargetModel, prompts: Tensor, length: int) -> Tensor:
    """(B, length) ids: each prompt row, then the target's own greedy tokens up to `length`."""
    out = [prompts]
    logits, _, caches = model(prompts, return_cache=True)
    for i in range(length - prompts.shape[1]):
        nxt = logits[:, -1:].argmax(-1)
        out.append(nxt)
        if i + 1 < length - prompts.shape[1]:
            logits, _, caches = model(nxt, past=caches, return_cache=True)
    return torch.cat(out, dim=1)


def _lr(step: int, total: int, peak: float) -> float:
    warm = max(1, total // 20)
    if step < warm:
        return peak * (step + 1) / warm
    return peak * 0.5 * (1 + math.cos(math.pi * (step - warm) / max(1, total - warm)))


def _optimizer_step(
    opt: torch.optim.Optimizer,
    model: torch.nn.Module,
    loss: Tensor,
    step: int,
    total: int,
    peak_lr: float,
    label: str,
    progress: Callable[[str], None],
) -> None:
    """One scheduled AdamW step with gradient clipping; a progress line every 50 steps."""
    for g in opt.param_groups:
        g["lr"] = _lr(step, total, peak_lr)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    if step % 50 == 0 or step == total - 1:
        progress(f"{label} step {step + 1}/{total} loss {loss.item():.3f}")


def train_target(r: Recipe, corpus: Tensor, progress: Callable[[str], None]) -> TargetModel:
    gen = torch.Generator().manual_seed(r.seed)
    torch.manual_seed(r.seed)
    model = TargetModel(target_config(r))
    for name, p in model.named_parameters():
        if name.endswith("norm.weight"):
            continue
        torch.nn.init.normal_(p, std=0.02)
        if name.endswith(("o_proj.weight", "down_proj.weight")):
            p.data /= math.sqrt(2 * r.num_layers)
    opt = torch.optim.AdamW(model.parameters(), lr=r.target_lr, betas=(0.9, 0.95), weight_decay=0.01)
    model.train()
    for step in range(r.target_steps):
        batch = sample_sequences(corpus, r.target_batch, r, gen)
        logits, _ = model(batch[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        _optimizer_step(opt, model, loss, step, r.target_steps, r.target_lr, "target", progress)
    model.eval()
    return model


@dataclass
class Captured:
    """Hidden states of the target on sequences: what the data files hold, plus targets for training."""

    input_ids: Tensor  # (S, T)
    slots: list[Tensor]  # per slot (S, T, H): the recipe's slot boundaries
    boundaries: Tensor  # (S, T, N+1, H) float32: all boundaries (for evaluating any wiring)
    target_next: Tensor  # (S, T): the target's greedy next token after position t
    final_normed: Tensor  # (S, T, H): norm(h_N), what SpecForge stores as hidden_state


@torch.no_grad()
def capture(model: TargetModel, ids: Tensor, r: Recipe, batch: int = 32) -> Captured:
    bounds, nexts, normed = [], [], []
    for i in range(0, ids.shape[0], batch):
        logits, hs = model(ids[i : i + batch])
        bounds.append(torch.stack(hs, dim=2))
        nexts.append(logits.argmax(-1))
        normed.append(model.model.norm(hs[-1]))
    all_b = torch.cat(bounds)
    return Captured(
        input_ids=ids,
        slots=[all_b[:, :, b] for b in r.slot_boundaries],
        boundaries=all_b,
        target_next=torch.cat(nexts),
        final_normed=torch.cat(normed),
    )


def draft_vocab(target_next: Tensor, size: int) -> tuple[Tensor, Tensor]:
    """Most frequent target outputs (ties by id), sorted ascending -> (d2t offsets, t2d mask)."""
    counts = torch.bincount(target_next.flatten(), minlength=VOCAB_SIZE).float()
    counts = counts - torch.arange(VOCAB_SIZE) * 1e-6  # deterministic tie-break
    chosen = torch.sort(torch.topk(counts, size).indices).values
    d2t = chosen - torch.arange(size)
    t2d = torch.zeros(VOCAB_SIZE, dtype=torch.bool)
    t2d[chosen] = True
    return d2t, t2d


def draft_config(r: Recipe, layer_ids: Sequence[int] | None = None) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "architectures": ["LlamaForCausalLMEagle3"],
        "model_type": "llama",
        "hidden_size": r.hidden_size,
        "intermediate_size": r.draft_intermediate_size,
        "num_hidden_layers": 1,
        "num_attention_heads": r.heads,
        "num_key_value_heads": r.heads,
        "head_dim": r.hidden_size // r.heads,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "max_position_embeddings": 4096,
        "vocab_size": VOCAB_SIZE,
        "draft_vocab_size": r.draft_vocab_size,
        "target_hidden_size": r.hidden_size,
        "tie_word_embeddings": False,
        "torch_dtype": "float32",
    }
    if layer_ids is not None:
        cfg["eagle_config"] = {
            "eagle_aux_hidden_state_layer_ids": list(layer_ids),
            "use_aux_hidden_state": True,
        }
    return cfg


def aligned(cap: Captured, wiring: Sequence[int]) -> tuple[Tensor, Tensor, Tensor]:
    """(ids, aux, targets) with the EAGLE alignment: aux g_t with token x_{t+1} -> target's token after x_{t+1}.

    `wiring` lists boundary indices (h) whose states are concatenated in ascending order.
    """
    aux = torch.cat([cap.boundaries[:, :, b] for b in sorted(wiring)], dim=-1)[:, :-1]
    ids = cap.input_ids[:, 1:]
    targets = cap.target_next[:, 1:]
    return ids, aux, targets


def _draft_targets(targets: Tensor, t2d: Tensor) -> tuple[Tensor, Tensor]:
    """Target ids -> draft ids (-100 where outside the draft vocab)."""
    index = torch.cumsum(t2d.long(), 0) - 1
    mapped = index[targets]
    return torch.where(t2d[targets], mapped, torch.full_like(mapped, -100)), t2d[targets]


def train_draft(
    r: Recipe,
    embed: Tensor,
    cap: Captured,
    d2t: Tensor,
    t2d: Tensor,
    progress: Callable[[str], None],
) -> Eagle3Drafter:
    """Train on cat(slots[:-1]) as speculators' standardize_data_v1 does, 3 chained TTT steps."""
    torch.manual_seed(r.seed + 1)
    gen = torch.Generator().manual_seed(r.seed + 2)
    model = Eagle3Drafter(draft_config(r), embed)
    model.d2t.copy_(d2t)
    model.t2d.copy_(t2d)
    for name, p in model.named_parameters():
        if not name.endswith("norm.weight"):
            torch.nn.init.normal_(p, std=0.02)
    ids, aux, targets = aligned(cap, r.slot_boundaries[:-1])
    dtargets, _ = _draft_targets(targets, t2d)
    opt = torch.optim.AdamW(model.parameters(), lr=r.draft_lr, betas=(0.9, 0.95), weight_decay=0.0)
    model.train()
    n = ids.shape[0]
    for step in range(r.draft_steps):
        pick = torch.randint(0, n, (r.draft_batch,), generator=gen)
        outs = model.chain_forward(ids[pick], aux[pick], r.ttt_steps)
        loss = torch.zeros(())
        for s, logits in enumerate(outs):
            tgt = dtargets[pick][:, s:]
            lg = logits[:, : logits.shape[1] - s]
            loss = loss + F.cross_entropy(
                lg.reshape(-1, lg.shape[-1]), tgt.reshape(-1), ignore_index=-100
            ) * (0.8**s)
        _optimizer_step(opt, model, loss, step, r.draft_steps, r.draft_lr, "draft", progress)
    model.eval()
    return model


@torch.no_grad()
def evaluate(model: Eagle3Drafter, cap: Captured, wiring: Sequence[int], steps: int,
             loss_mask: Tensor | None = None) -> dict[str, Any]:
    """Top-1 (step 0) and chain accept length under a wiring, against the target's greedy tokens.

    Positions count when the target token is known (all but the last `steps`) and, given the rows'
    `loss_mask` (B, T), where the token the position reads is in it (the check's positions); a draft
    token outside the draft vocab counts as wrong (SpecForge's definition).
    """
    ids, aux, targets = aligned(cap, wiring)
    outs = model.chain_forward(ids, aux, steps)
    t = ids.shape[1] - steps
    keep = torch.ones_like(ids[:, :t], dtype=torch.bool) if loss_mask is None else loss_mask[:, 1 : 1 + t].bool()
    n = max(1, int(keep.sum()))
    correct = []
    for s, logits in enumerate(outs):
        # step s at position i drafts the token after x_{i+1+s}: the target's choice targets[i + s]
        pred = model.to_target_ids(logits.argmax(-1))[:, :t]
        correct.append(pred == targets[:, s : s + t])
    top1 = int((correct[0] & keep).sum()) / n
    run = keep
    accept = 1.0
    step_accept = []
    prev = 1.0
    for c in correct:
        run = run & c
        rate = int(run.sum()) / n
        step_accept.append(rate / prev if prev > 0 else 0.0)
        prev = rate
        accept += rate
    return {
        "top1": round(top1, 4),
        "predicted_accept_len": round(accept, 4),
        "step_accept": [round(a, 4) for a in step_accept],
    }


def slot_norms(cap: Captured) -> list[float]:
    """Mean L2 norm per data slot (the embedding slot is small; the seeds' evidence)."""
    return [round(s.norm(dim=-1).mean().item(), 3) for s in cap.slots]
