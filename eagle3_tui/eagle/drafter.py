"""The EAGLE-3 draft forward pass exactly as SGLang's `llama_eagle3` runs it.

This file imports only the standard library and torch: it is copied as a plain file to the GPU
host (beside the accuracy check) and run by that host's own Python. The module mirrors SGLang's
parameter names, so `state_dict()` keys are the checkpoint names (`fc.weight`,
`midlayer.self_attn.q_proj.weight`, `norm.weight`, `lm_head.weight`, ...) and the same class is used
to train the demo world's draft.

What SGLang does (research/sglang.md §4, eagle3_formats.md §8), in order:
1. `fc` maps the concatenated aux states (A*Ht wide) to H; chain steps feed back an H-wide state.
2. `e = E_target[ids]` (SGLang always shares the target's embedding when the widths match).
3. layer 0: `res = h`; `z = cat(rms(e, input_layernorm), rms(h, hidden_norm))` (2H); attention
   with RoPE (draft config's `rope_theta`, default 10000); `h = res + attn`;
   `h = h + mlp(rms(h, post_attention_layernorm))` (norm after residual, hard-coded).
4. logits = `lm_head(rms(h, norm))`; the pre-norm `h` is what the next chain step receives.
5. draft ids map to target ids with offsets: `target = draft + d2t[draft]`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "Eagle3Drafter",
    "KVCache",
    "RMSNorm",
    "apply_rope",
    "expected_accept_length",
    "rms_norm",
    "rope_cos_sin",
]


def rms_norm(x: Tensor, weight: Tensor, eps: float) -> Tensor:
    """RMSNorm as in SGLang/HF Llama: computed in float32, cast back, then scaled."""
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * xf.to(x.dtype)


class RMSNorm(nn.Module):
    """A weight-only RMSNorm whose parameter is named `weight` (the checkpoint name)."""

    def __init__(self, size: int, eps: float) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: Tensor) -> Tensor:
        return rms_norm(x, self.weight, self.eps)


def rope_cos_sin(positions: Tensor, head_dim: int, theta: float, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """Llama (rotate-half) RoPE tables for integer `positions` of any shape -> (..., head_dim)."""
    steps = torch.arange(0, head_dim, 2, dtype=torch.float32, device=positions.device)
    inv_freq = 1.0 / (theta ** (steps / head_dim))
    freqs = positions.to(torch.float32)[..., None] * inv_freq
    emb = torch.cat([freqs, freqs], dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate `x` (B, heads, T, hd) by tables (B, T, hd)."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos[:, None] + rotated * sin[:, None]


class KVCache:
    """Keys and values of earlier positions for incremental decoding: (B, kv_heads, T, hd) each."""

    __slots__ = ("k", "v")

    def __init__(self, k: Tensor | None = None, v: Tensor | None = None) -> None:
        self.k = k
        self.v = v

    def __len__(self) -> int:
        return 0 if self.k is None else int(self.k.shape[2])

    def extended(self, k: Tensor, v: Tensor) -> KVCache:
        """A new cache with `k`/`v` appended along time (this one is left as it was)."""
        if self.k is None or self.v is None:
            return KVCache(k, v)
        return KVCache(torch.cat([self.k, k], dim=2), torch.cat([self.v, v], dim=2))

    def truncated(self, length: int) -> KVCache:
        """A cache holding only the first `length` positions (used to drop rejected drafts)."""
        if self.k is None or self.v is None:
            return KVCache()
        return KVCache(self.k[:, :, :length], self.v[:, :, :length])


class Attention(nn.Module):
    """Llama attention with grouped KV heads; `in_size` is 2H in the EAGLE-3 mid layer, H in the target."""

    def __init__(self, in_size: int, hidden: int, heads: int, kv_heads: int, head_dim: int) -> None:
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.q_proj = nn.Linear(in_size, heads * head_dim, bias=False)
        self.k_proj = nn.Linear(in_size, kv_heads * head_dim, bias=False)
        self.v_proj = nn.Linear(in_size, kv_heads * head_dim, bias=False)
        self.o_proj = nn.Linear(heads * head_dim, hidden, bias=False)

    def project(self, x: Tensor, cos: Tensor, sin: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v

    def attend(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, causal: bool) -> Tensor:
        """Scaled dot-product attention with grouped KV heads; `mask` is boolean (True = may attend)."""
        if self.kv_heads != self.heads:
            rep = self.heads // self.kv_heads
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal and mask is None)
        b, _, t, _ = out.shape
        return self.o_proj(out.transpose(1, 2).reshape(b, t, self.heads * self.head_dim))


class MLP(nn.Module):
    def __init__(self, hidden: int, inter: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)

    def forward(self, x: Tensor) -> Tensor:
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class _MidLayer(nn.Module):
    """SGLang's EAGLE-3 decoder layer: q/k/v read cat(embeds, hidden), 2H wide."""

    def __init__(self, hidden: int, inter: int, heads: int, kv_heads: int, head_dim: int, eps: float) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(hidden, eps)
        self.hidden_norm = RMSNorm(hidden, eps)
        self.post_attention_layernorm = RMSNorm(hidden, eps)
        self.self_attn = Attention(2 * hidden, hidden, heads, kv_heads, head_dim)
        self.mlp = MLP(hidden, inter)


