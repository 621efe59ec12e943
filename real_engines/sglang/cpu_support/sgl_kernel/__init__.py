"""A pure-torch stand-in for `sgl_kernel` (the CPU build of sgl-kernel is not on the registry), so that
SGLang 0.5.23 runs its own `intel_amx` attention path, and with it EAGLE-3, on a CPU with plain torch.

Test and demo support for eagle3-tui, never imported by the product. Importing it registers the
`torch.ops.sgl_kernel.*` ops SGLang's CPU path calls (`srt/utils/common.py` cpu_has_amx_support() turns
true once `convert_weight_packed` exists) and exports the python helpers SGLang imports by name.
"""

from __future__ import annotations

import torch

from . import ops
from .spec import (
    assign_draft_cache_locs_contiguous_cpu,
    assign_extend_cache_locs_cpu,
    assign_req_to_token_pool_cpu,
    build_draft_decode_metadata_cpu,
    build_tree_kernel_efficient_cpu,
    copy_all_layer_kv_cache_cpu,
    fill_accept_out_cache_loc_cpu,
    fill_bonus_tokens_cpu,
    rotate_input_ids_cpu,
    verify_tree_greedy_cpu,
)

__all__ = [
    "SCHEMAS",
    "assign_draft_cache_locs_contiguous_cpu",
    "assign_extend_cache_locs_cpu",
    "assign_req_to_token_pool_cpu",
    "build_draft_decode_metadata_cpu",
    "build_tree_kernel_efficient_cpu",
    "copy_all_layer_kv_cache_cpu",
    "fill_accept_out_cache_loc_cpu",
    "fill_bonus_tokens_cpu",
    "rotate_input_ids_cpu",
    "verify_tree_greedy_cpu",
]

# Schemas follow the arguments the 0.5.23 callers pass (see each body in ops.py); (a!) marks what the
# caller expects the op to write in place.
SCHEMAS: dict[str, str] = {
    "convert_weight_packed": "(Tensor weight) -> Tensor",
    "weight_packed_linear": "(Tensor x, Tensor weight, Tensor? bias, bool is_vnni) -> Tensor",
    "rmsnorm_cpu": "(Tensor x, Tensor weight, float eps) -> Tensor",
    "fused_add_rmsnorm_cpu": "(Tensor(a!) x, Tensor(b!) residual, Tensor weight, float eps) -> ()",
    "silu_and_mul_cpu": "(Tensor x) -> Tensor",
    "rotary_embedding_cpu": (
        "(Tensor positions, Tensor query, Tensor key, int head_size, Tensor cos_sin_cache, bool is_neox)"
        " -> (Tensor, Tensor)"
    ),
    "apply_rotary_pos_emb_cpu": "(Tensor q, Tensor k, Tensor cos, Tensor sin, int unsqueeze_dim=1) -> (Tensor, Tensor)",
    "store_cache_cpu": (
        "(Tensor k, Tensor v, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor indices, int row_dim) -> ()"
    ),
    "init_cpu_threads_env": "(str cpu_ids) -> str",
    "initialize": "(int size, int rank) -> ()",
    "decode_attention_cpu": (
        "(Tensor query, Tensor(a!) k_buffer, Tensor(b!) v_buffer, float k_scale, float v_scale,"
        " Tensor(c!) output, Tensor? key, Tensor? value, Tensor loc, Tensor(d!) attn_logits,"
        " Tensor req_to_token, Tensor req_pool_indices, Tensor seq_lens, float sm_scale, float logit_cap,"
        " bool is_cross_attention, int window, Tensor? encoder_lens, Tensor? sinks) -> ()"
    ),
    "extend_attention_cpu": (
        "(Tensor q_extend, Tensor? k_extend, Tensor? v_extend, Tensor(a!) o_extend, Tensor k_buffer,"
        " Tensor v_buffer, float k_scale, float v_scale, Tensor req_to_token, Tensor req_pool_indices,"
        " Tensor seq_lens, Tensor extend_seq_lens, Tensor extend_start_loc, int? max_extend_len,"
        " float sm_scale, float logit_cap, bool is_cross_attention, int window, Tensor? encoder_lens,"
        " Tensor? sinks, Tensor? tree_mask, bool is_causal) -> ()"
    ),
    "flash_attn_varlen_func": (
        "(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q,"
        " int max_seqlen_k, float? softmax_scale=None, bool causal=False) -> Tensor"
    ),
}


# Ops that SGLang 0.5.23 binds to a module name at import on CPU (so they must exist for `import sglang` to
# finish) but that only other model families call: vision towers, Grok, Qwen3.5/3-Next, Muse. The demo world
# is a Llama target with an EAGLE-3 draft and never reaches them; called, they say so in one line.
IMPORT_ONLY: dict[str, str] = {
    "conv3d_embed_cpu": "srt/layers/conv.py (vision patch embedding)",
    "fused_gdn_gating_cpu": "srt/layers/attention/linear/gdn_backend.py (gated delta net)",
    "fused_moe_router_cpu": "srt/models/grok.py",
    "fused_dual_residual_rmsnorm_cpu": "srt/models/grok.py",
    "fused_sigmoid_mul_cpu": "srt/models/qwen3_5.py, srt/models/muse_glimmer.py",
    "fused_qk_gemma_rmsnorm_cpu": "srt/models/qwen3_5.py",
}


def _import_only(name: str):  # type: ignore[no-untyped-def]
    def body(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise NotImplementedError(
            f"sgl_kernel CPU stand-in: {name} (bound by {IMPORT_ONLY[name]}) serves models other than the "
            "demo world's Llama + EAGLE-3 and is not provided"
        )

    return body


def _register() -> None:
    if hasattr(torch.ops.sgl_kernel, "convert_weight_packed"):
        return
    lib = torch.library.Library("sgl_kernel", "DEF")
    for name, schema in SCHEMAS.items():
        lib.define(name + schema)
        # CompositeExplicitAutograd: one body for every backend key (the ops are called on CPU tensors only).
        lib.impl(name, getattr(ops, name), "CompositeExplicitAutograd")
    for name in IMPORT_ONLY:
        lib.define(name + "(Tensor[] args) -> Tensor")
        lib.impl(name, _import_only(name), "CompositeExplicitAutograd")
    # Keep the library alive for the life of the process (a dropped Library unregisters its ops).
    globals()["_LIBRARY"] = lib


_register()
