"""Pure-torch versions of the python helpers SGLang 0.5.23 imports from `sgl_kernel` on CPU.

Each one is the CPU twin of a triton kernel that sits next to its caller in the sglang 0.5.23 wheel (named
per function); the loops follow the kernel's per-program body, one program per batch row. Sizes on this path
are tiny (a handful of draft tokens per request), so plain Python loops over rows are enough.
"""

from __future__ import annotations

import ctypes

import torch


def build_tree_kernel_efficient_cpu(
    parent_list: torch.Tensor,
    selected_index: torch.Tensor,
    verified_seq_len: torch.Tensor,
    tree_mask: torch.Tensor,
    positions: torch.Tensor,
    retrieve_index: torch.Tensor,
    retrieve_next_token: torch.Tensor,
    retrieve_next_sibling: torch.Tensor,
    topk: int,
    depth: int,
    draft_token_num: int,
    tree_mask_mode: int,
) -> None:
    """`kernels/ops/speculative/spec_tree.py` sgl_build_tree_kernel_efficient_triton, row by row.
    Writes the tree mask (FULL_MASK = 0 or QLEN_ONLY = 1 layout), positions and the retrieve links in place."""
    if int(tree_mask_mode) not in (0, 1):
        raise RuntimeError(f"the sgl_kernel CPU stand-in builds FULL_MASK and QLEN_ONLY trees, not mode {tree_mask_mode}")
    d = draft_token_num
    parents = parent_list.tolist()
    selected = selected_index.tolist()
    seq_lens = [int(x) for x in verified_seq_len.tolist()]
    flat_mask = tree_mask.view(-1)
    flat_pos = positions.view(-1)
    r_index = retrieve_index.view(-1, d)
    r_next = retrieve_next_token.view(-1, d)
    r_sib = retrieve_next_sibling.view(-1, d)
    prefix_sum = 0
    for b, seq_len in enumerate(seq_lens):
        sel = selected[b]
        par = parents[b] if parent_list.dim() > 1 else parents
        seq_tree_idx = d * d * b + prefix_sum * d
        flat_pos[b * d] = seq_len
        for i in range(d - 1, 0, -1):
            r_index[b, i] = b * d + i
            parent_position = _parent_position(sel, par, sel[i - 1] // topk, d)
            if parent_position is not None:
                nxt = int(r_next[b, parent_position])
                r_next[b, parent_position] = i
                if nxt != -1:
                    r_sib[b, i] = nxt
        r_index[b, 0] = b * d
        for x in range(d):
            if int(tree_mask_mode) == 0:
                token_tree_idx = seq_tree_idx + (seq_len + d) * x + seq_len + 1
            else:
                token_tree_idx = d * d * b + d * x + 1
            flat_mask[token_tree_idx - 1] = True
            flat_mask[token_tree_idx : token_tree_idx + d - 1] = False
            if x > 0:
                flat_pos[b * d + x] = seq_len + _mark_path(flat_mask, token_tree_idx, x - 1, sel, par, topk, depth, d)
        prefix_sum += seq_len


def _parent_position(sel: list, par: list, parent_tb_idx: int, d: int) -> int | None:
    """Where a draft token's parent sits in the tree (0 = the root), None when it is not among the selected."""
    if parent_tb_idx == 0:
        return 0
    parent_token_idx = par[parent_tb_idx]
    for pp in range(d - 1):
        if sel[pp] == parent_token_idx:
            return pp + 1
    return None


def _mark_path(flat_mask: torch.Tensor, row: int, cur: int, sel: list, par: list, topk: int, depth: int, d: int) -> int:
    """Mark draft token cur+1 and its ancestors in its mask row (the triton kernel's inner loop); its depth."""
    position = 0
    for _ in range(depth):
        position += 1
        flat_mask[row + cur] = True
        parent_tb_idx = sel[cur] // topk
        if parent_tb_idx == 0:
            break
        parent_token_idx = par[parent_tb_idx]
        for cp in range(d - 1):
            if sel[cp] == parent_token_idx:
                cur = cp
                break
        else:
            break
    return position


def verify_tree_greedy_cpu(
    predicts: torch.Tensor,
    accept_index: torch.Tensor,
    accept_token_num: torch.Tensor,
    candidates: torch.Tensor,
    retrive_index: torch.Tensor,
    retrive_next_token: torch.Tensor,
    retrive_next_sibling: torch.Tensor,
    target_predict: torch.Tensor,
) -> None:
    """`kernels/ops/speculative/spec_tree.py` verify_tree_greedy_kernel_triton: walk each request's tree from
    the root, accepting the child whose draft token equals the target's greedy token, in place."""
    bs, _num_draft = candidates.shape
    num_spec = accept_index.shape[1]
    flat_target = target_predict.reshape(-1)
    flat_pred = predicts.view(-1)
    for b in range(bs):
        last = int(retrive_index[b, 0])
        accept_index[b, 0] = last
        accepted = 0
        cur = 0
        for _j in range(1, num_spec):
            cur = int(retrive_next_token[b, cur])
            target = int(flat_target[last])
            matched = False
            while cur != -1:
                if int(candidates[b, cur]) == target:
                    flat_pred[last] = target
                    accepted += 1
                    draft_index = int(retrive_index[b, cur])
                    accept_index[b, accepted] = draft_index
                    last = draft_index
                    matched = True
                    break
                cur = int(retrive_next_sibling[b, cur])
            if not matched:
                break
        accept_token_num[b] = accepted
        flat_pred[last] = flat_target[last]


def fill_bonus_tokens_cpu(
    accept_tokens: torch.Tensor, accept_lens: torch.Tensor, bonus_tokens: torch.Tensor, accept_stride: int
) -> None:
    """`kernels/ops/speculative/eagle.py` fill_bonus_tokens: bonus[i] = the last accepted token of row i
    (accept_lens counts the bonus token)."""
    flat = accept_tokens.reshape(-1)
    for i in range(accept_lens.shape[0]):
        bonus_tokens[i] = flat[accept_stride * i + int(accept_lens[i]) - 1]


def fill_accept_out_cache_loc_cpu(
    accept_index: torch.Tensor, out_cache_loc: torch.Tensor, accept_out_cache_loc: torch.Tensor
) -> None:
    """`kernels/ops/speculative/eagle.py` fill_accept_out_cache_loc: compact out_cache_loc at the accepted
    (non -1) entries of accept_index, in order."""
    flat = accept_index.reshape(-1)
    dst = 0
    for src in flat.tolist():
        if src > -1:
            accept_out_cache_loc[dst] = out_cache_loc[src]
            dst += 1


def assign_draft_cache_locs_contiguous_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    seq_lens: torch.Tensor,
    out_cache_loc: torch.Tensor,
    pool_len: int,
    topk: int,
    num_steps: int,
) -> None:
    """`kernels/ops/speculative/cache_locs.py` assign_draft_cache_locs_contiguous: request i's topk * steps
    slots from seq_lens[i] on in its req_to_token row, copied to out_cache_loc[i * topk * steps :]."""
    n = topk * num_steps
    for i in range(seq_lens.shape[0]):
        start = int(seq_lens[i])
        row = req_to_token[int(req_pool_indices[i])]
        out_cache_loc[i * n : (i + 1) * n] = row[start : start + n].to(out_cache_loc.dtype)


