"""The installed-SGLang model against the real releases' source (wheels from the package registry).

Each case names the release and file it was checked in by hand; the model reads the same files. Layer
counts are the real targets': Llama-3.1-8B 32, Qwen3-8B 36, DeepSeek-V3 (and Kimi-K2) 61.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache

import pytest

from eagle3_tui.sglang.installed import Release, answer, lookup, read_release
from eagle3_tui.sglang.installed import table as release_table
from eagle3_tui.sglang.installed.source import Read
from tests.sglang_wheels import reader

LAYERS = {"llama": 32, "qwen3": 36, "deepseek_v3": 61}
TYPE_ERROR = "TypeError"
NO_SETTER = "no set_eagle3_layers_to_capture"
SHORT = "target captures 2"

# (release, arch, ids) -> (prefill captures | failure keyword, graphed decode replays)
CASES: list[tuple[str, str, tuple[int, ...] | None, object, tuple[int, ...] | None]] = [
    # 0.4.9: llama.py/qwen3.py add +1; model_runner.py captures the graphs (cuda_graph_runner.py:298 resets
    # to the default) before applying the ids (model_runner.py:341); deepseek_v2.py has no setter.
    ("0.4.9", "llama", None, (2, 16, 29), (2, 16, 29)),
    ("0.4.9", "llama", (2, 16, 29), (3, 17, 30), (2, 16, 29)),
    ("0.4.9", "llama", (1, 15, 28), (2, 16, 29), (2, 16, 29)),
    ("0.4.9", "llama", (-1, 2, 15), TYPE_ERROR, None),
    ("0.4.9", "qwen3", (-1, 2, 17), (0, 3, 18), (2, 18, 33)),
    ("0.4.9", "qwen3", (2, 18, 33), (3, 19, 34), (2, 18, 33)),
    ("0.4.9", "deepseek_v3", None, NO_SETTER, None),
    ("0.4.9", "deepseek_v3", (1, 29, 57), NO_SETTER, None),
    # 0.5.6: same start-up order (model_runner.py ~518 graphs, ~552 ids); deepseek_v2.py +1 with
    # `hidden_states + residual` (raises on -1).
    ("0.5.6", "llama", (2, 16, 29), (3, 17, 30), (2, 16, 29)),
    ("0.5.6", "llama", (-1, 2, 15), TYPE_ERROR, None),
    ("0.5.6", "qwen3", None, (2, 18, 33), (2, 18, 33)),
    ("0.5.6", "qwen3", (-1, 2, 17), (0, 3, 18), (2, 18, 33)),
    ("0.5.6", "deepseek_v3", None, (2, 30, 58), (2, 30, 58)),
    ("0.5.6", "deepseek_v3", (2, 30, 58), (3, 31, 59), (2, 30, 58)),
    ("0.5.6", "deepseek_v3", (1, 29, 57), (2, 30, 58), (2, 30, 58)),
    ("0.5.6", "deepseek_v3", (-1, 2, 30), TYPE_ERROR, None),
    # 0.5.12: ids applied before the graphs (model_runner.py init_aux_hidden_state_capture): decode = prefill.
    ("0.5.12", "llama", (2, 16, 29), (3, 17, 30), (3, 17, 30)),
    ("0.5.12", "llama", (-1, 2, 15), TYPE_ERROR, None),
    ("0.5.12", "qwen3", (-1, 2, 17), (0, 3, 18), (0, 3, 18)),
    ("0.5.12", "deepseek_v3", (2, 30, 58), (3, 31, 59), (3, 31, 59)),
    ("0.5.12", "deepseek_v3", (-1, 2, 30), TYPE_ERROR, None),
    # 0.5.23: llama.py captures through layers/layer_boundary (the embedding at layer 0); deepseek_v2.py
    # adds +1 only when the first id is 1, so -1 stays -1 and is never captured (2 of 3 states).
    ("0.5.23", "llama", (-1, 2, 15), (0, 3, 16), (0, 3, 16)),
    ("0.5.23", "llama", (2, 16, 29), (3, 17, 30), (3, 17, 30)),
    ("0.5.23", "qwen3", (-1, 2, 17), (0, 3, 18), (0, 3, 18)),
    ("0.5.23", "deepseek_v3", None, (2, 30, 58), (2, 30, 58)),
    ("0.5.23", "deepseek_v3", (2, 30, 58), (2, 30, 58), (2, 30, 58)),
    ("0.5.23", "deepseek_v3", (1, 29, 57), (2, 30, 58), (2, 30, 58)),
    ("0.5.23", "deepseek_v3", (0, 2, 30), (0, 2, 30), (0, 2, 30)),
    ("0.5.23", "deepseek_v3", (-1, 2, 30), SHORT, None),
]


@cache
def _release(version: str) -> Release:
    return read_release(reader(version))


def _answer(version: str, arch: str, ids: Sequence[int] | None, read: Read | None = None):
    release = read_release(read) if read is not None else _release(version)
    return answer(release, lookup(arch), LAYERS[arch], ids)


@pytest.mark.parametrize(("version", "arch", "ids", "prefill", "decode"), CASES,
                         ids=[f"{v}-{a}-{i}" for v, a, i, _, _ in CASES])
def test_captures_read_from_the_release(version, arch, ids, prefill, decode):
    got = _answer(version, arch, ids)
    assert got.version == version
    assert got.source == "read from source"
    if isinstance(prefill, str):
        assert got.captures is None
        assert got.fails is not None and prefill in got.fails
    else:
        assert got.fails is None
        assert got.captures == prefill
        assert got.captures_cuda_graph == decode
        assert got.prefill_only == (prefill != decode)


@pytest.mark.parametrize("version", ["0.4.9", "0.5.6", "0.5.12", "0.5.23"])
def test_source_agrees_with_the_version_table(version):
    """The fallback table says what reading the release says (the table was built from these readers)."""
    release = _release(version)
    for arch in ("llama", "qwen3", "deepseek_v3"):
        a = lookup(arch)
        read_rule, table_rule = release.capture_rule(a), release_table.capture_rule(version, a)
        assert (read_rule.setter, read_rule.embed_safe, read_rule.last_boundary, read_rule.sticky) == (
            table_rule.setter, table_rule.embed_safe, table_rule.last_boundary, table_rule.sticky), arch
        assert release.spec.auto_spec(a.architecture) == release_table.spec_rules(version).auto_spec(a.architecture)
    order = release_table.graph_order(version)
    assert (release.graph_order.ids_before_graphs, release.graph_order.graph_resets) == (
        order.ids_before_graphs, order.graph_resets)
    loader = release_table.draft_loader(version)
    assert release.loader.to_dict() == loader.to_dict()
    assert release.loader.fc_from_ids == loader.fc_from_ids
    assert release.spec.steps_alone_fails == release_table.spec_rules(version).steps_alone_fails


def test_embedding_capture_by_release_and_arch():
    """qwen2.py appends hidden_states while residual is None; llama.py only from 0.5.22 (layer_boundary)."""
    assert _answer("0.5.6", "qwen3", None).embed_capture is True
    assert _answer("0.5.6", "llama", None).embed_capture is False
    assert _answer("0.5.6", "deepseek_v3", None).embed_capture is False
    assert _answer("0.5.23", "llama", None).embed_capture is True
    ds = _answer("0.5.23", "deepseek_v3", None)
    assert ds.embed_capture is False and ds.embed_id == 0  # verbatim ids: 0 is the embedding


def test_the_storys_patch_reaches_prefill_only_on_0_5_6():
    """seeds/003: sed on deepseek_v2.py adds capture_embedding_for_eagle3; CUDA graphs still replay the default."""
    base = reader("0.5.6")
    path = "srt/models/deepseek_v2.py"
    text = base(path)
    assert text is not None
    old = "            self.model.layers_to_capture = [val + 1 for val in layer_ids]"
    assert old in text
    patched = text.replace(old, "            self.model.capture_embedding_for_eagle3 = (-1 in layer_ids)\n"
                                "            self.model.layers_to_capture = [val + 1 for val in layer_ids if val >= 0]")
    loop = "        aux_hidden_states = []\n"
    assert loop in patched
    patched = patched.replace(loop, loop + "        if self.capture_embedding_for_eagle3:\n"
                                           "            aux_hidden_states.append(hidden_states.clone())\n")

    def read(rel: str) -> str | None:
        return patched if rel == path else base(rel)

    got = _answer("0.5.6", "deepseek_v3", (-1, 2, 30), read)
    assert got.patched and got.embed_capture
    assert got.captures == (0, 3, 31)
    assert got.captures_cuda_graph == (2, 30, 58)
    assert got.captures_without_cuda_graph == (0, 3, 31)
    assert any("capture_embedding_for_eagle3" in n.detail for n in got.notes)


def test_qwen_moe_marks_add_up_under_cuda_graphs_on_0_5_6():
    """qwen2_moe.py marks layers and never clears them: the graph runner's default marks plus the ids."""
    got = _answer_arch("0.5.6", "qwen3_moe", 48, (2, 24, 45))
    assert got.captures is None and "fc takes 3 aux states" in (got.fails or "")
    assert got.captures_without_cuda_graph == (3, 25, 46) and got.fails_without_cuda_graph is None
    fixed = _answer_arch("0.5.12", "qwen3_moe", 48, (2, 24, 45))
    assert fixed.captures == fixed.captures_cuda_graph == (3, 25, 46)


