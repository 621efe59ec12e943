"""The EAGLE-3 draft forward pass exactly as SGLang's `llama_eagle3` runs it.

This file imports only the standard library and torch: it ships in the check's zip to the GPU host
and runs on that host's own Python. The module mirrors SGLang's
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

What a trainer may have added on top (`DraftForward`, read from the draft config by `forward_as_trained`,
switched off by the check for what the installed SGLang does not apply): `input_norm` over the whole aux
width (speculators `norm_before_fc`), per-chunk `fc_norm`, `norm_before_residual`, Qwen3 `q_norm`/`k_norm`,
RoPE scaling (linear, dynamic, llama3, YaRN; `rope_scaling` or transformers-5 `rope_parameters`), more
decoder layers (speculators `layers.k`), and `norm_output` in each trainer's meaning: speculators feed
the normed state to the next step, SpecForge's `norm_output: false` drops the norm before `lm_head`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "DraftForward",
    "Eagle3Drafter",
    "KVCache",
    "RMSNorm",
    "Rotary",
    "apply_rope",
    "expected_accept_length",
    "forward_as_trained",
    "rms_norm",
    "rope_cos_sin",
    "rope_inv_freq",
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


def _yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def _yarn(inv: Tensor, head_dim: int, theta: float, sc: Mapping[str, Any], max_pos: int) -> tuple[Tensor, float]:
    """YaRN: interpolate the low frequencies by `factor`, keep the high ones, ramp between the
    dimensions whose wavelength fits beta_fast / beta_slow rotations of the original context."""
    factor = float(sc["factor"])
    orig = int(sc.get("original_max_position_embeddings") or max_pos)
    fast, slow = float(sc.get("beta_fast") or 32), float(sc.get("beta_slow") or 1)

    def dim_of(rotations: float) -> float:
        return head_dim * math.log(orig / (rotations * 2 * math.pi)) / (2 * math.log(theta))

    lo, hi = dim_of(fast), dim_of(slow)
    if sc.get("truncate", True):
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, head_dim - 1)
    if lo == hi:
        hi += 0.001
    ramp = ((torch.arange(head_dim // 2, dtype=torch.float32) - lo) / (hi - lo)).clamp(0, 1)
    keep = 1 - ramp  # 1: extrapolate (original frequency), 0: interpolate (divided by factor)
    out = inv / factor * (1 - keep) + inv * keep
    att = sc.get("attention_factor")
    if att is None:
        m, m_all = sc.get("mscale"), sc.get("mscale_all_dim")
        att = _yarn_mscale(factor, float(m)) / _yarn_mscale(factor, float(m_all)) if m and m_all else _yarn_mscale(factor)
    return out, float(att)


def _llama3(inv: Tensor, sc: Mapping[str, Any]) -> Tensor:
    factor, low, high = float(sc["factor"]), float(sc["low_freq_factor"]), float(sc["high_freq_factor"])
    orig = float(sc["original_max_position_embeddings"])
    wavelen = 2 * math.pi / inv
    smooth = (orig / wavelen - low) / (high - low) if high != low else torch.zeros_like(inv)
    mid = (1 - smooth) * inv / factor + smooth * inv
    return torch.where(wavelen < orig / high, inv, torch.where(wavelen > orig / low, inv / factor, mid))


def rope_inv_freq(head_dim: int, theta: float, scaling: Mapping[str, Any] | None, *, max_pos: int = 2048,
                  seq_len: int = 0) -> tuple[Tensor, float]:
    """(inverse frequencies, attention factor) for a config's RoPE (HF's definitions; `seq_len` only
    matters for `dynamic`, which changes the base once a sequence outgrows `max_pos`)."""
    kind = str((scaling or {}).get("rope_type") or (scaling or {}).get("type") or "default")
    base = theta
    if kind == "dynamic" and scaling and seq_len > max_pos:
        f = float(scaling["factor"])
        base = theta * ((f * seq_len / max_pos) - (f - 1)) ** (head_dim / (head_dim - 2))
    inv = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
    if scaling is None or kind in ("default", "dynamic"):
        return inv, 1.0
    if kind == "linear":
        return inv / float(scaling["factor"]), 1.0
    if kind == "llama3":
        return _llama3(inv, scaling), 1.0
    if kind == "yarn":
        return _yarn(inv, head_dim, theta, scaling, max_pos)
    raise ValueError(f"rope_scaling type {kind!r} is not modelled (known: linear, dynamic, llama3, yarn)")


def rope_config(config: Mapping[str, Any]) -> tuple[float, dict[str, Any] | None]:
    """(theta, scaling) from `rope_parameters` (transformers 5) or `rope_theta` + `rope_scaling`."""
    rp = config.get("rope_parameters")
    if isinstance(rp, Mapping) and rp.get("rope_theta") is not None:
        kind = rp.get("rope_type") or rp.get("type")
        return float(rp["rope_theta"]), (dict(rp) if kind not in (None, "default") else None)
    sc = config.get("rope_scaling")
    theta = config.get("rope_theta")
    return float(theta) if theta is not None else 10000.0, (dict(sc) if isinstance(sc, Mapping) else None)


class Rotary:
    """cos/sin tables for one RoPE configuration; the YaRN attention factor scales both."""

    def __init__(self, head_dim: int, theta: float, scaling: Mapping[str, Any] | None, max_pos: int) -> None:
        self.head_dim, self.theta, self.scaling, self.max_pos = head_dim, theta, scaling, max_pos

    def __call__(self, positions: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        if self.scaling is None:
            return rope_cos_sin(positions, self.head_dim, self.theta, dtype)
        seq = int(positions.max()) + 1 if positions.numel() else 0
        inv, att = rope_inv_freq(self.head_dim, self.theta, self.scaling, max_pos=self.max_pos, seq_len=seq)
        freqs = positions.to(torch.float32)[..., None] * inv.to(positions.device)
        emb = torch.cat([freqs, freqs], dim=-1)
        return (emb.cos() * att).to(dtype), (emb.sin() * att).to(dtype)


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
        self.q_norm: RMSNorm | None = None  # Qwen3: per-head RMSNorm of q and k before RoPE
        self.k_norm: RMSNorm | None = None

    def add_qk_norm(self, eps: float) -> None:
        self.q_norm, self.k_norm = RMSNorm(self.head_dim, eps), RMSNorm(self.head_dim, eps)

    def project(self, x: Tensor, cos: Tensor, sin: Tensor, *, qk_norm: bool = True) -> tuple[Tensor, Tensor, Tensor]:
        b, t, _ = x.shape
        q = self.q_proj(x).view(b, t, self.heads, self.head_dim)
        k = self.k_proj(x).view(b, t, self.kv_heads, self.head_dim)
        if qk_norm and self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = q.transpose(1, 2), k.transpose(1, 2)
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


class _DecoderLayer(nn.Module):
    """A plain Llama decoder layer (speculators' draft layers after the first): H-wide q/k/v."""

    def __init__(self, hidden: int, inter: int, heads: int, kv_heads: int, head_dim: int, eps: float) -> None:
        super().__init__()
        self.input_layernorm = RMSNorm(hidden, eps)
        self.post_attention_layernorm = RMSNorm(hidden, eps)
        self.self_attn = Attention(hidden, hidden, heads, kv_heads, head_dim)
        self.mlp = MLP(hidden, inter)


@dataclass(frozen=True)
class DraftForward:
    """Which of the trainers' optional operations a forward pass applies (all off: SGLang 0.5.6)."""

    input_norm: bool = False  # rms(aux, input_norm) over the whole A*Ht width before fc
    fc_norm: bool = False  # rms per aux chunk before fc
    norm_before_residual: bool = False  # layer 0's residual is the normed hidden
    feed_normed: bool = False  # the next chain step receives norm(h), not h (speculators norm_output)
    head_norm: bool = True  # logits = lm_head(norm(h)); False: lm_head(h) (SpecForge norm_output false)
    qk_norm: bool = False  # Qwen3 q_norm/k_norm
    rope_scaling: bool = True  # apply the config's rope scaling (theta always applies)
    extra_layers: bool = True  # run draft layers after the first
    rope_theta: float | None = None  # None: the config's

    def differences(self, other: DraftForward) -> list[str]:
        """Names of the operations on which two forwards differ."""
        names = ("input_norm", "fc_norm", "norm_before_residual", "feed_normed", "head_norm", "qk_norm",
                 "rope_scaling", "extra_layers", "rope_theta")
        return [n for n in names if getattr(self, n) != getattr(other, n)]


def forward_as_trained(config: Mapping[str, Any], tensor_names: Sequence[str] = (), *,
                       speculators: bool | None = None) -> DraftForward:
    """The forward the draft was trained with, read from its (flattened) config and tensor names.

    `speculators` says whose meaning `norm_output` has (None: a speculators-format config, detected
    from its keys); SpecForge's `norm_output` defaults to true and means "norm before lm_head".
    """
    names = set(tensor_names)
    spec = bool(config.get("speculators_model_type")) if speculators is None else speculators
    norm_output = config.get("norm_output")
    if names:  # the weights decide which norms exist; the config flags are checked by the lint
        input_norm = "input_norm.weight" in names
        fc_norm = any(n.startswith("fc_norm.") for n in names)
        qk_norm = any(n.endswith("self_attn.q_norm.weight") for n in names)
    else:
        input_norm, fc_norm = bool(config.get("norm_before_fc")), bool(config.get("fc_norm"))
        qk_norm = config.get("model_type") == "qwen3"
    return DraftForward(
        input_norm=input_norm,
        fc_norm=fc_norm,
        norm_before_residual=bool(config.get("norm_before_residual")),
        feed_normed=spec and bool(norm_output),
        head_norm=spec or norm_output is not False,
        qk_norm=qk_norm,
    )


def _cfg(config: Mapping[str, Any], key: str, default: Any = None) -> Any:
    value = config.get(key, default)
    return default if value is None else value


class Eagle3Drafter(nn.Module):
    """A one-layer EAGLE-3 draft (SGLang `LlamaForCausalLMEagle3` semantics), plus what trainers add.

    Build it with `Eagle3Drafter(config, target_embed)` to train, or `from_tensors(...)` to load a
    checkpoint. `forward` is batched causal over (B, T); `forward(..., past=cache, return_cache=True)`
    decodes incrementally; `chain_forward` runs the teacher-forced multi-step chain (training-time test).
    `fwd` (a `DraftForward`) says which optional operations run; it can be swapped between passes to
    measure the same weights "as trained" and "as served".
    """

    d2t: Tensor
    t2d: Tensor

    def __init__(self, config: Mapping[str, Any], target_embed: Tensor, fwd: DraftForward | None = None) -> None:
        super().__init__()
        self.config = dict(config)
        self.fwd = fwd or DraftForward()
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
        self.rope_theta, scaling = rope_config(config)
        self.rotary = Rotary(head_dim, self.rope_theta, scaling, int(_cfg(config, "max_position_embeddings", 2048)))
        self.vocab_size, self.draft_vocab_size = vocab, draft_vocab
        self.input_norm = RMSNorm(self.num_aux * target_h, eps) if self.fwd.input_norm else None
        self.fc_norm = nn.ModuleList([RMSNorm(target_h, eps) for _ in range(self.num_aux)]) if self.fwd.fc_norm else None
        self.fc = nn.Linear(self.num_aux * target_h, h, bias=bool(config.get("bias", False)))
        self.midlayer = _MidLayer(h, inter, heads, kv_heads, head_dim, eps)
        extra = max(0, int(_cfg(config, "num_hidden_layers", 1)) - 1)
        self.layers = nn.ModuleDict({str(k): _DecoderLayer(h, inter, heads, kv_heads, head_dim, eps)
                                     for k in range(1, 1 + extra)})
        if self.fwd.qk_norm:
            attns: list[Attention] = [self.midlayer.self_attn, *(x.self_attn for x in self._extra())]
            for attn in attns:
                attn.add_qk_norm(eps)
        self.norm = RMSNorm(h, eps)
        self.lm_head = nn.Linear(h, draft_vocab, bias=False)
        self.register_buffer("d2t", torch.zeros(draft_vocab, dtype=torch.long))
        self.register_buffer("t2d", torch.ones(vocab, dtype=torch.bool))
        # The target's embedding: shared, frozen, never part of the draft checkpoint.
        self.embed_weight = target_embed.detach()

    def _extra(self) -> list[_DecoderLayer]:
        """The draft layers after the first (speculators' `layers.1..`)."""
        return [m for m in self.layers.values() if isinstance(m, _DecoderLayer)]

    # -- loading ---------------------------------------------------------------------------------
    @classmethod
    def from_tensors(
        cls,
        config: Mapping[str, Any],
        tensors: Mapping[str, Tensor],
        target_embed: Tensor | None,
        *,
        target_lm_head: Tensor | None = None,
        fwd: DraftForward | None = None,
    ) -> Eagle3Drafter:
        """Load like SGLang: known names only (others are skipped), the target's embedding when widths match.

        `fwd` defaults to the forward the config and tensor names describe (`forward_as_trained`).
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
        fwd = fwd or forward_as_trained(config, list(tensors))
        fc = tensors.get("fc.weight")
        target_h = int(_cfg(config, "target_hidden_size", h))
        if fc is not None and fc.ndim == 2 and fc.shape[1] % target_h == 0:
            # Size fc (and the norms before it) to the checkpoint (A = width / Ht) so a wiring with that
            # many aux states can run; `project_aux` then says clearly when the served width does not match.
            ec = dict(config.get("eagle_config") or {})
            ec["eagle_aux_hidden_state_layer_ids"] = list(range(fc.shape[1] // target_h))
            config["eagle_config"] = ec
        model = cls(config, embed.float(), fwd)
        if fc is not None and fc.ndim == 2 and fc.shape[1] != model.fc.in_features:
            model.fc = nn.Linear(fc.shape[1], h, bias="fc.bias" in tensors)
        model._load(tensors, target_lm_head)
        model.eval()
        return model

    def _load(self, tensors: Mapping[str, Tensor], target_lm_head: Tensor | None) -> None:
        own = self.state_dict()
        loaded: dict[str, Tensor] = {}
        for name, tensor in tensors.items():
            if name in ("d2t", "t2d") or name not in own:
                continue
            if tuple(own[name].shape) != tuple(tensor.shape):
                raise ValueError(f"tensor {name} has shape {tuple(tensor.shape)}, expected {tuple(own[name].shape)}")
            loaded[name] = tensor.float()
        if target_lm_head is not None and "lm_head.weight" not in tensors:
            loaded["lm_head.weight"] = target_lm_head.float()
        missing = [n for n in own if n not in ("d2t", "t2d") and n not in loaded]
        if missing:
            raise ValueError(f"draft checkpoint lacks {', '.join(missing)}")
        self.load_state_dict(loaded, strict=False)
        if "d2t" in tensors:
            d2t = tensors["d2t"].long()
            if d2t.shape[0] != self.draft_vocab_size:
                raise ValueError(f"d2t has {d2t.shape[0]} entries, expected draft_vocab_size {self.draft_vocab_size}")
            self.d2t.copy_(d2t)
        if "t2d" in tensors and tensors["t2d"].shape[0] == self.t2d.shape[0]:
            self.t2d.copy_(tensors["t2d"].bool())

    # -- mapping ---------------------------------------------------------------------------------
    def to_target_ids(self, draft_ids: Tensor) -> Tensor:
        """Draft vocabulary ids -> target ids (`d2t` holds offsets, as in SGLang's `hot_token_id`)."""
        return draft_ids + self.d2t[draft_ids]

    def embed(self, input_ids: Tensor) -> Tensor:
        return F.embedding(input_ids, self.embed_weight)

    def project_aux(self, aux_hidden: Tensor) -> Tensor:
        """(input_norm | fc_norm, as `fwd` says, then) fc over the concatenated aux states (B, T, A*Ht) -> (B, T, H)."""
        if aux_hidden.shape[-1] != self.fc.in_features:
            raise ValueError(
                f"aux hidden states are {aux_hidden.shape[-1]} wide but fc expects {self.fc.in_features}"
            )
        x = aux_hidden.to(self.fc.weight.dtype)
        if self.fwd.input_norm and self.input_norm is not None:
            x = self.input_norm(x)
        if self.fwd.fc_norm and self.fc_norm is not None:
            chunks = x.chunk(len(self.fc_norm), dim=-1)
            x = torch.cat([norm(c) for norm, c in zip(self.fc_norm, chunks, strict=True)], dim=-1)
        return self.fc(x)

    # -- forward ---------------------------------------------------------------------------------
    def _rope(self, positions: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        rot = self.rotary
        theta = self.fwd.rope_theta if self.fwd.rope_theta is not None else rot.theta
        if not self.fwd.rope_scaling or rot.scaling is None:
            return rope_cos_sin(positions, self.head_dim, theta, dtype)
        if theta != rot.theta:
            rot = Rotary(rot.head_dim, theta, rot.scaling, rot.max_pos)
        return rot(positions, dtype)

    def _finish(self, layer: Any, residual: Tensor, q: Tensor, k: Tensor, v: Tensor,
                keys: tuple[Tensor, Tensor] | None, mask: Tensor | None) -> Tensor:
        """Attention over (earlier keys +) these keys, the residual add, then the MLP block."""
        k_all = k if keys is None else torch.cat([keys[0], k], dim=2)
        v_all = v if keys is None else torch.cat([keys[1], v], dim=2)
        h = residual + layer.self_attn.attend(q, k_all, v_all, mask, keys is None)
        return h + layer.mlp(layer.post_attention_layernorm(h))

    def _step(
        self,
        input_ids: Tensor,
        hidden: Tensor,
        positions: Tensor,
        past: Sequence[tuple[Tensor, Tensor]] | None,
        mask: Tensor | None,
    ) -> tuple[Tensor, Tensor, list[tuple[Tensor, Tensor]]]:
        """One pass through the draft's layers: (logits, state for the next step, new (k, v) per layer).
        `past` holds extra keys/values in front, one pair per layer."""
        cos, sin = self._rope(positions, hidden.dtype)
        layer = self.midlayer
        normed = layer.hidden_norm(hidden)
        residual = normed if self.fwd.norm_before_residual else hidden
        z = torch.cat([layer.input_layernorm(self.embed(input_ids).to(hidden.dtype)), normed], -1)
        q, k, v = layer.self_attn.project(z, cos, sin, qk_norm=self.fwd.qk_norm)
        h = self._finish(layer, residual, q, k, v, past[0] if past else None, mask)
        new = [(k, v)]
        if self.fwd.extra_layers:
            for i, extra in enumerate(self._extra(), start=1):
                q, k, v = extra.self_attn.project(extra.input_layernorm(h), cos, sin, qk_norm=self.fwd.qk_norm)
                h = self._finish(extra, h, q, k, v, past[i] if past else None, mask)
                new.append((k, v))
        out = self.norm(h)
        logits = self.lm_head(out if self.fwd.head_norm else h)
        return logits, (out if self.fwd.feed_normed else h), new

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
        `aux=False`: `hidden` is already H wide (a chain step feeding back the draft's output state).
        `past` holds earlier positions' keys (one-layer drafts); new positions attend to all of them
        and causally among themselves. Returns `(draft_logits (B, T, Vd), next_state (B, T, H))`, plus
        the extended cache when `return_cache`.
        """
        h = self.project_aux(hidden) if aux else hidden.to(self.fc.weight.dtype)
        b, t = input_ids.shape
        start = 0 if past is None else len(past)
        if positions is None:
            positions = torch.arange(start, start + t, device=input_ids.device).expand(b, t)
        mask = None
        keys = None
        if past is not None and past.k is not None and past.v is not None:
            if len(self.layers) and self.fwd.extra_layers:
                raise ValueError("incremental decoding with a cache covers one-layer drafts only")
            keys = [(past.k, past.v)]
            mask = torch.ones(t, start + t, dtype=torch.bool, device=input_ids.device)
            mask[:, start:] = torch.tril(mask[:, start:])
        logits, pre, new = self._step(input_ids, h, positions, keys, mask)
        if return_cache:
            cache = (past or KVCache()).extended(*new[0])
            return logits, pre, cache
        return logits, pre

    def chain_forward(self, input_ids: Tensor, aux_hidden: Tensor, steps: int) -> list[Tensor]:
        """Teacher-forced chain of `steps` draft steps over whole sequences (the TTT scheme).

        `input_ids` (B, T) are aligned with `aux_hidden` (B, T, A*Ht): position t holds aux g_t and
        token x_{t+1}. Step s feeds step s-1's output state with token x_{t+1+s} (ids shifted
        left by s, zero-padded); its query at t attends to step-0 keys <= t plus its own position's
        keys from steps 1..s (what a live chain sees), in every layer. Returns logits per step, each
        (B, T, Vd); step s at t predicts the target's token after x_{t+1+s}; the last s positions are padding.
        """
        b, t = input_ids.shape
        pos0 = torch.arange(t, device=input_ids.device).expand(b, t)
        logits0, state, kv = self._step(input_ids, self.project_aux(aux_hidden), pos0, None, None)
        outs = [logits0]
        ks, vs = [[k] for k, _ in kv], [[v] for _, v in kv]
        causal = torch.tril(torch.ones(t, t, dtype=torch.bool, device=input_ids.device))
        diag = torch.eye(t, dtype=torch.bool, device=input_ids.device)
        ids = input_ids
        for s in range(1, steps):
            ids = torch.cat([ids[:, 1:], ids.new_zeros(b, 1)], dim=1)
            # Earlier steps' keys: step 0 causal, steps 1..s-1 only the same position, then its own.
            mask = torch.cat([causal] + [diag] * s, dim=1)
            past = [(torch.cat(ks[i], dim=2), torch.cat(vs[i], dim=2)) for i in range(len(ks))]
            logits, state, kv = self._step(ids, state, pos0 + s, past, mask)
            for i, (k, v) in enumerate(kv):
                ks[i].append(k)
                vs[i].append(v)
            outs.append(logits)
        return outs


def expected_accept_length(step_accept: Sequence[float]) -> float:
    """Chain accept length tau = 1 + sum_i prod_{j<=i} a_j from conditional per-step rates a_j."""
    total, prod = 1.0, 1.0
    for a in step_accept:
        prod *= a
        total += prod
    return total
