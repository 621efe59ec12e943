"""Pure-torch bodies of the `torch.ops.sgl_kernel.*` CPU ops SGLang 0.5.23 calls on its `intel_amx` path.

Test and demo support only: the product (eagle3_tui) never imports this. The registry has no CPU build of
`sgl-kernel`, so without these ops SGLang 0.5.23 falls back to `torch_native` attention, where EAGLE-3
refuses to start (`srt/speculative/draft_utils.py`). Each body is written from what its caller in the
sglang 0.5.23 wheel passes and expects back (file named per op); the arithmetic is float32 where the real
kernels accumulate in float32, so greedy outputs match SGLang's own torch-native path.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def convert_weight_packed(weight: torch.Tensor) -> torch.Tensor:
    """`srt/layers/amx_utils.py` packs weights into the AMX (VNNI) layout; F.linear wants them as they are."""
    return weight


def weight_packed_linear(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, is_vnni: bool
) -> torch.Tensor:
    """`srt/layers/quantization/unquant.py` and `srt/layers/logits_processor.py`: y = x W^T + b on a 2-D x."""
    return F.linear(x, weight.to(x.dtype), None if bias is None else bias.to(x.dtype))


def _rms(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    # RMSNorm.forward_native (srt/layers/layernorm.py): variance in float32, weight applied after the cast back.
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(dim=-1, keepdim=True) + eps)
    return weight * xf.to(x.dtype)


def rmsnorm_cpu(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """`srt/layers/layernorm.py` RMSNorm.forward_cpu without a residual: returns a new tensor."""
    return _rms(x, weight, eps)


def fused_add_rmsnorm_cpu(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float) -> None:
    """`srt/layers/layernorm.py` RMSNorm.forward_cpu with a residual: in place, residual <- x + residual and
    x <- rmsnorm(residual); the caller returns (x, residual)."""
    total = (x.float() + residual.float()).to(x.dtype)
    residual.copy_(total)
    x.copy_(_rms(total, weight, eps))


def silu_and_mul_cpu(x: torch.Tensor) -> torch.Tensor:
    """`srt/layers/activation.py` SiluAndMul.forward_cpu: silu(gate) * up over the two halves of the last dim."""
    d = x.shape[-1] // 2
    return F.silu(x[..., :d]) * x[..., d:]


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, neox: bool) -> torch.Tensor:
    # apply_rotary_emb (srt/layers/rotary_embedding/utils.py), x: [tokens, heads, rot_dim].
    cos = cos.unsqueeze(-2).to(x.dtype)
    sin = sin.unsqueeze(-2).to(x.dtype)
    if neox:
        x1, x2 = torch.chunk(x, 2, dim=-1)
    else:
        x1, x2 = x[..., ::2], x[..., 1::2]
    o1 = x1 * cos - x2 * sin
    o2 = x2 * cos + x1 * sin
    if neox:
        return torch.cat((o1, o2), dim=-1)
    return torch.stack((o1, o2), dim=-1).flatten(-2)


def rotary_embedding_cpu(
    positions: torch.Tensor,
    query: torch.Tensor,
    key: torch.Tensor,
    head_size: int,
    cos_sin_cache: torch.Tensor,
    is_neox: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """`srt/layers/rotary_embedding/base.py` RotaryEmbedding.forward_cpu: returns (query, key) rotated like
    forward_native (the first rot_dim = cache width of each head rotated, the rest passed through)."""
    positions = positions.flatten()
    n = positions.shape[0]
    rot_dim = cos_sin_cache.shape[-1]
    cos, sin = cos_sin_cache.index_select(0, positions).chunk(2, dim=-1)
    out = []
    for t in (query, key):
        shape = t.shape
        t = t.reshape(n, -1, head_size)
        rot = _rotate(t[..., :rot_dim], cos, sin, is_neox)
        out.append(torch.cat((rot, t[..., rot_dim:]), dim=-1).reshape(shape))
    return out[0], out[1]


def apply_rotary_pos_emb_cpu(
    q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, unsqueeze_dim: int = 1
) -> tuple[torch.Tensor, torch.Tensor]:
    """`srt/layers/rotary_embedding/utils.py` binds this in place of apply_rotary_pos_emb_native_eager."""

    def half(x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
        return torch.cat((-x2, x1), dim=-1)

    c = cos.unsqueeze(unsqueeze_dim).float()
    s = sin.unsqueeze(unsqueeze_dim).float()
    qf, kf = q.float(), k.float()
    return ((qf * c) + half(qf) * s).to(q.dtype), ((kf * c) + half(kf) * s).to(k.dtype)


def store_cache_cpu(
    k: torch.Tensor, v: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, indices: torch.Tensor, row_dim: int
) -> None:
    """`srt/mem_cache/memory_pool.py` (MHA set_kv_buffer): rows `indices` of both caches <- k, v."""
    idx = indices.long()
    k_cache.view(-1, row_dim)[idx] = k.reshape(-1, row_dim).to(k_cache.dtype)
    v_cache.view(-1, row_dim)[idx] = v.reshape(-1, row_dim).to(v_cache.dtype)


def init_cpu_threads_env(cpu_ids: str) -> str:
    """`srt/distributed/bootstrap.py` asks the kernel library to pin OpenMP threads to `cpu_ids`
    (SGLANG_CPU_OMP_THREADS_BIND or the NUMA node). The stand-in pins nothing: the thread count stays what
    OMP_NUM_THREADS / torch chose, which is what a shared 2-core machine wants."""
    return cpu_ids


def initialize(size: int, rank: int) -> None:
    """`srt/distributed/bootstrap.py`: sets up the shared-memory all-reduce for tp > 1. One rank needs none."""
    if size != 1:
        raise RuntimeError(f"the sgl_kernel CPU stand-in serves tp_size 1 only (asked for {size})")


def _attend(
    q: torch.Tensor,
    keys: torch.Tensor,
    values: torch.Tensor,
    allowed: torch.Tensor | None,
    sm_scale: float,
    logit_cap: float,
    sinks: torch.Tensor | None,
) -> torch.Tensor:
    """Softmax attention of q [n, Hq, D] over keys/values [m, Hkv, D] (grouped heads), in float32.
    allowed: [n, m] bool or None (all visible). Returns [n, Hq, Dv] in q's dtype."""
    hq, hkv = q.shape[1], keys.shape[1]
    group = hq // hkv
    k = keys.float().repeat_interleave(group, dim=1)
    v = values.float().repeat_interleave(group, dim=1)
    logits = torch.einsum("nhd,mhd->hnm", q.float(), k) * sm_scale
    if logit_cap > 0:
        logits = logit_cap * torch.tanh(logits / logit_cap)
    if allowed is not None:
        logits = logits.masked_fill(~allowed.unsqueeze(0), float("-inf"))
    if sinks is not None:
        # gpt-oss style attention sinks: one extra logit per head that takes mass and gives nothing.
        sink = sinks.float().view(hq, 1, 1).expand(hq, logits.shape[1], 1)
        probs = torch.softmax(torch.cat((logits, sink), dim=-1), dim=-1)[..., :-1]
    else:
        probs = torch.softmax(logits, dim=-1)
    return torch.einsum("hnm,mhd->nhd", probs, v).to(q.dtype)


