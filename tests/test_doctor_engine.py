"""The doctor as a whole: derived facts, worst-first order, the seed story, no crash on odd facts."""

from __future__ import annotations

import json
import shlex

from eagle3_tui.doctor import Facts, Finding, diagnose, engine
from eagle3_tui.doctor import rules as R
from eagle3_tui.eagle.checkpoint import TensorInfo
from eagle3_tui.eagle.draft_config import DraftConfig
from eagle3_tui.sglang.launch import parse_launch

H, V, VD, I_ = 64, 512, 128, 96
DRAFT = {
    "architectures": ["LlamaForCausalLMEagle3"],
    "hidden_size": H,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": I_,
    "vocab_size": V,
    "draft_vocab_size": VD,
    "num_hidden_layers": 1,
    "rope_theta": 10000.0,
}


def header(*, renamed: bool = False, fc_in: int = 3 * H) -> dict[str, TensorInfo]:
    hd = H // 4
    shapes = {
        "fc.weight": (H, fc_in),
        "midlayer.self_attn.q_proj.weight": (4 * hd, 2 * H),
        "midlayer.self_attn.k_proj.weight": (2 * hd, 2 * H),
        "midlayer.self_attn.v_proj.weight": (2 * hd, 2 * H),
        "midlayer.self_attn.o_proj.weight": (H, 4 * hd),
        "midlayer.mlp.gate_proj.weight": (I_, H),
        "midlayer.mlp.up_proj.weight": (I_, H),
        "midlayer.mlp.down_proj.weight": (H, I_),
        "midlayer.input_layernorm.weight": (H,),
        "midlayer.hidden_norm.weight": (H,),
        "midlayer.post_attention_layernorm.weight": (H,),
        "norm.weight": (H,),
        "lm_head.weight": (VD, H),
        "d2t": (VD,),
    }
    out = {}
    for name, shape in shapes.items():
        if renamed and name.startswith("midlayer."):
            name = "layers.0." + name[len("midlayer."):]
        out[name] = TensorInfo("I64" if name == "d2t" else "BF16", shape, "/nonexistent/model.safetensors")
    return out


def seed_facts(**over: object) -> Facts:
    launch = parse_launch(shlex.split(
        "python3 -m sglang.launch_server --model-path /models/Kimi-K2.5 --speculative-algorithm EAGLE3 "
        "--speculative-draft-model-path /root/draft --speculative-num-steps 1 "
        "--speculative-num-draft-tokens 16 --speculative-eagle-topk 1"
    ))
    cfg = dict(DRAFT, eagle_config={"eagle_aux_hidden_state_layer_ids": [2, 30, 58]})
    base = dict(
        launch=launch,
        launch_source="process 4242",
        draft_config=DraftConfig.parse(json.dumps(cfg)),
        draft_config_path="/root/draft/config.json",
        target_num_layers=61,
        target_hidden_size=H,
        checkpoint_tensors=header(),
        data_slot_boundaries=(0, 3, 31, 59),
        training_convention="[:-1]",
        live_gen_tps=56.8,
        baseline_tps=90.0,
        live_accept_len=1.6,
        log_has_accept_stats=True,
        log_decode_lines=120,
    )
    base.update(over)
    return Facts(**base)  # type: ignore[arg-type]


def test_seed_story_findings_worst_first() -> None:
    found = diagnose(seed_facts())
    ids = [f.rule_id for f in found]
    # [2, 30, 58] on a 61-layer target is SGLang's default written out: the +1 shifts it too.
    assert ids == [R.WIRING_MISMATCH, R.STEPS_OVERRIDE, R.EXPLICIT_DEFAULT_SHIFT, R.SPEC_SLOWER]
    sev = [f.severity for f in found]
    assert sev == sorted(sev, key=["error", "warning", "info"].index)


def test_checkpoint_issues_are_computed_from_the_header() -> None:
    found = {f.rule_id: f for f in diagnose(seed_facts(checkpoint_tensors=header(renamed=True)))}
    assert R.UNKNOWN_WEIGHTS in found
    assert "layers.0." in found[R.UNKNOWN_WEIGHTS].evidence[0].detail
    found = {f.rule_id: f for f in diagnose(seed_facts(checkpoint_tensors=header(fc_in=4 * H)))}
    assert R.FC_WIDTH in found and "fits 4 aux states" in found[R.FC_WIDTH].evidence[0].detail
    # given issues are not recomputed
    assert R.UNKNOWN_WEIGHTS not in {f.rule_id for f in diagnose(seed_facts(checkpoint_tensors=header(renamed=True),
                                                                            checkpoint_issues=[]))}


