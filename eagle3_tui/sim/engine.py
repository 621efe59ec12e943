"""The sim server's model runner: plain decoding and EAGLE-3 speculation with greedy verify, as a
chain for topk 1 and as SGLang's tree for topk > 1 (eagle/tree.py: expansion, selection, verify).

What it captures follows SGLang (research/sglang.md §3): the draft config's nested
`eagle_config.eagle_aux_hidden_state_layer_ids` only, explicit ids shifted +1, default boundaries
[2, N//2, N-3], ascending order, duplicates collapsed, boundaries >= N never captured; id -1
(boundary 0, the embedding output) works only with the seeds' source patch
(`capture_embedding_for_eagle3`), and crashes the first forward without it, as SGLang does.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import torch
import torch.nn.functional as F
from torch import Tensor

from eagle3_tui.eagle.drafter import Eagle3Drafter, KVCache, rope_cos_sin
from eagle3_tui.eagle.tree import DraftTree, TreeBuilder, tree_mask, verify_greedy
from eagle3_tui.sim.draft_class import check_draft_class
from eagle3_tui.sim.target import TargetModel, truncate_caches
from eagle3_tui.sim.tokenizer import ByteTokenizer

DTYPES = {"float32": "float32", "float": "float32", "float16": "float16", "half": "float16",
          "bfloat16": "bfloat16"}


def served_dtype(dtype: str, config: dict[str, Any]) -> str:
    """The dtype SGLang runs a model in for `--dtype` (SGLang 0.5.23 `srt/configs/model_config.py`
    `_get_and_verify_dtype`): `auto` keeps the config's `torch_dtype`, except that a float32 model runs in
    float16 ("the common practice"; bfloat16 for Gemma). The demo world's configs say float32, so a real
    server runs it in float16: greedy text, and so accept length, differ from a float32 run by a few %."""
    want = (dtype or "auto").lower()
    if want != "auto":
        if want not in DTYPES:
            raise ValueError(f"Unknown dtype: {dtype}")
        return DTYPES[want]
    conf = str(config.get("dtype") or config.get("torch_dtype") or "float32")
    conf = DTYPES.get(conf, conf)
    if conf == "float32":
        return "bfloat16" if str(config.get("model_type", "")).startswith("gemma") else "float16"
    return conf


@dataclass(frozen=True)
class CapturePlan:
    """What the target hands the draft: SGLang's `layers_to_capture` and the embed-capture flag."""

    layer_ids: tuple[int, ...] | None  # as read from the draft config (None = absent)
    layers_to_capture: tuple[int, ...]  # loop indices whose input is captured
    capture_embedding: bool  # the seeds' patch: boundary 0 captured before the loop
    num_layers: int

    @property
    def boundaries(self) -> tuple[int, ...]:
        """The boundaries h really captured, in the order they are concatenated."""
        got = {i for i in self.layers_to_capture if 0 <= i < self.num_layers}
        if self.capture_embedding:
            got.add(0)
        return tuple(sorted(got))


def read_layer_ids(draft_config: dict[str, Any]) -> list[int] | None:
    """Exactly SGLang's read: the nested key or nothing (any failure falls back silently)."""
    try:
        ids = draft_config["eagle_config"]["eagle_aux_hidden_state_layer_ids"]
        return [int(v) for v in ids]
    except Exception:
        return None