def assign_extend_cache_locs_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    start_offset: torch.Tensor,
    end_offset: torch.Tensor,
    out_cache_loc: torch.Tensor,
    pool_len: int,
) -> None:
    """`kernels/ops/speculative/cache_locs.py` assign_extend_cache_locs: each request's slots
    [start, end) of its row, packed one after another into out_cache_loc."""
    out = 0
    for i in range(req_pool_indices.shape[0]):
        start, end = int(start_offset[i]), int(end_offset[i])
        row = req_to_token[int(req_pool_indices[i])]
        out_cache_loc[out : out + end - start] = row[start:end].to(out_cache_loc.dtype)
        out += end - start


def assign_req_to_token_pool_cpu(
    req_pool_indices: torch.Tensor,
    req_to_token: torch.Tensor,
    start_offset: torch.Tensor,
    end_offset: torch.Tensor,
    out_cache_loc: torch.Tensor,
    pool_len: int,
) -> None:
    """The inverse of assign_extend_cache_locs_cpu (the assign_req_to_token_pool triton kernel of earlier
    releases' `srt/speculative/eagle_utils.py`): write packed out_cache_loc into each row's [start, end).
    `srt/mem_cache/allocation.py` 0.5.23 imports it on CPU but writes its rows in Python instead."""
    out = 0
    for i in range(req_pool_indices.shape[0]):
        start, end = int(start_offset[i]), int(end_offset[i])
        req_to_token[int(req_pool_indices[i]), start:end] = out_cache_loc[out : out + end - start].to(
            req_to_token.dtype
        )
        out += end - start


