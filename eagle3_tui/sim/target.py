"""The demo world's target: a small Llama-style decoder with HF/SGLang weight names.

It returns every residual boundary h_0..h_N (pre-final-norm; h_0 = embedding output, h_k = input
of layer k) so the world can capture any wiring and the sim server can capture what SGLang would.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

import torch
from torch import Tensor, nn

from eagle3_tui.eagle.drafter import MLP, Attention, KVCache, RMSNorm, rope_cos_sin


class _Layer(nn.Module):
    def __init__(self, hidden: int, inter: int, heads: int, kv_heads: int, head_dim: int, eps: float) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(hidden, eps)
        self.self_attn = Attention(hidden, hidden, heads, kv_heads, head_dim)
        self.post_attention_layernorm = RMSNorm(hidden, eps)
        self.mlp = MLP(hidden, inter)


class _Model(nn.Module):
    def __init__(self, cfg: Mapping[str, Any]) -> None:
        super().__init__()
        h = int(cfg["hidden_size"])
        heads = int(cfg["num_attention_heads"])
        kv = int(cfg.get("num_key_value_heads") or heads)
        hd = int(cfg.get("head_dim") or h // heads)
        eps = float(cfg.get("rms_norm_eps") or 1e-5)
        self.embed_tokens = nn.Embedding(int(cfg["vocab_size"]), h)
        self.layers = nn.ModuleList(
            [
                _Layer(h, int(cfg["intermediate_size"]), heads, kv, hd, eps)
                for _ in range(int(cfg["num_hidden_layers"]))
            ]
        )
        self.norm = RMSNorm(h, eps)


class TargetModel(nn.Module):
    """`LlamaForCausalLM`-shaped: `model.embed_tokens`, `model.layers.{i}.*`, `model.norm`, `lm_head`."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__()
        self.config = dict(config)
        self.model = _Model(config)
        self.lm_head = nn.Linear(int(config["hidden_size"]), int(config["vocab_size"]), bias=False)
        self.num_layers = int(config["num_hidden_layers"])
        heads = int(config["num_attention_heads"])
        self.head_dim = int(config.get("head_dim") or int(config["hidden_size"]) // heads)
        self.rope_theta = float(config.get("rope_theta") or 10000.0)

    @classmethod
    def from_tensors(cls, config: Mapping[str, Any], tensors: Mapping[str, Tensor]) -> TargetModel:
        model = cls(config)
        model.load_state_dict({k: v.float() for k, v in tensors.items()}, strict=True)
        model.eval()
        return model

    def forward(
        self,
        input_ids: Tensor,
        *,
        past: list[KVCache] | None = None,
        return_cache: bool = False,
    ) -> Any:
        """Causal pass over (B, T) after `past`. Returns (logits, boundaries[, caches]).

        `boundaries[k]` is h_k (B, T, H), k = 0..N, the pre-norm residual stream; logits come from
        `lm_head(norm(h_N))`.
        """
        b, t = input_ids.shape
        start = len(past[0]) if past else 0
        positions = torch.arange(start, start + t).expand(b, t)
        x = self.model.embed_tokens(input_ids)
        cos, sin = rope_cos_sin(positions, self.head_dim, self.rope_theta, x.dtype)
        mask = None
        if start:
            mask = torch.ones(t, start + t, dtype=torch.bool)
            mask[:, start:] = torch.tril(mask[:, start:])
        boundaries = [x]
        caches: list[KVCache] = []
        for i, layer in enumerate(cast("list[_Layer]", self.model.layers)):
            q, k, v = layer.self_attn.project(layer.input_layernorm(x), cos, sin)
            cache = past[i].extended(k, v) if past else KVCache(k, v)
            if return_cache:
                caches.append(cache)
            assert cache.k is not None and cache.v is not None
            x = x + layer.self_attn.attend(q, cache.k, cache.v, mask, causal=True)
            x = x + layer.mlp(layer.post_attention_layernorm(x))
            boundaries.append(x)
        logits = self.lm_head(self.model.norm(x))
        if return_cache:
            return logits, boundaries, caches
        return logits, boundaries


def truncate_caches(caches: list[KVCache], length: int) -> list[KVCache]:
    """Drop positions >= `length` from every layer's cache (rejected draft tokens)."""
    return [c.truncated(length) for c in caches]