def plan_capture(draft_config: dict[str, Any], num_layers: int, *, embed_patch: bool) -> CapturePlan:
    ids = read_layer_ids(draft_config)
    if ids is None:
        return CapturePlan(None, (2, num_layers // 2, num_layers - 3), False, num_layers)
    if embed_patch:
        return CapturePlan(tuple(ids), tuple(v + 1 for v in ids if v >= 0), -1 in ids, num_layers)
    return CapturePlan(tuple(ids), tuple(v + 1 for v in ids), False, num_layers)


def capture_like_sglang(plan: CapturePlan, boundaries: list[Tensor]) -> Tensor:
    """SGLang's capture loop over (hidden_states, residual) pairs; runs once at warm-up.

    Layer 0's residual is None in SGLang's LlamaModel, so capturing its input without the patch
    raises the same TypeError the real server hits.
    """
    aux_hidden_states = []
    if plan.capture_embedding:
        aux_hidden_states.append(boundaries[0])
    hidden_states, residual = boundaries[0], None
    for i in range(plan.num_layers):
        if i in plan.layers_to_capture:
            aux_hidden_states.append(hidden_states + residual)  # type: ignore[operator]
        hidden_states, residual = boundaries[i + 1], torch.zeros_like(boundaries[i + 1])
    return torch.cat(aux_hidden_states, dim=-1)


@dataclass
class Sequence:
    """One request's decoding state."""

    prompt: list[int]
    max_new_tokens: int
    stop_ids: frozenset[int]
    output: list[int] = field(default_factory=list)
    target_cache: list[KVCache] | None = None
    draft_cache: KVCache | None = None
    draft_len: int = 0  # step-0 positions in the draft cache
    next_draft_logits: Tensor | None = None
    next_draft_hidden: Tensor | None = None
    verify_ct: int = 0
    accepted_drafts: int = 0
    finished: str | None = None  # "length" | "stop"

    @property
    def tokens(self) -> list[int]:
        return self.prompt + self.output

    @property
    def kv_tokens(self) -> int:
        return len(self.prompt) + len(self.output)


@dataclass(frozen=True)
class StepResult:
    new_tokens: int  # committed this step
    accepted_drafts: int  # draft tokens accepted (excludes the bonus token)
    verified: bool  # a verify step happened (speculation)


class Engine:
    """Target (+ draft) on CPU, one thread, no autograd (each entry point runs under `no_grad`, so an
    engine in the same process as a training loop leaves autograd alone)."""

    def __init__(
        self,
        model_path: Path,
        draft_path: Path | None,
        *,
        num_steps: int = 0,
        embed_patch: bool = False,
        topk: int = 1,
        num_draft_tokens: int | None = None,
        dtype: str = "auto",
    ) -> None:
        from safetensors.torch import load_file

        torch.set_num_threads(1)
        self.model_path = Path(model_path)
        self.target_config = json.loads((self.model_path / "config.json").read_text())
        self.target = TargetModel.from_tensors(
            self.target_config, load_file(str(self.model_path / "model.safetensors"))
        )
        self.tokenizer = ByteTokenizer.load(self.model_path)
        self.num_layers = int(self.target_config["num_hidden_layers"])
        # the target's and the draft's weights and activations, as SGLang resolves --dtype
        self.dtype = served_dtype(dtype, self.target_config)
        self.target.to(getattr(torch, self.dtype))
        self.num_steps = num_steps
        self.topk = max(1, topk)
        self.num_draft_tokens = num_draft_tokens if num_draft_tokens is not None else num_steps + 1
        self.draft: Eagle3Drafter | None = None
        self.plan: CapturePlan | None = None
        self.decode_boundaries: tuple[int, ...] | None = None  # decode's, when they differ (sim/release.py)
        self.draft_config: dict[str, Any] = {}
        if draft_path is not None:
            draft_path = Path(draft_path)
            self.draft_config = json.loads((draft_path / "config.json").read_text())
            tensors = load_file(str(draft_path / "model.safetensors"))
            head = tensors.get("lm_head.weight")
            check_draft_class(self.draft_config, int(head.shape[0]) if head is not None else None)
            self.draft = Eagle3Drafter.from_tensors(
                self.draft_config, tensors, self.target.model.embed_tokens.weight.detach()
            ).to(getattr(torch, self.dtype))
            self.plan = plan_capture(self.draft_config, self.num_layers, embed_patch=embed_patch)

    @property
    def speculative(self) -> bool:
        return self.draft is not None and self.num_steps > 0

    @torch.no_grad()
    def warmup(self, ids: list[int]) -> None:
        """One forward through capture and fc, as SGLang's start-up does: errors surface here."""
        _, hs = self.target(torch.tensor([ids]))
        if self.draft is not None and self.plan is not None:
            aux = capture_like_sglang(self.plan, hs)
            # SGLang's fc is a plain linear layer: a wrong width fails with torch's own message.
            F.linear(aux, self.draft.fc.weight)

    def _aux(self, hs: list[Tensor], *, decode: bool = False) -> Tensor:
        """The captured states fed to fc; `decode`: a decode step's (a release's graphs may replay others)."""
        assert self.plan is not None
        bounds = self.decode_boundaries if decode and self.decode_boundaries is not None else self.plan.boundaries
        return torch.cat([hs[b] for b in bounds], dim=-1)

    def new_sequence(self, prompt: list[int], max_new_tokens: int, stop_ids: frozenset[int]) -> Sequence:
        return Sequence(prompt=list(prompt), max_new_tokens=max_new_tokens, stop_ids=stop_ids)

    @torch.no_grad()
    def prefill(self, seq: Sequence) -> int:
        """Run the prompt; commits the first token. Returns tokens committed (1, or 0 when none are asked)."""
        if seq.max_new_tokens <= 0:
            seq.finished = "length"
            return 0
        ids = torch.tensor([seq.prompt])
        logits, hs, caches = self.target(ids, return_cache=True)
        seq.target_cache = caches
        first = int(logits[0, -1].argmax())
        if self.speculative:
            assert self.draft is not None
            draft_ids = torch.tensor([[*seq.prompt[1:], first]])
            dl, dh, cache = self.draft(draft_ids, self._aux(hs), return_cache=True)
            seq.draft_cache, seq.draft_len = cache, len(seq.prompt)
            seq.next_draft_logits, seq.next_draft_hidden = dl[:, -1:], dh[:, -1:]
        self._commit(seq, [first])
        return 1

    def _commit(self, seq: Sequence, tokens: list[int]) -> int:
        n = 0
        for tok in tokens:
            if seq.finished:
                break
            seq.output.append(tok)
            n += 1
            if tok in seq.stop_ids:
                seq.finished = "stop"
            elif len(seq.output) >= seq.max_new_tokens:
                seq.finished = "length"
        return n

    @torch.no_grad()
    def step(self, seq: Sequence) -> StepResult:
        """One decode iteration for `seq`: a plain token, or draft k tokens + one verify."""
        if not self.speculative:
            logits, _, caches = self.target(
                torch.tensor([[seq.output[-1]]]), past=seq.target_cache, return_cache=True
            )
            seq.target_cache = caches
            return StepResult(self._commit(seq, [int(logits[0, -1].argmax())]), 0, False)
        if self.topk > 1:
            return self._tree_step(seq)
        assert self.draft is not None and seq.draft_cache is not None
        draft = self.draft
        # 1. draft a chain of num_steps tokens, feeding the pre-norm output forward
        drafts: list[int] = []
        logits, hidden, cache = seq.next_draft_logits, seq.next_draft_hidden, seq.draft_cache
        assert logits is not None and hidden is not None
        for s in range(self.num_steps):
            tok = int(draft.to_target_ids(logits[0, -1].argmax()))
            drafts.append(tok)
            if s + 1 < self.num_steps:
                logits, hidden, cache = draft(
                    torch.tensor([[tok]]), hidden, aux=False, past=cache, return_cache=True
                )
        # 2. verify [last committed, d1..dk] with the target in one forward
        last = seq.output[-1]
        base = seq.kv_tokens - 1  # positions already in the target cache
        verify_ids = torch.tensor([[last, *drafts]])
        vlogits, hs, caches = self.target(verify_ids, past=seq.target_cache, return_cache=True)
        greedy = vlogits[0].argmax(-1).tolist()
        accepted = 0
        while accepted < len(drafts) and drafts[accepted] == greedy[accepted]:
            accepted += 1
        new = [*drafts[:accepted], greedy[accepted]]
        seq.target_cache = truncate_caches(caches, base + accepted + 1)
        seq.verify_ct += 1
        seq.accepted_drafts += accepted
        committed = self._commit(seq, new)
        # 3. draft extend over the accepted positions with the target's real hidden states
        if not seq.finished:
            self._extend(seq, [h[:, : accepted + 1] for h in hs], new)
        return StepResult(committed, accepted, True)

    def _extend(self, seq: Sequence, hs: list[Tensor], new: list[int]) -> None:
        """Draft extend over the accepted positions (root + accepted nodes) with the target's states."""
        assert self.draft is not None and seq.draft_cache is not None
        step0 = seq.draft_cache.truncated(seq.draft_len)
        dl, dh, cache = self.draft(torch.tensor([new]), self._aux(hs, decode=True), past=step0, return_cache=True)
        seq.draft_cache, seq.draft_len = cache, seq.draft_len + len(new)
        seq.next_draft_logits, seq.next_draft_hidden = dl[:, -1:], dh[:, -1:]

    @torch.no_grad()
    def draft_tree(self, seq: Sequence) -> DraftTree:
        """SGLang's draft_forward for one request: topk slots, steps - 1 batched draft forwards.

        As in SGLang, slot m's draft keys are the prefix plus slot m's own earlier inputs (the KV
        slots are not re-gathered when a kept node's parent sat in another slot); its hidden state
        is its parent slot's output state.
        """
        assert self.draft is not None and seq.draft_cache is not None
        assert seq.next_draft_logits is not None and seq.next_draft_hidden is not None
        draft, k = self.draft, self.topk
        builder = TreeBuilder(k)
        p, idx = torch.softmax(seq.next_draft_logits[0, -1], dim=-1).topk(k)
        toks = builder.first(p.tolist(), draft.to_target_ids(idx).tolist())
        hidden = seq.next_draft_hidden.expand(k, -1, -1)
        prefix = seq.draft_cache.truncated(seq.draft_len)
        cache = KVCache(
            None if prefix.k is None else prefix.k.expand(k, -1, -1, -1),
            None if prefix.v is None else prefix.v.expand(k, -1, -1, -1),
        )
        for _ in range(1, self.num_steps):
            logits, out, cache = draft(torch.tensor(toks).view(k, 1), hidden, aux=False, past=cache, return_cache=True)
            p, idx = torch.softmax(logits[:, -1], dim=-1).topk(k, dim=-1)
            toks, src = builder.expand(p.tolist(), draft.to_target_ids(idx).tolist())
            hidden = out[torch.tensor(src)]
        return builder.tree(seq.output[-1], self.num_draft_tokens)

    def _verify_tree(self, tree: DraftTree, past: list[KVCache]) -> tuple[Tensor, list[Tensor], list[KVCache]]:
        """The target over the verify sequence with the tree mask (each node sees the prefix, its
        ancestors and itself) at position prefix + depth; the target's own layers, one forward."""
        target = self.target
        base = len(past[0])
        n = len(tree.tokens)
        positions = (torch.tensor(tree.depths) + base).view(1, n)
        mask = torch.ones(n, base + n, dtype=torch.bool)
        mask[:, base:] = torch.tensor(tree_mask(tree))
        x = target.model.embed_tokens(torch.tensor([tree.tokens]))
        cos, sin = rope_cos_sin(positions, target.head_dim, target.rope_theta, x.dtype)
        boundaries, new = [x], []
        for i, layer in enumerate(cast("list[Any]", target.model.layers)):
            q, k, v = layer.self_attn.project(layer.input_layernorm(x), cos, sin)
            full = past[i].extended(k, v)
            assert full.k is not None and full.v is not None
            x = x + layer.self_attn.attend(q, full.k, full.v, mask, causal=False)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
            boundaries.append(x)
            new.append(KVCache(k, v))
        return target.lm_head(target.model.norm(x)), boundaries, new

    def _tree_step(self, seq: Sequence) -> StepResult:
        """Draft a tree, verify it in one target forward, keep the accepted path's keys and states."""
        assert seq.target_cache is not None
        tree = self.draft_tree(seq)
        logits, hs, new = self._verify_tree(tree, seq.target_cache)
        greedy = logits[0].argmax(-1).tolist()
        path = verify_greedy(tree, greedy)
        accepted = len(path) - 1
        tokens = [tree.tokens[i] for i in path[1:]] + [greedy[path[-1]]]
        keep = torch.tensor(path)
        seq.target_cache = [
            c.extended(n.k[:, :, keep], n.v[:, :, keep])  # type: ignore[index]
            for c, n in zip(seq.target_cache, new, strict=True)
        ]
        seq.verify_ct += 1
        seq.accepted_drafts += accepted
        committed = self._commit(seq, tokens)
        if not seq.finished:
            self._extend(seq, [h[:, keep] for h in hs], tokens)
        return StepResult(committed, accepted, True)