def rotate_input_ids_cpu(
    input_ids: torch.Tensor,
    extend_start_loc: torch.Tensor,
    extend_seq_lens: torch.Tensor,
    topk_index: torch.Tensor,
    select_index: torch.Tensor | None,
) -> None:
    """`kernels/ops/speculative/multi_layer_eagle.py` rotate_input_ids_kernel: shift each request's ids left
    by one and put its new token last (or at select_index[i]), in place."""
    flat_new = topk_index.reshape(-1)
    for i in range(extend_seq_lens.shape[0]):
        start, n = int(extend_start_loc[i]), int(extend_seq_lens[i])
        if n <= 0:
            continue
        input_ids[start : start + n - 1] = input_ids[start + 1 : start + n].clone()
        last = int(select_index[i]) if select_index is not None else start + n - 1
        input_ids[last] = flat_new[i]


def build_draft_decode_metadata_cpu(
    req_to_token: torch.Tensor,
    req_pool_indices: torch.Tensor,
    seq_lens: torch.Tensor,
    topk: int,
    num_steps: int,
    pool_len: int,
) -> torch.Tensor:
    """`srt/layers/attention/intel_amx_backend.py` IntelAMXMultiStepDraftBackend: one req_to_token row per
    (request, branch), row i*topk + j = the request's prefix, then branch j's draft slots, which
    assign_draft_cache_locs_contiguous laid out at seq_len + j * num_steps (the page-size-1 case of
    generate_draft_decode_kv_indices in `kernels/ops/speculative/cache_locs.py`)."""
    bs = seq_lens.shape[0]
    out = torch.zeros((bs * topk, pool_len), dtype=req_to_token.dtype)
    for i in range(bs):
        n = int(seq_lens[i])
        row = req_to_token[int(req_pool_indices[i])]
        for j in range(topk):
            out[i * topk + j, :n] = row[:n]
            draft = row[n + j * num_steps : n + (j + 1) * num_steps]
            out[i * topk + j, n : n + draft.shape[0]] = draft
    return out


def copy_all_layer_kv_cache_cpu(
    data_ptrs: torch.Tensor, strides: torch.Tensor, tgt_loc: torch.Tensor, src_loc: torch.Tensor
) -> None:
    """`kernels/ops/kvcache/cache_move.py` copy_all_layer_kv_cache_tiled: for every buffer (base address
    data_ptrs[b], row size strides[b] bytes), row src_loc[k] is copied over row tgt_loc[k]. All sources are
    read before any target is written, as the tiled kernel's single load/store does."""
    pairs = list(zip(tgt_loc.tolist(), src_loc.tolist(), strict=False))
    for base, stride in zip(data_ptrs.tolist(), strides.tolist(), strict=False):
        rows = [ctypes.string_at(base + s * stride, stride) for _, s in pairs]
        for (t, _), raw in zip(pairs, rows, strict=False):
            ctypes.memmove(base + t * stride, raw, stride)
