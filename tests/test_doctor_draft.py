"""Load-time draft checks without training data: drafts written as SpecForge and speculators write them
(config keys and tensor names from tests/trainers/worlds.py), saved as real safetensors files and read
back with the checkpoint reader, against releases read from their wheels."""

from __future__ import annotations

import json
import shlex
import struct
from functools import cache
from pathlib import Path

from eagle3_tui.doctor import Facts, diagnose
from eagle3_tui.doctor import draft_rules as D
from eagle3_tui.doctor import release_rules as RR
from eagle3_tui.doctor import rules as R
from eagle3_tui.eagle.checkpoint import MLA_DRAFT, expected_tensors, read_header, read_int_tensor
from eagle3_tui.eagle.draft_config import DraftConfig
from eagle3_tui.sglang.installed import Release, answer, lookup, read_release
from eagle3_tui.sglang.launch import parse_launch
from tests.sglang_wheels import reader
from tests.trainers.worlds import VD, H, V, sglang_config, speculators_config

LAUNCH = ("python3 -m sglang.launch_server --model-path /models/target --speculative-algorithm EAGLE3 "
          "--speculative-draft-model-path /models/draft --speculative-num-steps 3 --speculative-eagle-topk 1 "
          "--speculative-num-draft-tokens 4")
SIZES = {"I64": 8, "BF16": 2, "BOOL": 1}


@cache
def _release(version: str) -> Release:
    return read_release(reader(version))


