"""The pure-torch `sgl_kernel` stand-in (real_engines/sglang/cpu_support, test and demo support for the real
SGLang lane) against plain torch references written differently: each op in isolation, on small tensors.

It needs only torch, so it runs in the fast lane; the real_sglang lane shows the same ops inside SGLang.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

SUPPORT = Path(__file__).resolve().parents[1] / "real_engines" / "sglang" / "cpu_support"


@pytest.fixture(scope="module")
def sk():
    sys.path.insert(0, str(SUPPORT))
    try:
        import sgl_kernel

        yield sgl_kernel
    finally:
        sys.path.remove(str(SUPPORT))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def test_ops_are_registered_where_sglang_looks_for_them(sk):
    # srt/utils/common.py 0.5.23: cpu_has_amx_support() is hasattr(torch.ops.sgl_kernel, "convert_weight_packed")
    for name in sk.SCHEMAS:
        assert hasattr(torch.ops.sgl_kernel, name), name
    w = torch.randn(8, 4)
    assert torch.ops.sgl_kernel.convert_weight_packed(w) is not None


def test_linear(sk):
    x, w, b = torch.randn(5, 4), torch.randn(3, 4), torch.randn(3)
    out = torch.ops.sgl_kernel.weight_packed_linear(x, w, b, True)
    assert torch.allclose(out, x @ w.T + b, atol=1e-6)
    assert torch.allclose(torch.ops.sgl_kernel.weight_packed_linear(x, w, None, True), x @ w.T, atol=1e-6)


def _rms_ref(x, w, eps):
    return w * (x / torch.sqrt((x * x).sum(-1, keepdim=True) / x.shape[-1] + eps))


def test_rmsnorm_and_the_fused_residual_add(sk):
    x, res, w = torch.randn(6, 16), torch.randn(6, 16), torch.randn(16)
    assert torch.allclose(torch.ops.sgl_kernel.rmsnorm_cpu(x, w, 1e-5), _rms_ref(x, w, 1e-5), atol=1e-5)
    x2, res2 = x.clone(), res.clone()
    torch.ops.sgl_kernel.fused_add_rmsnorm_cpu(x2, res2, w, 1e-5)
    assert torch.allclose(res2, x + res, atol=1e-6)
    assert torch.allclose(x2, _rms_ref(x + res, w, 1e-5), atol=1e-5)


def test_silu_and_mul(sk):
    x = torch.randn(3, 10)
    gate, up = x[:, :5], x[:, 5:]
    assert torch.allclose(torch.ops.sgl_kernel.silu_and_mul_cpu(x), gate * torch.sigmoid(gate) * up, atol=1e-6)


def _cos_sin_cache(max_pos, rot_dim, base=10000.0):
    inv = 1.0 / (base ** (torch.arange(0, rot_dim, 2).float() / rot_dim))
    freqs = torch.outer(torch.arange(max_pos).float(), inv)
    return torch.cat((freqs.cos(), freqs.sin()), dim=-1), freqs


@pytest.mark.parametrize("neox", [True, False])
def test_rotary_embedding_is_a_rotation_by_position(sk, neox):
    heads, hd, n = 2, 8, 5
    cache, freqs = _cos_sin_cache(32, hd)
    pos = torch.tensor([0, 3, 7, 7, 31])
    q, k = torch.randn(n, heads * hd), torch.randn(n, 1 * hd)
    qo, ko = torch.ops.sgl_kernel.rotary_embedding_cpu(pos, q, k, hd, cache, neox)

    def ref(t):  # the same rotation as a complex multiplication, pairs chosen by style
        t = t.view(n, -1, hd)
        if neox:
            pairs = torch.complex(t[..., : hd // 2], t[..., hd // 2 :])
        else:
            pairs = torch.complex(t[..., 0::2], t[..., 1::2])
        rot = pairs * torch.polar(torch.ones_like(freqs[pos]), freqs[pos]).unsqueeze(1)
        if neox:
            return torch.cat((rot.real, rot.imag), dim=-1).reshape(n, -1)
        return torch.stack((rot.real, rot.imag), dim=-1).reshape(n, -1)

    assert torch.allclose(qo, ref(q), atol=1e-5)
    assert torch.allclose(ko, ref(k), atol=1e-5)
    # position 0 is the identity
    assert torch.allclose(qo[0], q[0], atol=1e-6)


def _pool(tokens, heads, hd):
    return torch.zeros(tokens, heads, hd), torch.zeros(tokens, heads, hd)


def test_store_cache_writes_rows(sk):
    kc, vc = _pool(10, 2, 4)
    k, v = torch.randn(3, 2, 4), torch.randn(3, 2, 4)
    idx = torch.tensor([7, 1, 4])
    torch.ops.sgl_kernel.store_cache_cpu(k, v, kc, vc, idx, 8)
    assert torch.equal(kc[idx], k) and torch.equal(vc[idx], v)
    assert kc[0].abs().sum() == 0


def _sdpa(q, k, v, mask, scale):
    # q [n, Hq, D], k/v [m, Hkv, D]; grouped heads expanded the plain way
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, 1).transpose(0, 1)
    v = v.repeat_interleave(group, 1).transpose(0, 1)
    out = F.scaled_dot_product_attention(q.transpose(0, 1), k, v, attn_mask=mask, scale=scale)
    return out.transpose(0, 1)


def test_decode_attention_writes_the_new_kv_and_attends_over_the_row(sk):
    hq, hkv, hd = 4, 2, 8
    kc, vc = _pool(64, hkv, hd)
    kc[:40], vc[:40] = torch.randn(40, hkv, hd), torch.randn(40, hkv, hd)
    req_to_token = torch.zeros(3, 32, dtype=torch.int32)
    req_to_token[1, :6] = torch.tensor([3, 9, 12, 20, 33, 41], dtype=torch.int32)  # 41: the new token
    req_to_token[2, :3] = torch.tensor([5, 6, 42], dtype=torch.int32)
    q = torch.randn(2, hq, hd)
    k_new, v_new = torch.randn(2, hkv, hd), torch.randn(2, hkv, hd)
    out = torch.empty(2, hq, hd)
    scale = 1 / math.sqrt(hd)
    torch.ops.sgl_kernel.decode_attention_cpu(
        q, kc, vc, 1.0, 1.0, out, k_new.view(2, -1), v_new.view(2, -1), torch.tensor([41, 42]),
        torch.zeros(2, hq, 8, hd + 1), req_to_token, torch.tensor([1, 2]), torch.tensor([6, 3]),
        scale, 0.0, False, 0, None, None,
    )
    assert torch.equal(kc[41], k_new[0]) and torch.equal(vc[42], v_new[1])
    for i, (row, n) in enumerate(((1, 6), (2, 3))):
        idx = req_to_token[row, :n].long()
        ref = _sdpa(q[i : i + 1], kc[idx], vc[idx], None, scale)
        assert torch.allclose(out[i : i + 1], ref, atol=1e-5)


def test_extend_attention_is_causal_over_prefix_and_new_tokens(sk):
    hq, hkv, hd = 2, 2, 8
    kc, vc = _pool(64, hkv, hd)
    prefix = torch.tensor([10, 11, 12, 13], dtype=torch.int32)
    new_slots = torch.tensor([20, 21, 22], dtype=torch.int32)
    kc[prefix.long()], vc[prefix.long()] = torch.randn(4, hkv, hd), torch.randn(4, hkv, hd)
    k_ext, v_ext = torch.randn(3, hkv, hd), torch.randn(3, hkv, hd)
    kc[new_slots.long()], vc[new_slots.long()] = k_ext, v_ext
    req_to_token = torch.zeros(1, 16, dtype=torch.int32)
    req_to_token[0, :7] = torch.cat((prefix, new_slots))
    q = torch.randn(3, hq, hd)
    out = torch.empty_like(q)
    scale = 0.3
    args = (req_to_token, torch.tensor([0]), torch.tensor([7]), torch.tensor([3]), torch.tensor([0]), 3,
            scale, 0.0, False, 0, None, None)
    torch.ops.sgl_kernel.extend_attention_cpu(q, k_ext, v_ext, out, kc, vc, 1.0, 1.0, *args, None, True)
    keys, values = kc[req_to_token[0, :7].long()], vc[req_to_token[0, :7].long()]
    causal = torch.ones(3, 7, dtype=torch.bool).tril(diagonal=4)
    assert torch.allclose(out, _sdpa(q, keys, values, causal, scale), atol=1e-5)

    # a QLEN_ONLY tree mask: token 2 sees the root but not token 1 (a sibling)
    tree = torch.tensor([[1, 0, 0], [1, 1, 0], [1, 0, 1]], dtype=torch.bool)
    torch.ops.sgl_kernel.extend_attention_cpu(
        q, k_ext, v_ext, out, kc, vc, 1.0, 1.0, *args, tree.flatten(), True)
    full = torch.cat((torch.ones(3, 4, dtype=torch.bool), tree), dim=1)
    assert torch.allclose(out, _sdpa(q, keys, values, full, scale), atol=1e-5)


def _tree(sk, seq_len=7):
    # topk 2, 2 steps, 4 draft tokens. Score-list indices: step 0 -> 0, 1 (children of the root);
    # step 1 -> 2..5 (child c of step-0 branch p at 2 + p*2 + c). parent_list[1:] = score indices of the
    # step-0 tokens. Selected: A = 0, B = 1 (both under the root), C = 3 (branch 0's second child: under A).
    topk, depth, d = 2, 2, 4
    parent_list = torch.tensor([[-1, 0, 1]])
    selected = torch.tensor([[0, 1, 3]])
    mask = torch.ones(d * d, dtype=torch.bool)
    positions = torch.empty(d, dtype=torch.long)
    r_index, r_next, r_sib = torch.full((3, 1, d), -1, dtype=torch.long)
    sk.build_tree_kernel_efficient_cpu(
        parent_list, selected, torch.tensor([seq_len]), mask, positions, r_index, r_next, r_sib,
        topk, depth, d, 1)
    return mask.view(d, d), positions, r_index, r_next, r_sib


def test_tree_build(sk):
    mask, positions, r_index, r_next, r_sib = _tree(sk)
    # rows: root, A, B, C; each row sees the root, its ancestors and itself
    assert mask.int().tolist() == [[1, 0, 0, 0], [1, 1, 0, 0], [1, 0, 1, 0], [1, 1, 0, 1]]
    assert positions.tolist() == [7, 8, 8, 9]
    assert r_index.tolist() == [[0, 1, 2, 3]]
    assert r_next.tolist() == [[1, 3, -1, -1]]  # root -> A first, A -> C
    assert r_sib.tolist() == [[-1, 2, -1, -1]]  # A's next sibling is B


def test_chain_tree_is_causal(sk):
    d = 4
    mask = torch.ones(d * d, dtype=torch.bool)
    positions = torch.empty(d, dtype=torch.long)
    r_index, r_next, r_sib = torch.full((3, 1, d), -1, dtype=torch.long)
    # topk 1, 3 steps: each step's token is the only child of the previous one
    sk.build_tree_kernel_efficient_cpu(
        torch.tensor([[-1, 0, 1]]), torch.tensor([[0, 1, 2]]), torch.tensor([5]), mask, positions,
        r_index, r_next, r_sib, 1, 3, d, 1)
    assert torch.equal(mask.view(d, d), torch.ones(d, d, dtype=torch.bool).tril())
    assert positions.tolist() == [5, 6, 7, 8]
    assert r_next.tolist() == [[1, 2, 3, -1]]


@pytest.mark.parametrize(
    ("targets", "accepted", "path"),
    [
        ([50, 60, 60, 60], 1, [0, 2]),  # root predicts B (a sibling of A), B has no child
        ([40, 70, 0, 0], 2, [0, 1, 3]),  # root predicts A, A predicts C
        ([99, 0, 0, 0], 0, [0]),  # nothing matches
    ],
)
def test_greedy_verify_walks_the_tree(sk, targets, accepted, path):
    _, _, r_index, r_next, r_sib = _tree(sk)
    candidates = torch.tensor([[11, 40, 50, 70]])  # root, A, B, C
    target_predict = torch.tensor([targets])
    predicts = torch.full((4,), -1, dtype=torch.long)
    accept_index = torch.full((1, 3), -1, dtype=torch.long)
    accept_num = torch.zeros(1, dtype=torch.long)
    sk.verify_tree_greedy_cpu(predicts, accept_index, accept_num, candidates, r_index, r_next, r_sib,
                              target_predict)
    assert int(accept_num[0]) == accepted
    assert accept_index[0, : accepted + 1].tolist() == path
    # every accepted position's prediction is the target's token; the last one is the bonus
    assert [int(predicts[i]) for i in path] == [targets[i] for i in path]


def test_cache_location_helpers(sk):
    req_to_token = torch.arange(3 * 20, dtype=torch.int32).view(3, 20)
    out = torch.empty(2 * 6, dtype=torch.int64)
    sk.assign_draft_cache_locs_contiguous_cpu(torch.tensor([2, 0]), req_to_token, torch.tensor([5, 1]), out, 20, 2, 3)
    assert out.tolist() == list(range(45, 51)) + list(range(1, 7))
    packed = torch.empty(5, dtype=torch.int64)
    sk.assign_extend_cache_locs_cpu(torch.tensor([1, 2]), req_to_token, torch.tensor([3, 0]), torch.tensor([5, 3]),
                                    packed, 20)
    assert packed.tolist() == [23, 24, 40, 41, 42]
    back = torch.zeros_like(req_to_token)
    sk.assign_req_to_token_pool_cpu(torch.tensor([1, 2]), back, torch.tensor([3, 0]), torch.tensor([5, 3]), packed, 20)
    assert back[1, 3:5].tolist() == [23, 24] and back[2, :3].tolist() == [40, 41, 42]
    meta = sk.build_draft_decode_metadata_cpu(req_to_token, torch.tensor([1]), torch.tensor([4]), 2, 3, 20)
    # branch j's draft slots follow the prefix: seq_len + j * steps ...
    assert meta[0, :7].tolist() == [20, 21, 22, 23, 24, 25, 26]
    assert meta[1, :7].tolist() == [20, 21, 22, 23, 27, 28, 29]


def test_accept_helpers(sk):
    accept_tokens = torch.tensor([[5, 6, 7], [8, 9, 10]])
    bonus = torch.zeros(2, dtype=torch.long)
    sk.fill_bonus_tokens_cpu(accept_tokens, torch.tensor([2, 3]), bonus, 3)
    assert bonus.tolist() == [6, 10]
    out = torch.zeros(4, dtype=torch.long)
    sk.fill_accept_out_cache_loc_cpu(torch.tensor([[0, 2, -1], [3, -1, -1]]), torch.tensor([100, 101, 102, 103]), out)
    assert out[:3].tolist() == [100, 102, 103]
    ids = torch.tensor([1, 2, 3, 4, 5, 6])
    sk.rotate_input_ids_cpu(ids, torch.tensor([0, 3]), torch.tensor([3, 3]), torch.tensor([9, 8]), None)
    assert ids.tolist() == [2, 3, 9, 5, 6, 8]


def test_copy_all_layer_kv_cache(sk):
    bufs = [torch.arange(12, dtype=torch.float32).view(6, 2).clone() for _ in range(2)]
    ptrs = torch.tensor([b.data_ptr() for b in bufs], dtype=torch.int64)
    strides = torch.tensor([b.stride(0) * b.element_size() for b in bufs], dtype=torch.int64)
    before = [b.clone() for b in bufs]
    sk.copy_all_layer_kv_cache_cpu(ptrs, strides, torch.tensor([0, 1]), torch.tensor([1, 5]))
    for b, old in zip(bufs, before, strict=True):
        assert b[0].tolist() == old[1].tolist() and b[1].tolist() == old[5].tolist()
        assert torch.equal(b[2:], old[2:])


def test_import_only_ops_say_what_they_are(sk):
    with pytest.raises(NotImplementedError, match="conv3d_embed_cpu"):
        torch.ops.sgl_kernel.conv3d_embed_cpu([torch.zeros(1)])


def test_the_product_never_imports_the_stand_ins():
    # The product names the support folder on a server's PYTHONPATH (session/demo/real_sglang.py), nothing more.
    import re

    root = Path(__file__).resolve().parents[1] / "eagle3_tui"
    imports = re.compile(r"^\s*(import|from)\s+(sgl_kernel|sitecustomize|engines)\b", re.M)
    assert [str(p) for p in root.rglob("*.py") if imports.search(p.read_text())] == []
