"""Draft checkpoint headers and the SGLang llama_eagle3 tensor check, on real safetensors files."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from eagle3_tui.eagle import checkpoint as ck

H, HT, NH, NKV, HD, INTER, V, VD = 16, 16, 4, 2, 4, 40, 50, 20

CONFIG = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "hidden_size": H, "num_attention_heads": NH, "num_key_value_heads": NKV, "intermediate_size": INTER,
    "vocab_size": V, "draft_vocab_size": VD, "rms_norm_eps": 1e-6, "num_hidden_layers": 1,
}


def good_tensors() -> dict:
    import torch

    t = {
        "fc.weight": torch.randn(H, 3 * HT),
        "midlayer.self_attn.q_proj.weight": torch.randn(NH * HD, 2 * H),
        "midlayer.self_attn.k_proj.weight": torch.randn(NKV * HD, 2 * H),
        "midlayer.self_attn.v_proj.weight": torch.randn(NKV * HD, 2 * H),
        "midlayer.self_attn.o_proj.weight": torch.randn(H, NH * HD),
        "midlayer.mlp.gate_proj.weight": torch.randn(INTER, H),
        "midlayer.mlp.up_proj.weight": torch.randn(INTER, H),
        "midlayer.mlp.down_proj.weight": torch.randn(H, INTER),
        "midlayer.input_layernorm.weight": torch.ones(H),
        "midlayer.hidden_norm.weight": torch.ones(H),
        "midlayer.post_attention_layernorm.weight": torch.ones(H),
        "norm.weight": torch.ones(H),
        "lm_head.weight": torch.randn(VD, H),
        "d2t": torch.arange(VD, dtype=torch.long) * 2 - torch.arange(VD, dtype=torch.long),  # target = 2*i
        "t2d": torch.zeros(V, dtype=torch.bool),
    }
    return t


def write_draft(d: Path, tensors: dict, config: dict | None = None) -> Path:
    from safetensors.torch import save_file

    d.mkdir(parents=True, exist_ok=True)
    (d / "config.json").write_text(json.dumps(config or CONFIG))
    save_file({k: v.contiguous() for k, v in tensors.items()}, str(d / "model.safetensors"))
    return d


def issues_of(d: Path, **kw) -> list[ck.CheckpointIssue]:
    h = ck.read_header(str(d))
    return ck.check_tensors(h.config, h.tensors, target_hidden_size=HT, num_aux=3, **kw)


def test_good_checkpoint_has_no_issues(tmp_path: Path) -> None:
    d = write_draft(tmp_path / "draft", good_tensors())
    h = ck.read_header(str(d))
    assert h.tensors["fc.weight"].shape == (H, 3 * HT)
    assert h.tensors["fc.weight"].dtype == "F32"
    assert h.tensors["d2t"].dtype == "I64"
    assert ck.read_int_tensor(h.tensors["d2t"]) == list(range(VD))
    assert ck.check_tensors(h.config, h.tensors, target_hidden_size=HT, num_aux=3) == []


def test_header_matches_safetensors_library(tmp_path: Path) -> None:
    from safetensors import safe_open

    d = write_draft(tmp_path / "draft", good_tensors())
    h = ck.read_header(str(d))
    with safe_open(str(d / "model.safetensors"), "pt") as f:
        assert set(f.keys()) == set(h.tensors)
        for k in f.keys():
            assert tuple(f.get_slice(k).get_shape()) == h.tensors[k].shape


def test_speculators_names_are_unknown_and_midlayer_missing(tmp_path: Path) -> None:
    t = {("layers.0." + k[len("midlayer."):] if k.startswith("midlayer.") else k): v for k, v in good_tensors().items()}
    issues = issues_of(write_draft(tmp_path / "d", t))
    unknown = [i for i in issues if i.kind == "unknown"]
    missing = [i for i in issues if i.kind == "missing"]
    assert len(unknown) == 10 and all("skips silently" in i.message for i in unknown)
    assert len(missing) == 10 and "layers.0.self_attn.q_proj.weight instead" in next(
        i.message for i in missing if i.tensor == "midlayer.self_attn.q_proj.weight")
    lines = ck.summarize(issues)
    assert len(lines) == 1 and lines[0].startswith("10 tensors named layers.0.*")


def test_q_proj_takes_h_instead_of_2h(tmp_path: Path) -> None:
    import torch

    t = good_tensors()
    t["midlayer.self_attn.q_proj.weight"] = torch.randn(NH * HD, H)
    [issue] = issues_of(write_draft(tmp_path / "d", t))
    assert issue.kind == "shape" and issue.tensor == "midlayer.self_attn.q_proj.weight"
    assert f"2 x {H} = {2 * H}, but this tensor takes {H}" in issue.message


def test_fc_width(tmp_path: Path) -> None:
    import torch

    t = good_tensors()
    t["fc.weight"] = torch.randn(H, 4 * HT)
    [issue] = issues_of(write_draft(tmp_path / "d", t))
    assert issue.kind == "fc-width"
    assert f"takes {4 * HT} inputs" in issue.message and "fits 4 aux states" in issue.message


def test_d2t_out_of_range_and_absolute(tmp_path: Path) -> None:
    import torch

    t = good_tensors()
    t["d2t"] = torch.full((VD,), V, dtype=torch.long)
    [issue] = issues_of(write_draft(tmp_path / "a", t))
    assert issue.kind == "d2t-range" and "outside the target vocabulary" in issue.message
    t["d2t"] = torch.zeros(VD, dtype=torch.long)
    t["d2t"][5] = -5  # draft 5 -> 0, collides with draft 0
    [issue] = issues_of(write_draft(tmp_path / "b", t))
    assert issue.kind == "d2t-range" and "ascending" in issue.message
    # values passed in instead of read from the file
    assert issues_of(tmp_path / "b", d2t_values=list(range(VD))) == []


def test_ignored_norms(tmp_path: Path) -> None:
    import torch

    t = good_tensors()
    t["input_norm.weight"] = torch.ones(3 * HT)
    t["fc_norm.0.weight"] = torch.ones(HT)
    cfg = dict(CONFIG, norm_before_fc=True, norm_before_residual=True)
    issues = issues_of(write_draft(tmp_path / "d", t, cfg))
    kinds = sorted((i.kind, i.tensor) for i in issues)
    assert kinds == [("ignored-norm", "config:norm_before_residual"), ("ignored-norm", "fc_norm.0.weight"),
                     ("ignored-norm", "input_norm.weight")]


def test_unknown_extra_and_missing_lm_head(tmp_path: Path) -> None:
    import torch

    t = good_tensors()
    del t["lm_head.weight"]
    t["mystery.weight"] = torch.ones(3)
    t["model.norm.weight"] = t.pop("norm.weight")  # SGLang also accepts a model. prefix
    issues = issues_of(write_draft(tmp_path / "d", t))
    assert sorted((i.kind, i.tensor) for i in issues) == [("missing", "lm_head.weight"), ("unknown", "mystery.weight")]


def test_sharded_index(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    d = tmp_path / "sharded"
    d.mkdir()
    (d / "config.json").write_text(json.dumps(CONFIG))
    t = good_tensors()
    names = sorted(t)
    a, b = names[:7], names[7:]
    save_file({k: t[k] for k in a}, str(d / "model-00001-of-00002.safetensors"))
    save_file({k: t[k] for k in b}, str(d / "model-00002-of-00002.safetensors"))
    wm = {k: "model-00001-of-00002.safetensors" for k in a} | {k: "model-00002-of-00002.safetensors" for k in b}
    (d / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": wm}))
    h = ck.read_header(str(d))
    assert set(h.tensors) == set(names) and len(h.files) == 2
    assert h.tensors[b[0]].file.endswith("00002.safetensors")
    assert ck.check_tensors(h.config, h.tensors, target_hidden_size=HT, num_aux=3) == []
    os.remove(d / "model-00002-of-00002.safetensors")
    with pytest.raises(ck.BadInput, match=r"names model-00002-of-00002\.safetensors, which is not in"):
        ck.read_header(str(d))


# -- bad input: one sentence naming the file ----------------------------------------------------


def test_truncated_file(tmp_path: Path) -> None:
    d = write_draft(tmp_path / "d", good_tensors())
    p = d / "model.safetensors"
    data = p.read_bytes()
    p.write_bytes(data[: len(data) - 100])
    with pytest.raises(ck.BadInput, match=r"model\.safetensors is truncated: tensor .* ends at byte"):
        ck.read_header(str(d))
    p.write_bytes(data[:50])
    with pytest.raises(ck.BadInput, match="more than the file holds"):
        ck.read_header(str(d))


def test_corrupt_header(tmp_path: Path) -> None:
    d = write_draft(tmp_path / "d", good_tensors())
    p = d / "model.safetensors"
    data = bytearray(p.read_bytes())
    data[8:12] = b"\xff\xfe{{"
    p.write_bytes(bytes(data))
    with pytest.raises(ck.BadInput, match="header is not JSON"):
        ck.read_header(str(d))
    p.write_bytes(b"abc")
    with pytest.raises(ck.BadInput, match="shorter than the 8-byte header length"):
        ck.read_header(str(d))


def test_missing_config_key(tmp_path: Path) -> None:
    cfg = dict(CONFIG)
    del cfg["hidden_size"]
    d = write_draft(tmp_path / "d", good_tensors(), cfg)
    h = ck.read_header(str(d))
    with pytest.raises(ck.BadInput, match="has no 'hidden_size' \\(expected the draft's hidden size"):
        ck.check_tensors(h.config, h.tensors, target_hidden_size=HT, num_aux=3)


def test_no_config_no_weights(tmp_path: Path) -> None:
    d = tmp_path / "empty"
    d.mkdir()
    with pytest.raises(ck.BadInput, match=r"config\.json does not exist"):
        ck.read_header(str(d))
    (d / "config.json").write_text("{not json")
    with pytest.raises(ck.BadInput, match="is not valid JSON"):
        ck.read_header(str(d))
    (d / "config.json").write_text(json.dumps(CONFIG))
    with pytest.raises(ck.BadInput, match=r"holds no weights \(looked for \.safetensors, pytorch_model\.bin"):
        ck.read_header(str(d))
    # original EAGLE releases ship pytorch_model.bin: read (weights only), a broken one is named
    (d / "pytorch_model.bin").write_bytes(b"x")
    with pytest.raises(ck.BadInput, match=r"pytorch_model\.bin could not be read as a torch state dict"):
        ck.read_header(str(d))
    with pytest.raises(ck.BadInput, match="is not a directory"):
        ck.read_header(str(d / "nope"))


def test_bad_input_is_a_user_error() -> None:
    from eagle3_tui.errors import UserError

    assert issubclass(ck.BadInput, UserError)


# -- published configs (field sets as released) and the mistakes real drafts carry ------------------------

# SpecForge configs/llama3-8B-eagle3.json and configs/qwen3-235B-A22B-eagle3.json (sgl-project/SpecForge a6b6b023)
SPECFORGE_LLAMA3_8B = {
    "architectures": ["LlamaForCausalLMEagle3"], "bos_token_id": 128000, "eos_token_id": 128001,
    "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02, "intermediate_size": 14336,
    "max_position_embeddings": 2048, "model_type": "llama", "num_attention_heads": 32, "num_key_value_heads": 8,
    "num_hidden_layers": 1, "pad_token_id": 0, "rms_norm_eps": 1e-05, "tie_word_embeddings": False,
    "torch_dtype": "float16", "transformers_version": "4.28.1", "use_cache": True, "vocab_size": 128256,
    "draft_vocab_size": 32000,
}
SPECFORGE_QWEN3_235B = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 46, 90], "use_aux_hidden_state": True},
    "attention_bias": False, "attention_dropout": 0.0, "bos_token_id": 151643, "draft_vocab_size": 32000,
    "eos_token_id": 151645, "head_dim": 128, "hidden_act": "silu", "hidden_size": 4096, "initializer_range": 0.02,
    "intermediate_size": 24576, "max_position_embeddings": 40960, "model_type": "llama", "num_attention_heads": 64,
    "num_hidden_layers": 1, "num_key_value_heads": 4, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
    "rope_scaling": None, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
    "use_cache": True, "vocab_size": 151936,
}
# nm-testing/EAGLE3-LLaMA3.1-Instruct-8B-converted config.json (speculators format)
NM_TESTING_SPECULATORS = {
    "architectures": ["Eagle3Speculator"], "draft_vocab_size": 32000, "norm_before_residual": False,
    "speculators_config": {"algorithm": "eagle3", "default_proposal_method": "greedy",
                           "proposal_methods": [{"accept_tolerance": 0.0, "proposal_type": "greedy",
                                                 "speculative_tokens": 5, "verifier_accept_k": 1}],
                           "verifier": {"architectures": ["LlamaForCausalLM"],
                                        "name_or_path": "meta-llama/Llama-3.1-8B-Instruct"}},
    "speculators_model_type": "eagle3", "target_hidden_size": None,
    "transformer_layer_config": {"head_dim": 128, "hidden_act": "silu", "hidden_size": 4096,
                                 "intermediate_size": 14336, "max_position_embeddings": 2048, "model_type": "llama",
                                 "num_attention_heads": 32, "num_hidden_layers": 1, "num_key_value_heads": 8,
                                 "rms_norm_eps": 1e-05, "rope_scaling": None, "rope_theta": 10000.0,
                                 "vocab_size": 128256},
}


def headers_for(config: dict, *, speculators_names: bool = False, extra: dict | None = None) -> dict:
    """The tensor headers a correct checkpoint for `config` has (no 4096-wide file is written)."""
    flat = ck.flat_config(config)
    out = {}
    for name, shape in ck.expected_tensors(flat, target_hidden_size=flat["hidden_size"], num_aux=3).items():
        if speculators_names and name.startswith("midlayer."):
            name = "layers.0." + name[len("midlayer."):]
        out[name] = ck.TensorInfo("I64" if name == "d2t" else "BF16", shape, "absent.safetensors")
    out["t2d"] = ck.TensorInfo("BOOL", (flat["vocab_size"],), "absent.safetensors")
    out.update(extra or {})
    return out


@pytest.mark.parametrize("config", [SPECFORGE_LLAMA3_8B, SPECFORGE_QWEN3_235B], ids=["llama3-8B", "qwen3-235B"])
def test_published_specforge_configs_are_silent(config: dict) -> None:
    assert ck.check_tensors(config, headers_for(config), target_hidden_size=4096, num_aux=3) == []


def test_published_speculators_config_reads_sizes_and_says_how_to_convert() -> None:
    """Sizes come from transformer_layer_config (no "config.json has no 'hidden_size'")."""
    s = ck.draft_sizes(NM_TESTING_SPECULATORS)
    assert (s.hidden, s.heads, s.kv_heads, s.head_dim, s.vocab, s.draft_vocab) == (4096, 32, 8, 128, 128256, 32000)
    issues = ck.check_tensors(NM_TESTING_SPECULATORS, headers_for(NM_TESTING_SPECULATORS, speculators_names=True),
                              target_hidden_size=4096, num_aux=3)
    kinds = {i.kind for i in issues}
    assert kinds == {"architecture", "unknown", "missing"}
    [arch] = [i for i in issues if i.kind == "architecture"]
    assert "copy transformer_layer_config's keys" in arch.message and "vLLM id - 1" in arch.message
    assert any("rename layers.0. to midlayer." in line for line in ck.summarize(issues))


def _kinds_of(config: dict, extra: dict | None = None, **kw) -> dict[str, str]:
    issues = ck.check_tensors(config, headers_for(config, extra=extra), target_hidden_size=kw.pop("ht", 4096),
                              num_aux=3, **kw)
    return {i.tensor: i.message for i in issues}


def test_lints_fire_on_real_mistakes() -> None:
    base = SPECFORGE_QWEN3_235B
    # original EAGLE releases say LlamaForCausalLM
    got = _kinds_of({**base, "architectures": ["LlamaForCausalLM"]})
    assert "LlamaForCausalLMEagle3" in got["config:architectures"]
    got = _kinds_of({**base, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 46, 90],
                                              "use_aux_hidden_state": False}})
    assert "target's last hidden state" in got["config:eagle_config.use_aux_hidden_state"]
    got = _kinds_of({**base, "eagle_config": {"eagle_aux_hidden_state_layer_ids": [-1, 1, 46, 90]}})
    assert "names 4 aux layers but SGLang 0.5.6 builds fc for 3" in got["config:eagle_config.eagle_aux_hidden_state_layer_ids"]
    # Kimi-style target (7168) wider than the draft: SGLang keeps the draft's embedding, none is shipped
    wide = {**base, "target_hidden_size": 7168}
    got = _kinds_of(wide, ht=7168)
    assert "stays random" in got["embed_tokens.weight"]
    q = ck.TensorInfo("BF16", (128,), "absent.safetensors")
    got = _kinds_of(base, {"midlayer.self_attn.q_norm.weight": q, "midlayer.self_attn.k_norm.weight": q})
    assert "Qwen3 q/k norm" in got["midlayer.self_attn.q_norm.weight"]
    got = _kinds_of({**base, "norm_output": False})
    assert "no norm before lm_head in training" in got["config:norm_output"]
    no_theta = {k: v for k, v in base.items() if k not in ("rope_theta", "rope_scaling")}
    got = _kinds_of({**no_theta, "rope_parameters": {"rope_theta": 1000000.0, "rope_type": "default"}})
    assert "theta 10000" in got["config:rope_parameters"]


def test_a_loader_that_applies_more_is_silent_about_it() -> None:
    from eagle3_tui.eagle.trainers import ServedLoader

    newer = ServedLoader(name="SGLang next", multi_layer=True, applies=frozenset({"rope_scaling", "norm_output"}),
                         num_aux=None)
    cfg = {**SPECFORGE_QWEN3_235B, "num_hidden_layers": 2,
           "eagle_config": {"eagle_aux_hidden_state_layer_ids": [-1, 1, 46, 90]}}
    old = _kinds_of(cfg)
    assert "config:num_hidden_layers" in old and "config:eagle_config.eagle_aux_hidden_state_layer_ids" in old
    new = _kinds_of(cfg, loader=newer)
    assert "config:num_hidden_layers" not in new and "config:eagle_config.eagle_aux_hidden_state_layer_ids" not in new