def _answer_arch(version: str, arch: str, n: int, ids: Sequence[int] | None):
    return answer(_release(version), lookup(arch), n, ids)


def test_draft_loader_auto_spec_and_log_stream_by_release():
    old, new = _answer("0.5.6", "qwen3", None), _answer("0.5.23", "qwen3", None)
    assert old.loader.to_dict() == {"layers_prefix": False, "multi_layer": False, "applies": []}
    assert new.loader.to_dict() == {"layers_prefix": True, "multi_layer": True,
                                    "applies": ["fc_norm", "norm_output", "norm_before_fc"]}
    assert _answer("0.5.12", "qwen3", None).loader.applies == ("fc_norm", "norm_output")
    assert old.auto_spec == (5, 4, 8) and new.auto_spec == (3, 1, 4)  # 0.5.12 changed the fallback
    assert _answer("0.5.6", "llama", None).auto_spec == (5, 4, 8)
    assert _answer("0.5.6", "deepseek_v3", None).auto_spec == (3, 1, 4)
    for version in ("0.4.9", "0.5.6", "0.5.12", "0.5.23"):
        assert _answer(version, "llama", None).log_stream == "stderr"
    assert old.spec.steps_alone_fails and new.spec.steps_alone_fails
    assert _answer("0.4.9", "llama", None).spec.steps_alone_fails is None