def _window(q_pos: torch.Tensor, k_pos: torch.Tensor, window: int) -> torch.Tensor | None:
    # The caller passes layer.sliding_window_size + 1: 0 means no window.
    if window <= 0:
        return None
    return (q_pos.unsqueeze(1) - k_pos.unsqueeze(0)) < window


def decode_attention_cpu(
    query: torch.Tensor,
    k_buffer: torch.Tensor,
    v_buffer: torch.Tensor,
    k_scale: float,
    v_scale: float,
    output: torch.Tensor,
    key: torch.Tensor | None,
    value: torch.Tensor | None,
    loc: torch.Tensor,
    attn_logits: torch.Tensor,
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    seq_lens: torch.Tensor,
    sm_scale: float,
    logit_cap: float,
    is_cross_attention: bool,
    window: int,
    encoder_lens: torch.Tensor | None,
    sinks: torch.Tensor | None,
) -> None:
    """`srt/layers/attention/intel_amx_backend.py` forward_decode: writes the new token's K/V at `loc` itself
    (when given), then one query per sequence attends to the row `req_to_token[req_pool_indices[i]]` up to
    `seq_lens[i]` (which includes the new token). Output written in place into `output` [bs, Hq, Dv]."""
    if is_cross_attention:
        raise RuntimeError("the sgl_kernel CPU stand-in has no cross-attention")
    if key is not None and value is not None:
        idx = loc.long()
        k_buffer[idx] = key.reshape(idx.shape[0], *k_buffer.shape[1:]).to(k_buffer.dtype)
        v_buffer[idx] = value.reshape(idx.shape[0], *v_buffer.shape[1:]).to(v_buffer.dtype)
    for i in range(seq_lens.shape[0]):
        n = int(seq_lens[i])
        rows = req_to_token[int(req_pool_indices[i]), :n].long()
        keys = k_buffer[rows].float() * k_scale
        values = v_buffer[rows].float() * v_scale
        pos = torch.arange(n)
        allowed = _window(pos[-1:], pos, window)
        output[i] = _attend(query[i : i + 1], keys, values, allowed, sm_scale, logit_cap, sinks)[0].to(output.dtype)


