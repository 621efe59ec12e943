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