def write_draft(root: Path, config: dict, shapes: dict[str, tuple[int, ...]], *, d2t: list[int] | None = None) -> Path:
    """config.json and model.safetensors (zeros, d2t as int64 values) in a draft directory."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text(json.dumps(config, indent=2))
    header: dict[str, object] = {}
    blobs: list[bytes] = []
    at = 0
    tensors = dict(shapes)
    if d2t is not None:
        tensors["d2t"] = (len(d2t),)
    for name, shape in tensors.items():
        dtype = "I64" if name == "d2t" else "BOOL" if name == "t2d" else "BF16"
        numel = 1
        for d in shape:
            numel *= d
        data = struct.pack(f"<{len(d2t)}q", *d2t) if name == "d2t" and d2t is not None else bytes(numel * SIZES[dtype])
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [at, at + len(data)]}
        blobs.append(data)
        at += len(data)
    head = json.dumps(header).encode()
    (root / "model.safetensors").write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))
    return root


def specforge_d2t() -> list[int]:
    """SpecForge's data/preprocessing.py: the used target ids sorted, d2t[i] = used[i] - i."""
    used = [i + i // 2 for i in range(VD)]  # every third target id left out
    return [t - i for i, t in enumerate(used)]


def specforge_shapes(config: dict) -> dict[str, tuple[int, ...]]:
    """specforge/export/to_sglang.py: SGLang names, no embedding, t2d kept."""
    shapes = expected_tensors(config, target_hidden_size=H)
    shapes.pop("d2t", None)
    shapes["t2d"] = (V,)
    return shapes


def facts_for(version: str | None, root: Path, *, arch: str = "llama", n: int = 12, launch: str = LAUNCH,
              **more: object) -> Facts:
    head = read_header(str(root))
    cfg = DraftConfig.parse((root / "config.json").read_text())
    d2t = head.tensors.get("d2t")
    values = tuple(read_int_tensor(d2t)) if d2t is not None else None
    rel = _release(version) if version else None
    installed = answer(rel, lookup(arch), n, cfg.sglang_layer_ids) if rel is not None else None
    return Facts(launch=parse_launch(shlex.split(launch)), draft_config=cfg, draft_config_path=str(root / "config.json"),
                 target_num_layers=n, target_hidden_size=H, target_arch=lookup(arch).architecture,
                 checkpoint_path=str(root), checkpoint_tensors=head.tensors, d2t_values=values, installed=installed,
                 release=rel, **more)  # type: ignore[arg-type]


def found(f: Facts) -> dict[str, object]:
    return {x.rule_id: x for x in diagnose(f)}


def test_a_specforge_export_loads_clean(tmp_path: Path):
    cfg = sglang_config()
    root = write_draft(tmp_path / "sf", cfg, specforge_shapes(cfg), d2t=specforge_d2t())
    for version in ("0.5.6", "0.5.23"):
        got = found(facts_for(version, root))
        assert not {D.D2T, D.DRAFT_ARCHITECTURE, R.UNKNOWN_WEIGHTS, D.AUX_CONFIG, D.DRAFT_EMBEDDING} & set(got)


def test_a_speculators_draft_needs_converting(tmp_path: Path):
    cfg = speculators_config([2, 6, 9])
    shapes = {("layers.0." + k[len("midlayer."):] if k.startswith("midlayer.") else k): s
              for k, s in expected_tensors(cfg, target_hidden_size=H).items() if k != "d2t"}
    shapes["embed_tokens.weight"] = (V, H)
    root = write_draft(tmp_path / "spec", cfg, shapes, d2t=specforge_d2t())
    hit = found(facts_for("0.5.23", root))[D.DRAFT_ARCHITECTURE]
    assert hit.severity == "error" and "speculators-format" in hit.title
    assert "transformer_layer_config" in hit.fix and "vLLM id - 1" in hit.fix
    assert D.DRAFT_ARCHITECTURE in found(facts_for(None, root))  # the release unknown: still not loadable


def test_d2t_missing_is_not_a_renaming_problem(tmp_path: Path):
    cfg = sglang_config()
    root = write_draft(tmp_path / "nod2t", cfg, specforge_shapes(cfg))
    got = found(facts_for("0.5.6", root))
    assert R.UNKNOWN_WEIGHTS not in got
    hit = got[D.D2T]
    assert "no d2t" in hit.title and "Renaming tensors does not help" in hit.fix


def test_d2t_values_absolute_ids_and_zeros(tmp_path: Path):
    cfg = sglang_config()
    used = [t + i for i, t in enumerate(specforge_d2t())]
    absolute = found(facts_for("0.5.23", write_draft(tmp_path / "abs", cfg, specforge_shapes(cfg), d2t=used)))[D.D2T]
    assert "absolute target ids" in absolute.evidence[0].detail and "offsets" in absolute.fix
    zeros = found(facts_for("0.5.23", write_draft(tmp_path / "zero", cfg, specforge_shapes(cfg), d2t=[0] * VD)))[D.D2T]
    assert "all zero" in zeros.evidence[0].detail
    far = [V] * VD
    out = found(facts_for("0.5.23", write_draft(tmp_path / "far", cfg, specforge_shapes(cfg), d2t=far)))[D.D2T]
    assert "outside the target vocabulary" in out.evidence[0].detail


def test_an_mla_draft_is_recognised(tmp_path: Path):
    """kimi_k25_eagle3.py's layout: DeepSeek-V2 attention under layers.0 (mapped to midlayer), EAGLE-3 rest."""
    cfg = sglang_config(architectures=[MLA_DRAFT], kv_lora_rank=32, q_lora_rank=48, qk_rope_head_dim=8,
                        qk_nope_head_dim=8, v_head_dim=16)
    shapes = {k: s for k, s in specforge_shapes(cfg).items() if ".self_attn." not in k}
    for name, shape in (("q_a_proj", (48, 2 * H)), ("q_a_layernorm", (48,)), ("q_b_proj", (64, 48)),
                        ("kv_a_proj_with_mqa", (40, 2 * H)), ("kv_a_layernorm", (32,)), ("kv_b_proj", (96, 32)),
                        ("o_proj", (H, 64))):
        shapes[f"layers.0.self_attn.{name}.weight"] = shape
    root = write_draft(tmp_path / "mla", cfg, shapes, d2t=specforge_d2t())
    new = found(facts_for("0.5.12", root, arch="kimi_k25", n=61))
    assert R.UNKNOWN_WEIGHTS not in new and D.DRAFT_ARCHITECTURE not in new and R.CHECKPOINT_SHAPES not in new
    old = found(facts_for("0.5.11", root, arch="kimi_k25", n=61))
    assert "0.5.12" in old[D.DRAFT_ARCHITECTURE].fix
    assert R.UNKNOWN_WEIGHTS not in old or not any("kv_a_proj" in e.detail for e in old[R.UNKNOWN_WEIGHTS].evidence)


def test_a_multi_layer_draft_is_recognised(tmp_path: Path):
    cfg = sglang_config(num_hidden_layers=2)
    shapes = specforge_shapes(cfg)
    shapes.update({"layers.1." + k[len("midlayer."):]: s for k, s in shapes.items() if k.startswith("midlayer.")})
    root = write_draft(tmp_path / "two", cfg, shapes, d2t=specforge_d2t())
    new = found(facts_for("0.5.23", root))
    assert R.UNKNOWN_WEIGHTS not in new and RR.WILL_NOT_START not in new
    old = found(facts_for("0.5.6", root))
    assert R.UNKNOWN_WEIGHTS not in old and "num_hidden_layers = 2" in old[RR.WILL_NOT_START].evidence[0].detail
    unknown = found(facts_for(None, root))
    assert unknown[D.DRAFT_LAYERS].severity == "warning" and "0.5.12" in unknown[D.DRAFT_LAYERS].fix


def test_aux_config_and_embedding(tmp_path: Path):
    cfg = sglang_config(eagle_config={"use_aux_hidden_state": False})
    got = found(facts_for("0.5.23", write_draft(tmp_path / "aux", cfg, specforge_shapes(cfg), d2t=specforge_d2t())))
    assert got[D.AUX_CONFIG].severity == "error" and "use_aux_hidden_state" in got[D.AUX_CONFIG].fix
    trained = sglang_config(embed_requires_grad=True)
    shapes = {**specforge_shapes(trained), "embed_tokens.weight": (V, H)}
    emb = found(facts_for("0.5.23", write_draft(tmp_path / "emb", trained, shapes, d2t=specforge_d2t())))
    assert emb[D.DRAFT_EMBEDDING].severity == "warning" and "target's embedding" in emb[D.DRAFT_EMBEDDING].fix
    wide = sglang_config(target_hidden_size=2 * H)
    shapes = expected_tensors(wide, target_hidden_size=2 * H)
    shapes.pop("d2t")
    f = facts_for("0.5.23", write_draft(tmp_path / "own", wide, shapes, d2t=specforge_d2t()))
    f.target_hidden_size = 2 * H
    assert found(f)[D.DRAFT_EMBEDDING].severity == "error"


def test_norm_fix_names_the_release_that_applies_it(tmp_path: Path):
    cfg = sglang_config(norm_before_fc=True)
    shapes = {**specforge_shapes(cfg), "input_norm.weight": (3 * H,)}
    root = write_draft(tmp_path / "nbf", cfg, shapes, d2t=specforge_d2t())
    fix = found(facts_for("0.5.6", root))[R.IGNORED_NORMS].fix
    assert fix.startswith("Upgrade to SGLang >= 0.5.17") and "norm_before_fc" in fix
    assert R.IGNORED_NORMS not in found(facts_for("0.5.23", root))


def test_draft_context_window(tmp_path: Path):
    """The draft worker runs with the target's context length (eagle_worker.py); SpecForge's
    llama3-8B-eagle3.json says max_position_embeddings 2048."""
    cfg = sglang_config()
    root = write_draft(tmp_path / "ctx", cfg, specforge_shapes(cfg), d2t=specforge_d2t())
    target = {"max_position_embeddings": 131072, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}
    refused = found(facts_for("0.5.6", root, target_config=target))[D.DRAFT_CONTEXT]
    assert refused.severity == "error" and "will not start" in refused.title and "131072" in refused.title
    assert "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1" in refused.fix
    allow = {"SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN": "1"}
    allowed = found(facts_for("0.5.6", root, target_config=target, server_env=allow))[D.DRAFT_CONTEXT]
    assert allowed.severity == "warning" and "#6783" in allowed.evidence[-1].source
    crash = found(facts_for("0.5.2", root, target_config=target, server_env=allow))[D.DRAFT_CONTEXT]
    assert crash.severity == "error" and "RoPE cache" in crash.title and "0.5.3" in crash.fix
    assert found(facts_for("0.4.9", root, target_config=target))[D.DRAFT_CONTEXT].severity == "error"  # allowed, crashes
    given = found(facts_for("0.5.23", root, launch=LAUNCH + " --context-length 32768", server_env=allow))
    assert "--context-length 32768" in given[D.DRAFT_CONTEXT].evidence[1].detail
    assert D.DRAFT_CONTEXT not in found(facts_for("0.5.6", root, launch=LAUNCH + " --context-length 2048",
                                                  target_config=target))
    scaled = sglang_config(rope_scaling={"rope_type": "linear", "factor": 64.0})
    root2 = write_draft(tmp_path / "scaled", scaled, specforge_shapes(scaled), d2t=specforge_d2t())
    assert D.DRAFT_CONTEXT not in found(facts_for("0.5.6", root2, target_config=target))


def test_target_numerics(tmp_path: Path):
    cfg = sglang_config()
    root = write_draft(tmp_path / "num", cfg, specforge_shapes(cfg), d2t=specforge_d2t())
    rotated = {"quantization_config": {"quant_method": "quark", "algo_config": [{"name": "rotation",
                                                                                 "online_rotation": True}]}}
    hit = found(facts_for("0.5.23", root, target_config=rotated))[D.TARGET_NUMERICS]
    assert hit.severity == "warning" and "rotation" in hit.evidence[0].detail
    fp8 = found(facts_for("0.5.23", root, target_config={"quantization_config": {"quant_method": "fp8"}},
                          launch=LAUNCH + " --kv-cache-dtype fp8_e4m3 --dtype float16"))[D.TARGET_NUMERICS]
    details = " ".join(e.detail for e in fp8.evidence)
    assert fp8.severity == "info" and "fp8" in details and "fp8_e4m3" in details and "bfloat16" in details
    assert D.TARGET_NUMERICS not in found(facts_for("0.5.23", root, target_config={"torch_dtype": "bfloat16"}))


def test_fixes_never_suggest_ids_that_cannot_serve_the_trained_wiring():
    """speculators' generator stores the last layer's output (boundary N) beside the aux layers; no release
    read captures h32 of a 32-layer Llama (its loop stops at the input of the last layer)."""
    rel = _release("0.5.6")
    cfg = DraftConfig.parse(json.dumps(sglang_config()))
    f = Facts(draft_config=cfg, target_num_layers=32, target_arch="LlamaForCausalLM", release=rel,
              installed=answer(rel, lookup("llama"), 32, None), data_slot_boundaries=(2, 16, 29, 32),
              training_convention="[1:]")
    fix = found(f)[R.WIRING_MISMATCH].fix
    assert fix.startswith("No layer-id list serves h32") and "0..31" in fix and "[15, 28, 31]" not in fix
    ok = Facts(draft_config=cfg, target_num_layers=32, target_arch="LlamaForCausalLM", release=rel,
               installed=answer(rel, lookup("llama"), 32, None), data_slot_boundaries=(3, 17, 30, 32))
    assert "[2, 16, 29]" in found(ok)[R.WIRING_MISMATCH].fix  # [:-1]: capturable, the ids are named
    top = DraftConfig.parse(json.dumps(sglang_config(eagle_aux_hidden_state_layer_ids=[2, 16, 32])))
    ignored = found(Facts(draft_config=top, target_num_layers=32, installed=answer(rel, lookup("llama"), 32, None),
                          release=rel))[R.CONFIG_KEY_IGNORED]
    assert ignored.fix.startswith("No layer-id list serves h32")
