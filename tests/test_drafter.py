"""The draft forward pass against an independent, per-position reference of SGLang's llama_eagle3.

The reference below is written from research/eagle3_formats.md §8 with explicit loops and no code
shared with eagle3_tui/eagle/drafter.py, so a wrong norm order, embedding/hidden order, residual,
RoPE or mask in the drafter shows up as a numeric mismatch.
"""

from __future__ import annotations

import math

import pytest
import torch

from eagle3_tui.eagle.drafter import Eagle3Drafter, KVCache, expected_accept_length

CFG = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "hidden_size": 16,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 24,
    "vocab_size": 30,
    "draft_vocab_size": 12,
    "rms_norm_eps": 1e-5,
    "rope_theta": 1000.0,
}


def _random_drafter(seed: int = 0) -> tuple[Eagle3Drafter, dict[str, torch.Tensor], torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    embed = torch.randn(30, 16, generator=g)
    model = Eagle3Drafter(CFG, embed)
    tensors = {}
    for name, p in model.state_dict().items():
        if name in ("d2t", "t2d"):
            continue
        t = torch.randn(p.shape, generator=g) * (0.3 if p.ndim == 2 else 0.2) + (1.0 if p.ndim == 1 else 0.0)
        tensors[name] = t
    tensors["d2t"] = torch.arange(12) * 2 - torch.arange(12)  # draft i -> target 2i
    tensors["t2d"] = torch.zeros(30, dtype=torch.bool)
    tensors["t2d"][::2] = True
    return Eagle3Drafter.from_tensors(CFG, tensors, embed), tensors, embed


def _rms(x: torch.Tensor, w: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    return w * x / torch.sqrt((x * x).mean() + eps)


def _rope(vec: torch.Tensor, pos: int, theta: float = 1000.0) -> torch.Tensor:
    hd = vec.shape[0]
    out = torch.empty_like(vec)
    for i in range(hd // 2):
        ang = pos / theta ** (2 * i / hd)
        a, b = vec[i], vec[i + hd // 2]
        out[i] = a * math.cos(ang) - b * math.sin(ang)
        out[i + hd // 2] = b * math.cos(ang) + a * math.sin(ang)
    return out


def _reference_step(w, embed, tok, h, pos, keys, values):
    """One position: returns (logits, prenorm, k_heads, v_heads); attends to keys/values + itself."""
    res = h
    z = torch.cat(
        [_rms(embed[tok], w["midlayer.input_layernorm.weight"]), _rms(h, w["midlayer.hidden_norm.weight"])]
    )
    q = (w["midlayer.self_attn.q_proj.weight"] @ z).view(4, 4)
    k = (w["midlayer.self_attn.k_proj.weight"] @ z).view(2, 4)
    v = (w["midlayer.self_attn.v_proj.weight"] @ z).view(2, 4)
    q = torch.stack([_rope(q[i], pos) for i in range(4)])
    k = torch.stack([_rope(k[i], pos) for i in range(2)])
    all_k, all_v = [*keys, k], [*values, v]
    heads = []
    for hh in range(4):
        kv = hh // 2  # grouped query attention: 2 query heads per kv head
        scores = torch.stack([q[hh] @ kk[kv] / 2.0 for kk in all_k])
        p = torch.softmax(scores, 0)
        heads.append(sum(p[j] * all_v[j][kv] for j in range(len(all_v))))
    attn = w["midlayer.self_attn.o_proj.weight"] @ torch.cat(heads)
    x = res + attn
    m = _rms(x, w["midlayer.post_attention_layernorm.weight"])
    mlp = w["midlayer.mlp.down_proj.weight"] @ (
        torch.nn.functional.silu(w["midlayer.mlp.gate_proj.weight"] @ m)
        * (w["midlayer.mlp.up_proj.weight"] @ m)
    )
    x = x + mlp
    logits = w["lm_head.weight"] @ _rms(x, w["norm.weight"])
    return logits, x, k, v


def test_forward_matches_per_position_reference() -> None:
    model, w, embed = _random_drafter()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 30, (1, 6), generator=g)
    aux = torch.randn(1, 6, 48, generator=g) * 3
    with torch.no_grad():
        logits, pre = model(ids, aux, aux=True)
    keys, values = [], []
    for t in range(6):
        h = w["fc.weight"] @ aux[0, t]
        ref_logits, ref_pre, k, v = _reference_step(w, embed, int(ids[0, t]), h, t, keys, values)
        keys.append(k)
        values.append(v)
        torch.testing.assert_close(logits[0, t], ref_logits, atol=1e-4, rtol=1e-4)
        torch.testing.assert_close(pre[0, t], ref_pre, atol=1e-4, rtol=1e-4)
    assert logits.shape == (1, 6, 12) and pre.shape == (1, 6, 16)


def test_chain_forward_is_what_a_live_chain_sees() -> None:
    """Step s at t = step-0 keys <= t plus the same position's earlier chain keys (reference loop)."""
    model, w, embed = _random_drafter(2)
    g = torch.Generator().manual_seed(3)
    ids = torch.randint(0, 30, (1, 7), generator=g)
    aux = torch.randn(1, 7, 48, generator=g)
    with torch.no_grad():
        outs = model.chain_forward(ids, aux, steps=3)
    assert len(outs) == 3
    keys0, values0, pre0 = [], [], []
    for t in range(7):
        _, p, k, v = _reference_step(w, embed, int(ids[0, t]), w["fc.weight"] @ aux[0, t], t, keys0, values0)
        keys0.append(k)
        values0.append(v)
        pre0.append(p)
    for t in range(7 - 2):
        ks, vs = keys0[: t + 1], values0[: t + 1]
        h = pre0[t]
        for s in (1, 2):
            logits, h, k, v = _reference_step(w, embed, int(ids[0, t + s]), h, t + s, ks, vs)
            ks, vs = [*ks, k], [*vs, v]
            torch.testing.assert_close(outs[s][0, t], logits, atol=1e-4, rtol=1e-4)


def test_incremental_cache_equals_full_forward_and_feedback_step() -> None:
    model, _, _ = _random_drafter(4)
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(0, 30, (2, 8), generator=g)
    aux = torch.randn(2, 8, 48, generator=g)
    with torch.no_grad():
        full_logits, full_pre = model(ids, aux)
        l1, p1, cache = model(ids[:, :5], aux[:, :5], return_cache=True)
        l2, p2, cache = model(ids[:, 5:], aux[:, 5:], past=cache, return_cache=True)
        assert isinstance(cache, KVCache) and len(cache) == 8
        torch.testing.assert_close(torch.cat([l1, l2], 1), full_logits, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(torch.cat([p1, p2], 1), full_pre, atol=1e-5, rtol=1e-5)
        # a chain step: H-wide hidden (aux=False) through the same cache equals chain_forward step 1
        chain = model.chain_forward(ids, aux, steps=2)
        _, _, c5 = model(ids[:, :5], aux[:, :5], return_cache=True)
        step1, _ = model(ids[:, 5:6], p1[:, 4:5], aux=False, past=c5)
        torch.testing.assert_close(step1[:, 0], chain[1][:, 4], atol=1e-5, rtol=1e-5)


def test_from_tensors_like_sglang() -> None:
    model, tensors, embed = _random_drafter()
    # d2t offsets map draft id i to target id 2i
    assert model.to_target_ids(torch.tensor([0, 3, 11])).tolist() == [0, 6, 22]
    # the draft's own embed_tokens is replaced by the target's when widths match; unknown names are skipped
    extra = dict(
        tensors, **{"embed_tokens.weight": torch.zeros(30, 16), "layers.0.bogus.weight": torch.ones(3)}
    )
    again = Eagle3Drafter.from_tensors(CFG, extra, embed)
    ids = torch.tensor([[1, 2, 3]])
    aux = torch.randn(1, 3, 48)
    with torch.no_grad():
        torch.testing.assert_close(again(ids, aux)[0], model(ids, aux)[0])
    # state_dict round trip keeps SGLang's names
    names = set(model.state_dict())
    assert {
        "fc.weight",
        "midlayer.hidden_norm.weight",
        "midlayer.self_attn.q_proj.weight",
        "lm_head.weight",
        "d2t",
    } <= names
    assert model.midlayer.self_attn.q_proj.weight.shape == (16, 32)  # attention input is 2H
    with pytest.raises(ValueError, match="shape"):
        Eagle3Drafter.from_tensors(CFG, dict(tensors, **{"norm.weight": torch.ones(5)}), embed)
    with pytest.raises(ValueError, match="lacks"):
        Eagle3Drafter.from_tensors(CFG, {k: v for k, v in tensors.items() if k != "fc.weight"}, embed)
    with pytest.raises(ValueError, match="wide"):
        model(ids, torch.randn(1, 3, 32))


def test_fc_sized_from_checkpoint_and_accept_length_formula() -> None:
    _, tensors, embed = _random_drafter()
    wide = dict(tensors, **{"fc.weight": torch.randn(16, 64)})
    model = Eagle3Drafter.from_tensors(CFG, wide, embed)
    assert model.num_aux == 4 and model.fc.in_features == 64
    assert expected_accept_length([1.0, 1.0, 1.0]) == 4.0
    assert expected_accept_length([0.5, 0.5]) == pytest.approx(1.75)


def test_rope_tables_follow_the_positions_device() -> None:
    """The tables are built where the positions live (a GPU run must not mix devices). No GPU here:
    the `meta` device stands in for it, and mixing it with a CPU table would raise."""
    import torch

    from eagle3_tui.eagle.drafter import rope_cos_sin

    cos, sin = rope_cos_sin(torch.arange(6, device="meta")[None], 8, 10000.0, torch.float32)
    assert cos.device.type == "meta" and sin.device.type == "meta"
    assert tuple(cos.shape) == (1, 6, 8)


# -- what trainers add: RoPE scaling, Qwen3 q/k norm (each against a transcription with plain loops) --------


def _yarn_reference(dim: int, base: float, sc: dict, max_pos: int) -> tuple[list[float], float]:
    """HF transformers `_compute_yarn_parameters`, written out with math and lists."""
    factor = sc["factor"]
    orig = sc.get("original_max_position_embeddings") or max_pos

    def mscale(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    att = sc.get("attention_factor")
    if att is None:
        att = mscale(factor, sc["mscale"]) / mscale(factor, sc["mscale_all_dim"]) if sc.get("mscale") and \
            sc.get("mscale_all_dim") else mscale(factor)

    def correction_dim(rotations: float) -> float:
        return (dim * math.log(orig / (rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(sc.get("beta_fast") or 32), correction_dim(sc.get("beta_slow") or 1)
    low, high = max(math.floor(low), 0), min(math.ceil(high), dim - 1)
    if low == high:
        high += 0.001
    out = []
    for i in range(dim // 2):
        pos_freq = base ** (2 * i / dim)
        ramp = min(max((i - low) / (high - low), 0.0), 1.0)
        extrapolation = 1 - ramp
        out.append((1 / (factor * pos_freq)) * (1 - extrapolation) + (1 / pos_freq) * extrapolation)
    return out, att


def _llama3_reference(dim: int, base: float, sc: dict) -> list[float]:
    out = []
    for i in range(dim // 2):
        f = 1 / base ** (2 * i / dim)
        wavelen = 2 * math.pi / f
        lo_w = sc["original_max_position_embeddings"] / sc["low_freq_factor"]
        hi_w = sc["original_max_position_embeddings"] / sc["high_freq_factor"]
        if wavelen < hi_w:
            out.append(f)
        elif wavelen > lo_w:
            out.append(f / sc["factor"])
        else:
            smooth = (sc["original_max_position_embeddings"] / wavelen - sc["low_freq_factor"]) / (
                sc["high_freq_factor"] - sc["low_freq_factor"])
            out.append((1 - smooth) * f / sc["factor"] + smooth * f)
    return out


YARN = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 8, "beta_fast": 32, "beta_slow": 1}


def test_rope_scaling_frequencies_match_the_transcriptions() -> None:
    from eagle3_tui.eagle.drafter import rope_inv_freq

    for dim, base, sc in ((4, 1000.0, YARN), (128, 1e6, {**YARN, "original_max_position_embeddings": 4096}),
                          (64, 1e4, {"type": "yarn", "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                                     "original_max_position_embeddings": 4096})):
        inv, att = rope_inv_freq(dim, base, sc, max_pos=2048)
        want, want_att = _yarn_reference(dim, base, sc, 2048)
        assert inv.tolist() == pytest.approx(want, rel=1e-5) and att == pytest.approx(want_att)
    l3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 8192}
    inv, att = rope_inv_freq(128, 500000.0, l3)
    assert inv.tolist() == pytest.approx(_llama3_reference(128, 500000.0, l3), rel=1e-5) and att == 1.0
    inv, _ = rope_inv_freq(8, 1e4, {"rope_type": "linear", "factor": 2.0})
    assert inv.tolist() == pytest.approx([1 / (2 * 1e4 ** (2 * i / 8)) for i in range(4)], rel=1e-6)


def _reference_ext(w, embed, tok, h, pos, keys, values, inv_freq, att, qk_norm):
    """`_reference_step` with given RoPE frequencies / attention factor and optional Qwen3 q/k norms."""
    z = torch.cat(
        [_rms(embed[tok], w["midlayer.input_layernorm.weight"]), _rms(h, w["midlayer.hidden_norm.weight"])]
    )
    q = (w["midlayer.self_attn.q_proj.weight"] @ z).view(4, 4)
    k = (w["midlayer.self_attn.k_proj.weight"] @ z).view(2, 4)
    v = (w["midlayer.self_attn.v_proj.weight"] @ z).view(2, 4)
    if qk_norm:
        q = torch.stack([_rms(q[i], w["midlayer.self_attn.q_norm.weight"], 1e-5) for i in range(4)])
        k = torch.stack([_rms(k[i], w["midlayer.self_attn.k_norm.weight"], 1e-5) for i in range(2)])

    def rot(vec: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(vec)
        for i in range(2):
            ang = pos * inv_freq[i]
            a, b = vec[i], vec[i + 2]
            out[i] = att * (a * math.cos(ang) - b * math.sin(ang))
            out[i + 2] = att * (b * math.cos(ang) + a * math.sin(ang))
        return out

    q = torch.stack([rot(q[i]) for i in range(4)])
    k = torch.stack([rot(k[i]) for i in range(2)])
    all_k, all_v = [*keys, k], [*values, v]
    heads = []
    for hh in range(4):
        scores = torch.stack([q[hh] @ kk[hh // 2] / 2.0 for kk in all_k])
        p = torch.softmax(scores, 0)
        heads.append(sum(p[j] * all_v[j][hh // 2] for j in range(len(all_v))))
    x = h + w["midlayer.self_attn.o_proj.weight"] @ torch.cat(heads)
    m = _rms(x, w["midlayer.post_attention_layernorm.weight"])
    x = x + w["midlayer.mlp.down_proj.weight"] @ (
        torch.nn.functional.silu(w["midlayer.mlp.gate_proj.weight"] @ m) * (w["midlayer.mlp.up_proj.weight"] @ m))
    return w["lm_head.weight"] @ _rms(x, w["norm.weight"]), k, v


def _ext_check(cfg: dict, tensors: dict, embed: torch.Tensor, inv_freq: list[float], att: float,
               qk_norm: bool) -> torch.Tensor:
    model = Eagle3Drafter.from_tensors(cfg, tensors, embed)
    g = torch.Generator().manual_seed(5)
    ids = torch.randint(0, 30, (1, 9), generator=g)
    aux = torch.randn(1, 9, 48, generator=g) * 3
    with torch.no_grad():
        logits, _ = model(ids, aux, aux=True)
    keys, values = [], []
    for t in range(9):
        ref, k, v = _reference_ext(tensors, embed, int(ids[0, t]), tensors["fc.weight"] @ aux[0, t], t, keys, values,
                                   inv_freq, att, qk_norm)
        keys.append(k)
        values.append(v)
        torch.testing.assert_close(logits[0, t], ref, atol=1e-4, rtol=1e-4)
    return logits


def test_yarn_changes_logits_and_matches_the_reference() -> None:
    """The issue: with and without YaRN the logits were identical (max difference exactly 0)."""
    _, tensors, embed = _random_drafter(4)
    plain = _ext_check(CFG, tensors, embed, [1 / 1000.0 ** (2 * i / 4) for i in range(2)], 1.0, False)
    inv, att = _yarn_reference(4, 1000.0, YARN, 2048)
    yarn = _ext_check({**CFG, "rope_scaling": YARN}, tensors, embed, inv, att, False)
    assert float((yarn - plain).abs().max()) > 1e-3
    # transformers 5 writes the same as rope_parameters (theta inside)
    rp = {k: v for k, v in CFG.items() if k != "rope_theta"}
    rp["rope_parameters"] = {**YARN, "rope_theta": 1000.0}
    torch.testing.assert_close(_ext_check(rp, tensors, embed, inv, att, False), yarn)


def test_qwen3_q_k_norm_changes_logits_and_matches_the_reference() -> None:
    _, tensors, embed = _random_drafter(6)
    g = torch.Generator().manual_seed(7)
    qk = dict(tensors, **{"midlayer.self_attn.q_norm.weight": torch.rand(4, generator=g) + 0.5,
                          "midlayer.self_attn.k_norm.weight": torch.rand(4, generator=g) + 0.5})
    inv = [1 / 1000.0 ** (2 * i / 4) for i in range(2)]
    with_norm = _ext_check({**CFG, "model_type": "qwen3"}, qk, embed, inv, 1.0, True)
    without = _ext_check(CFG, tensors, embed, inv, 1.0, False)
    assert float((with_norm - without).abs().max()) > 1e-3


def test_norm_output_in_each_trainers_meaning() -> None:
    """speculators' norm_output feeds norm(h) to the next step (step 0 unchanged); SpecForge's
    norm_output false drops the norm before lm_head (every step changes)."""
    from eagle3_tui.eagle.drafter import DraftForward, forward_as_trained

    assert forward_as_trained({"speculators_model_type": "eagle3", "norm_output": True}).feed_normed
    assert forward_as_trained({"norm_output": True}) == DraftForward()  # SpecForge's default: norm before lm_head
    assert not forward_as_trained({"norm_output": False}).head_norm
    model, w, _ = _random_drafter(8)
    g = torch.Generator().manual_seed(9)
    ids = torch.randint(0, 30, (1, 6), generator=g)
    aux = torch.randn(1, 6, 48, generator=g)
    with torch.no_grad():
        base = model.chain_forward(ids, aux, 2)
        model.fwd = DraftForward(feed_normed=True)
        fed = model.chain_forward(ids, aux, 2)
        model.fwd = DraftForward(head_norm=False)
        raw = model.chain_forward(ids, aux, 2)
    torch.testing.assert_close(fed[0], base[0])
    assert float((fed[1] - base[1]).abs().max()) > 1e-3
    h = model.project_aux(aux)
    _, pre = model(ids, aux)
    torch.testing.assert_close(raw[0], pre @ w["lm_head.weight"].T)  # lm_head(h), no final norm
    assert h.shape == pre.shape


def test_input_norm_fc_norm_and_norm_before_residual() -> None:
    from eagle3_tui.eagle.drafter import DraftForward

    _, tensors, embed = _random_drafter(10)
    g = torch.Generator().manual_seed(11)
    extra = dict(tensors, **{"input_norm.weight": torch.rand(48, generator=g) + 0.5})
    model = Eagle3Drafter.from_tensors({**CFG, "norm_before_fc": True}, extra, embed)
    assert model.fwd.input_norm and model.input_norm is not None
    aux = torch.randn(1, 5, 48, generator=g) * 4
    want = tensors["fc.weight"] @ _rms(aux[0, 2], extra["input_norm.weight"])
    torch.testing.assert_close(model.project_aux(aux)[0, 2], want, atol=1e-4, rtol=1e-4)
    fcn = dict(tensors, **{f"fc_norm.{i}.weight": torch.rand(16, generator=g) + 0.5 for i in range(3)})
    model = Eagle3Drafter.from_tensors(CFG, fcn, embed)
    chunks = [_rms(aux[0, 2, 16 * i: 16 * (i + 1)], fcn[f"fc_norm.{i}.weight"]) for i in range(3)]
    torch.testing.assert_close(model.project_aux(aux)[0, 2], tensors["fc.weight"] @ torch.cat(chunks), atol=1e-4,
                               rtol=1e-4)
    plain = Eagle3Drafter.from_tensors(CFG, tensors, embed)
    nbr = Eagle3Drafter.from_tensors({**CFG, "norm_before_residual": True}, tensors, embed)
    assert nbr.fwd == DraftForward(norm_before_residual=True)
    ids = torch.randint(0, 30, (1, 5), generator=g)
    with torch.no_grad():
        assert float((nbr(ids, aux)[0] - plain(ids, aux)[0]).abs().max()) > 1e-3