def test_four_ids_fit_the_draft_only_from_0_5_12():
    """llama_eagle3.py sizes fc from len(ids) from 0.5.12; before, fc takes 3 states."""
    assert "fc takes 3 aux states" in (_answer("0.5.6", "qwen3", (-1, 2, 17, 32)).fails or "")
    assert _answer("0.5.12", "qwen3", (-1, 2, 17, 32)).captures == (0, 3, 18, 33)


def test_a_release_without_eagle3():
    got = _answer_arch("0.4.3", "llama", 32, None)
    assert got.captures is None and "no EAGLE3" in (got.fails or "")


def test_unreadable_model_file_falls_back_to_the_table():
    base = reader("0.5.6")

    def read(rel: str) -> str | None:
        return None if rel == "srt/models/llama.py" else base(rel)

    got = _answer("0.5.6", "llama", (2, 16, 29), read)
    assert got.captures == (3, 17, 30) and got.captures_cuda_graph == (2, 16, 29)
    assert got.source == "assumed from version 0.5.6"


def test_no_source_at_all_uses_the_nearest_release_read():
    release = read_release(None, version="0.5.6.post1")
    got = answer(release, lookup("deepseek_v3"), 61, (2, 30, 58))
    assert got.captures == (3, 31, 59) and got.captures_cuda_graph == (2, 30, 58)
    assert all(n.how == "assumed from version 0.5.6" for n in got.notes)
    assert release_table.nearest("0.5.17.post2") == "0.5.17"
    assert release_table.nearest("0.6.1") == release_table.LATEST


def test_target_from_config_reads_text_config_of_multimodal_targets():
    from eagle3_tui.errors import UserError
    from eagle3_tui.sglang.installed import target_from_config

    arch, n = target_from_config({"architectures": ["KimiK25ForConditionalGeneration"],
                                  "text_config": {"num_hidden_layers": 61}})
    assert (arch.key, n) == ("kimi_k25", 61)
    assert target_from_config({"architectures": ["Qwen3ForCausalLM"], "num_hidden_layers": 36})[1] == 36
    with pytest.raises(UserError):
        target_from_config({"architectures": ["FalconForCausalLM"], "num_hidden_layers": 32})
    with pytest.raises(UserError):
        target_from_config({"architectures": ["LlamaForCausalLM"]})


def test_kimi_k25_delegates_to_deepseek_v3():
    """kimi_k25.py hands the ids to its DeepseekV3ForCausalLM language model (0.5.10+)."""
    got = answer(_release("0.5.23"), lookup("kimi-k2.5"), 61, (2, 30, 58))
    assert got.captures == (2, 30, 58)
    assert any("hands the ids to its language model DeepseekV3ForCausalLM" in n.detail for n in got.notes)
    assert answer(_release("0.5.12"), lookup("kimi_k25"), 61, (2, 30, 58)).captures == (3, 31, 59)


def test_ids_for_boundaries_follow_the_release():
    """The ids to write for a wanted wiring: -1-based where SGLang adds 1, verbatim where it does not."""
    ds_new = answer(_release("0.5.23"), lookup("deepseek_v3"), 61, None)
    assert ds_new.ids_for((0, 3, 31)) == (0, 3, 31)
    assert ds_new.ids_for((2, 30, 58)) == (1, 29, 57)
    assert ds_new.ids_for((3, 31, 59)) == (3, 31, 59)
    ds_old = answer(_release("0.5.6"), lookup("deepseek_v3"), 61, None)
    assert ds_old.ids_for((3, 31, 59)) == (2, 30, 58)
    assert ds_old.ids_for((0, 3, 31)) is None  # needs the patch
    assert answer(_release("0.5.6"), lookup("qwen3"), 36, None).ids_for((0, 3, 18)) == (-1, 2, 17)