def test_fixing_the_seed_problems_silences_the_doctor() -> None:
    fixed_launch = parse_launch(shlex.split(
        "python3 -m sglang.launch_server --speculative-algorithm EAGLE3 --speculative-num-steps 5 "
        "--speculative-num-draft-tokens 6 --speculative-eagle-topk 1"))
    cfg = dict(DRAFT, eagle_config={"eagle_aux_hidden_state_layer_ids": [-1, 2, 30]})
    facts = seed_facts(launch=fixed_launch, draft_config=DraftConfig.parse(json.dumps(cfg)),
                       embed_capture_supported=True, live_gen_tps=120.0, live_accept_len=3.1,
                       predicted_accept_len=3.3)
    assert diagnose(facts) == []


def test_complete_derives_without_overriding() -> None:
    f = engine.complete(seed_facts())
    assert f.effective is not None and f.effective.draft_tokens == 2
    assert f.checkpoint_issues == []
    given = seed_facts(embed_capture_supported=False)
    assert engine.complete(given).embed_capture_supported is False
    assert given.effective is None  # the input is not mutated


def test_a_crashing_rule_becomes_an_info_finding(monkeypatch) -> None:
    def broken(_facts: Facts) -> Finding | None:
        raise ZeroDivisionError("boom")

    monkeypatch.setattr(engine, "RULES", ((R.ROPE_THETA, broken),))
    found = diagnose(Facts())
    assert len(found) == 1 and found[0].severity == "info" and "ZeroDivisionError" in found[0].evidence[0].detail


def test_empty_facts_give_no_findings_and_json_round_trips() -> None:
    assert diagnose(Facts()) == []
    for f in diagnose(seed_facts()):
        assert Finding.from_dict(json.loads(json.dumps(f.to_dict()))) == f
        assert f.rule_id in f.to_text()


def test_doctor_on_a_real_speculators_style_checkpoint(tmp_path) -> None:
    """A real draft dir (config.json + safetensors) exported in speculators style: the doctor names
    the ignored key, the skipped tensors and the missing rope_theta from the files themselves."""
    import numpy as np
    from safetensors.numpy import save_file

    from eagle3_tui.eagle.checkpoint import read_header

    cfg = dict(DRAFT, eagle_aux_hidden_state_layer_ids=[0, 2, 6])
    del cfg["rope_theta"]
    text = json.dumps(cfg, indent=2)
    (tmp_path / "config.json").write_text(text)
    tensors = {
        name: (np.zeros(info.shape, dtype=np.int64) if name == "d2t" else np.zeros(info.shape, dtype=np.float16))
        for name, info in header(renamed=True).items()
    }
    save_file(tensors, str(tmp_path / "model.safetensors"))
    head = read_header(str(tmp_path))
    facts = Facts(
        draft_config=DraftConfig.parse(text),
        draft_config_path=str(tmp_path / "config.json"),
        checkpoint_path=str(tmp_path),
        checkpoint_tensors=head.tensors,
        target_num_layers=10,
        target_hidden_size=H,
        target_rope_theta=500000.0,
        data_slot_boundaries=(0, 2, 6, 9),
    )
    found = {f.rule_id: f for f in diagnose(facts)}
    assert set(found) == {R.CONFIG_KEY_IGNORED, R.UNKNOWN_WEIGHTS, R.ROPE_THETA, R.WIRING_MISMATCH}
    assert found[R.CONFIG_KEY_IGNORED].evidence[0].source == str(tmp_path / "config.json")
    assert "[-1, 1, 5]" in found[R.CONFIG_KEY_IGNORED].fix
    assert "10 tensors named layers.0.*" in found[R.UNKNOWN_WEIGHTS].evidence[0].detail
    assert '"rope_theta": 500000' in found[R.ROPE_THETA].fix
    # served: SGLang's default h2, h5, h7; trained: embed, h2, h6
    assert "embed, h2, h6" in found[R.WIRING_MISMATCH].title and "h2, h5, h7" in found[R.WIRING_MISMATCH].title