def extend_attention_cpu(
    q_extend: torch.Tensor,
    k_extend: torch.Tensor | None,
    v_extend: torch.Tensor | None,
    o_extend: torch.Tensor,
    k_buffer: torch.Tensor,
    v_buffer: torch.Tensor,
    k_scale: float,
    v_scale: float,
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    seq_lens: torch.Tensor,
    extend_seq_lens: torch.Tensor,
    extend_start_loc: torch.Tensor,
    max_extend_len: int | None,
    sm_scale: float,
    logit_cap: float,
    is_cross_attention: bool,
    window: int,
    encoder_lens: torch.Tensor | None,
    sinks: torch.Tensor | None,
    tree_mask: torch.Tensor | None,
    is_causal: bool,
) -> None:
    """`srt/layers/attention/intel_amx_backend.py` forward_extend: sequence i has `seq_lens[i]` tokens, the last
    `extend_seq_lens[i]` new (their queries at `extend_start_loc[i]` in q_extend). New tokens see the whole
    prefix and, causally, each other; with a tree mask (target verify of a topk > 1 tree) they see each other
    as the QLEN_ONLY mask says: [extend_len, extend_len] per sequence, sequence i at offset i * len * len
    (`srt/speculative/eagle_utils.py` default_tree_mask_mode on CPU). The new tokens' K/V come from k_extend
    (the caller has also stored them in the cache when it saves)."""
    if is_cross_attention:
        raise RuntimeError("the sgl_kernel CPU stand-in has no cross-attention")
    mask_offset = 0
    for i in range(seq_lens.shape[0]):
        total = int(seq_lens[i])
        ext = int(extend_seq_lens[i])
        start = int(extend_start_loc[i])
        prefix = total - ext
        if ext == 0:
            continue
        rows = req_to_token[int(req_pool_indices[i]), :prefix].long()
        k_new = k_extend[start : start + ext] if k_extend is not None else k_buffer[
            req_to_token[int(req_pool_indices[i]), prefix:total].long()]
        v_new = v_extend[start : start + ext] if v_extend is not None else v_buffer[
            req_to_token[int(req_pool_indices[i]), prefix:total].long()]
        keys = torch.cat((k_buffer[rows].float() * k_scale, k_new.float()), dim=0)
        values = torch.cat((v_buffer[rows].float() * v_scale, v_new.float()), dim=0)
        allowed = torch.ones(ext, total, dtype=torch.bool)
        if tree_mask is not None:
            block = tree_mask[mask_offset : mask_offset + ext * ext].view(ext, ext).bool()
            allowed[:, prefix:] = block
            mask_offset += ext * ext
        elif is_causal:
            allowed[:, prefix:] = torch.ones(ext, ext, dtype=torch.bool).tril()
        win = _window(torch.arange(prefix, total), torch.arange(total), window)
        if win is not None:
            allowed &= win
        o_extend[start : start + ext] = _attend(
            q_extend[start : start + ext], keys, values, allowed, sm_scale, logit_cap, sinks
        ).to(o_extend.dtype)


def flash_attn_varlen_func(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    cu_seqlens_q: torch.Tensor,
    cu_seqlens_k: torch.Tensor,
    max_seqlen_q: int,
    max_seqlen_k: int,
    softmax_scale: float | None = None,
    causal: bool = False,
) -> torch.Tensor:
    """`srt/layers/attention/vision.py` binds this at import on CPU (vision towers; text never calls it):
    packed sequences [total, H, D] cut by cu_seqlens, attention within each, returns [total, H, Dv]."""
    scale = softmax_scale if softmax_scale is not None else q.shape[-1] ** -0.5
    out = q.new_empty((q.shape[0], q.shape[1], v.shape[-1]))
    for i in range(cu_seqlens_q.shape[0] - 1):
        qs, qe = int(cu_seqlens_q[i]), int(cu_seqlens_q[i + 1])
        ks, ke = int(cu_seqlens_k[i]), int(cu_seqlens_k[i + 1])
        allowed = None
        if causal:
            # Bottom-right aligned, as flash-attention does when the query is shorter than the key.
            qpos = torch.arange(qe - qs) + (ke - ks) - (qe - qs)
            allowed = qpos.unsqueeze(1) >= torch.arange(ke - ks).unsqueeze(0)
        out[qs:qe] = _attend(q[qs:qe], k[ks:ke], v[ks:ke], allowed, scale, 0.0, None)
    return out