def _cfg(config: Mapping[str, Any], key: str, default: Any = None) -> Any:
    value = config.get(key, default)
    return default if value is None else value


class Eagle3Drafter(nn.Module):
    """A one-layer EAGLE-3 draft (SGLang `LlamaForCausalLMEagle3` semantics).

    Build it with `Eagle3Drafter(config, target_embed)` to train, or `from_tensors(...)` to load a
    checkpoint. `forward` is batched causal over (B, T); `forward(..., past=cache, return_cache=True)`
    decodes incrementally; `chain_forward` runs the teacher-forced multi-step chain (training-time test).
    """

    def __init__(self, config: Mapping[str, Any], target_embed: Tensor) -> None:
        super().__init__()
        self.config = dict(config)
        h = int(config["hidden_size"])
        heads = int(config["num_attention_heads"])
        kv_heads = int(_cfg(config, "num_key_value_heads", heads))
        head_dim = int(_cfg(config, "head_dim", h // heads))
        inter = int(config["intermediate_size"])
        eps = float(_cfg(config, "rms_norm_eps", 1e-6))
        vocab = int(config["vocab_size"])
        draft_vocab = int(_cfg(config, "draft_vocab_size", vocab))
        target_h = int(_cfg(config, "target_hidden_size", h))
        eagle_cfg = config.get("eagle_config") or {}
        ids = eagle_cfg.get("eagle_aux_hidden_state_layer_ids") if isinstance(eagle_cfg, Mapping) else None
        self.num_aux = len(ids) if isinstance(ids, Sequence) and ids else 3
        self.hidden_size, self.head_dim, self.eps = h, head_dim, eps
        self.rope_theta = float(_cfg(config, "rope_theta", 10000.0))
        self.vocab_size, self.draft_vocab_size = vocab, draft_vocab
        self.fc = nn.Linear(self.num_aux * target_h, h, bias=bool(config.get("bias", False)))
        self.midlayer = _MidLayer(h, inter, heads, kv_heads, head_dim, eps)
        self.norm = RMSNorm(h, eps)
        self.lm_head = nn.Linear(h, draft_vocab, bias=False)
        self.register_buffer("d2t", torch.zeros(draft_vocab, dtype=torch.long))
        self.register_buffer("t2d", torch.ones(vocab, dtype=torch.bool))
        # The target's embedding: shared, frozen, never part of the draft checkpoint.
        self.embed_weight = target_embed.detach()

    # -- loading ---------------------------------------------------------------------------------
    @classmethod
    def from_tensors(
        cls,
        config: Mapping[str, Any],
        tensors: Mapping[str, Tensor],
        target_embed: Tensor | None,
        *,
        target_lm_head: Tensor | None = None,
    ) -> Eagle3Drafter:
        """Load like SGLang: known names only (others are skipped), the target's embedding when widths match.

        Raises ValueError (one sentence) for a missing required tensor or a wrong shape.
        """
        config = dict(config)
        h = int(config["hidden_size"])
        embed = target_embed
        if embed is None or embed.shape[-1] != h:
            embed = tensors.get("embed_tokens.weight")
        if embed is None:
            raise ValueError("no usable embedding: the target's has a different width and the draft has none")
        if config.get("draft_vocab_size") is None:
            if target_lm_head is None:
                raise ValueError(
                    "draft_vocab_size is null, so the target lm_head is needed and was not given"
                )
            config["draft_vocab_size"] = int(target_lm_head.shape[0])
        model = cls(config, embed.float())
        fc = tensors.get("fc.weight")
        target_h = int(_cfg(config, "target_hidden_size", h))
        if (
            fc is not None
            and fc.ndim == 2
            and fc.shape[1] != model.fc.in_features
            and fc.shape[1] % target_h == 0
        ):
            # Size fc to the checkpoint (A = width / Ht) so a wiring with that many aux states can run;
            # `project_aux` then says clearly when the served aux width does not match.
            model.num_aux = fc.shape[1] // target_h
            model.fc = nn.Linear(fc.shape[1], h, bias="fc.bias" in tensors)
        own = model.state_dict()
        loaded: dict[str, Tensor] = {}
        for name, tensor in tensors.items():
            if name in ("d2t", "t2d"):
                continue
            if name in own and name != "embed_weight":
                if tuple(own[name].shape) != tuple(tensor.shape):
                    raise ValueError(
                        f"tensor {name} has shape {tuple(tensor.shape)}, expected {tuple(own[name].shape)}"
                    )
                loaded[name] = tensor.float()
        required = [n for n in own if n not in ("d2t", "t2d")]
        if target_lm_head is not None and "lm_head.weight" not in tensors:
            loaded["lm_head.weight"] = target_lm_head.float()
        missing = [n for n in required if n not in loaded]
        if missing:
            raise ValueError(f"draft checkpoint lacks {', '.join(missing)}")
        model.load_state_dict(loaded, strict=False)
        if "d2t" in tensors:
            d2t = tensors["d2t"].long()
            if d2t.shape[0] != model.draft_vocab_size:
                raise ValueError(
                    f"d2t has {d2t.shape[0]} entries, expected draft_vocab_size {model.draft_vocab_size}"
                )
            model.d2t.copy_(d2t)
        if "t2d" in tensors and tensors["t2d"].shape[0] == model.t2d.shape[0]:
            model.t2d.copy_(tensors["t2d"].bool())
        model.eval()
        return model

    # -- mapping ---------------------------------------------------------------------------------
    def to_target_ids(self, draft_ids: Tensor) -> Tensor:
        """Draft vocabulary ids -> target ids (`d2t` holds offsets, as in SGLang's `hot_token_id`)."""
        return draft_ids + self.d2t[draft_ids]

    def embed(self, input_ids: Tensor) -> Tensor:
        return F.embedding(input_ids, self.embed_weight)

    def project_aux(self, aux_hidden: Tensor) -> Tensor:
        """fc over the concatenated aux states (B, T, A*Ht) -> (B, T, H)."""
        if aux_hidden.shape[-1] != self.fc.in_features:
            raise ValueError(
                f"aux hidden states are {aux_hidden.shape[-1]} wide but fc expects {self.fc.in_features}"
            )
        return self.fc(aux_hidden.to(self.fc.weight.dtype))

    # -- forward ---------------------------------------------------------------------------------
    def _layer(
        self,
        input_ids: Tensor,
        hidden: Tensor,
        positions: Tensor,
        keys: tuple[Tensor, Tensor] | None,
        mask: Tensor | None,
    ) -> tuple[Tensor, Tensor, Tensor, Tensor]:
        """One midlayer pass; returns (logits, prenorm, k_new, v_new). `keys` are extra (k, v) in front."""
        layer = self.midlayer
        residual = hidden
        z = torch.cat(
            [layer.input_layernorm(self.embed(input_ids).to(hidden.dtype)), layer.hidden_norm(hidden)], -1
        )
        cos, sin = rope_cos_sin(positions, self.head_dim, self.rope_theta, hidden.dtype)
        q, k, v = layer.self_attn.project(z, cos, sin)
        if keys is not None:
            k_all = torch.cat([keys[0], k], dim=2)
            v_all = torch.cat([keys[1], v], dim=2)
        else:
            k_all, v_all = k, v
        causal = keys is None
        attn = layer.self_attn.attend(q, k_all, v_all, mask, causal)
        h = residual + attn
        h = h + layer.mlp(layer.post_attention_layernorm(h))
        logits = self.lm_head(self.norm(h))
        return logits, h, k, v

    def forward(
        self,
        input_ids: Tensor,
        hidden: Tensor,
        *,
        aux: bool = True,
        positions: Tensor | None = None,
        past: KVCache | None = None,
        return_cache: bool = False,
    ) -> Any:
        """Batched causal draft pass over (B, T).

        `aux=True`: `hidden` is the concatenated aux states (B, T, A*Ht) and goes through fc;
        `aux=False`: `hidden` is already H wide (a chain step feeding back the pre-norm output).
        `past` holds earlier positions' keys; new positions attend to all of them and causally
        among themselves. Returns `(draft_logits (B, T, Vd), prenorm_hidden (B, T, H))`, plus the
        extended cache when `return_cache`.
        """
        h = self.project_aux(hidden) if aux else hidden.to(self.fc.weight.dtype)
        b, t = input_ids.shape
        start = 0 if past is None else len(past)
        if positions is None:
            positions = torch.arange(start, start + t, device=input_ids.device).expand(b, t)
        mask = None
        keys = None
        if past is not None and past.k is not None and past.v is not None:
            keys = (past.k, past.v)
            mask = torch.ones(t, start + t, dtype=torch.bool, device=input_ids.device)
            mask[:, start:] = torch.tril(mask[:, start:])
        logits, pre, k, v = self._layer(input_ids, h, positions, keys, mask)
        if return_cache:
            cache = (past or KVCache()).extended(k, v)
            return logits, pre, cache
        return logits, pre

    def chain_forward(self, input_ids: Tensor, aux_hidden: Tensor, steps: int) -> list[Tensor]:
        """Teacher-forced chain of `steps` draft steps over whole sequences (the TTT scheme).

        `input_ids` (B, T) are aligned with `aux_hidden` (B, T, A*Ht): position t holds aux g_t and
        token x_{t+1}. Step s feeds step s-1's pre-norm output with token x_{t+1+s} (ids shifted
        left by s, zero-padded); its query at t attends to step-0 keys <= t plus its own position's
        keys from steps 1..s (what a live chain sees). Returns logits per step, each (B, T, Vd);
        step s at t predicts the target's token after x_{t+1+s}; the last s positions are padding.
        """
        b, t = input_ids.shape
        pos0 = torch.arange(t, device=input_ids.device).expand(b, t)
        logits0, pre, k0, v0 = self._layer(input_ids, self.project_aux(aux_hidden), pos0, None, None)
        outs = [logits0]
        ks, vs = [k0], [v0]
        causal = torch.tril(torch.ones(t, t, dtype=torch.bool, device=input_ids.device))
        diag = torch.eye(t, dtype=torch.bool, device=input_ids.device)
        ids = input_ids
        for s in range(1, steps):
            ids = torch.cat([ids[:, 1:], ids.new_zeros(b, 1)], dim=1)
            # Earlier steps' keys: step 0 causal, steps 1..s-1 only the same position (+ own, below).
            mask = torch.cat([causal] + [diag] * len(ks[1:]) + [diag], dim=1)
            keys = (torch.cat(ks, dim=2), torch.cat(vs, dim=2))
            logits, pre, k, v = self._layer(ids, pre, pos0 + s, keys, mask)
            ks.append(k)
            vs.append(v)
            outs.append(logits)
        return outs


def expected_accept_length(step_accept: Sequence[float]) -> float:
    """Chain accept length tau = 1 + sum_i prod_{j<=i} a_j from conditional per-step rates a_j."""
    total, prod = 1.0, 1.0
    for a in step_accept:
        prod *= a
        total += prod
    return total
