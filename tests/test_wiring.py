"""Layer-id conventions and boundaries (research/eagle3_formats.md §0 table)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eagle3_tui.eagle import wiring as w


def test_sglang_default_and_shift_for_kimi() -> None:
    # Kimi-K2.5 / DeepSeek-V3: 61 layers; the seeds' config [2, 30, 58] captures the outputs of 2, 30, 58
    assert w.sglang_default_boundaries(61) == (2, 30, 58)
    assert w.sglang_ids_to_boundaries(None, 61) == (2, 30, 58)
    assert w.sglang_ids_to_boundaries([2, 30, 58], 61) == (3, 31, 59)
    # the seeds' fix: [-1, 2, 30] = embedding, out2, out30
    assert w.sglang_ids_to_boundaries([-1, 2, 30], 61) == (0, 3, 31)
    assert w.boundaries_to_sglang_ids((0, 3, 31)) == (-1, 2, 30)
    # order follows the capture loop, duplicates collapse
    assert w.sglang_ids_to_boundaries([30, 2, 2], 61) == (3, 31)


def test_llama_8b_table_row() -> None:
    n = 32
    assert w.default_ids("specforge", n) == (1, 15, 28)
    assert w.ids_to_boundaries("specforge", (1, 15, 28)) == (2, 16, 29)
    assert w.ids_to_boundaries("vllm", w.default_ids("vllm", n)) == (2, 16, 29)
    assert w.ids_to_boundaries("speculators-v1", w.default_ids("speculators-v1", n)) == (3, 17, 30, 32)
    assert w.default_ids("sglang", n) == (1, 15, 28)
    with pytest.raises(ValueError, match="unknown layer-id convention"):
        w.ids_to_boundaries("tensorrt", (1,))


def test_uncaptured_boundaries() -> None:
    # id 60 in a 61-layer model -> boundary 61 = after the last layer: SGLang's loop never gets there
    assert w.sglang_uncaptured(w.sglang_ids_to_boundaries([2, 30, 60], 61), 61) == (61,)
    assert w.sglang_uncaptured((0, 3, 31), 61) == ()


@given(st.sampled_from(w.CONVENTIONS), st.lists(st.integers(-1, 200), min_size=1, max_size=5))
def test_round_trip(conv: str, ids: list[int]) -> None:
    assert w.boundaries_to_ids(conv, w.ids_to_boundaries(conv, ids)) == tuple(ids)


def test_config_ids_nested_vs_top_level() -> None:
    assert w.config_layer_ids({"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 5, 8]}}) == ((1, 5, 8), True)
    assert w.config_layer_ids({"eagle_aux_hidden_state_layer_ids": [2, 6, 9]}) == ((2, 6, 9), False)
    assert w.config_layer_ids({}) == (None, True)
    assert w.num_aux_from_config({"eagle_aux_hidden_state_layer_ids": [2, 6, 9, 12]}) == 4


def test_candidate_wirings_on_seed_like_data() -> None:
    # data slots [embed, out2, out5, out8] of a 12-layer target; draft takes 3
    slots = (0, 3, 6, 9)
    ws = w.candidate_wirings(num_slots=4, num_aux=3, slot_boundaries=slots, num_layers=12,
                             config_ids=None, extra=["-1,2,5", "slots:1,2,3", "vllm:0,3,6", "h:0,6,9"])
    by = {x.name: x for x in ws}
    assert by["training"].slots == (0, 1, 2) and by["training"].boundaries == (0, 3, 6)
    # SGLang's default (2, 6, 9) is not in the data: named, not measured
    assert by["serving default"].slots == () and by["serving default"].boundaries == (2, 6, 9)
    assert "no slot for boundary 2" in by["serving default"].note
    assert by["draft config"].slots == () and "no slot for boundary 2" in by["draft config"].note
    assert by["-1,2,5"].slots == (0, 1, 2)
    assert by["vllm:0,3,6"].slots == (0, 1, 2)
    assert by["h:0,6,9"].slots == (0, 2, 3)


def test_candidate_wirings_sglang_default_present() -> None:
    ws = w.candidate_wirings(num_slots=4, num_aux=3, slot_boundaries=(0, 2, 6, 9), num_layers=12,
                             config_ids=(1, 5, 8), config_ids_read=False)
    by = {x.name: x for x in ws}
    assert by["serving default"].slots == (1, 2, 3) and by["serving default"].source == "SGLang default"
    # top-level ids are not read by SGLang: the config wiring is the default
    assert by["draft config"].boundaries == (2, 6, 9)


def test_unknown_slot_boundaries() -> None:
    ws = w.candidate_wirings(num_slots=4, num_aux=3)
    assert [x.name for x in ws] == ["training", "serving default"]
    assert ws[0].boundaries is None and ws[1].slots == (1, 2, 3)


@pytest.mark.parametrize(
    ("spec", "msg"),
    [("1,2", "names 2 hidden states but the draft's fc takes 3"),
     ("slots:0,1,7", "slot 7 does not exist"),
     ("foo:1,2,3", "is not understood"),
     ("a,b,c", "not a list of integer layer ids")],
)
def test_bad_wiring_specs(spec: str, msg: str) -> None:
    with pytest.raises(ValueError, match=msg):
        w.parse_wiring(spec, num_slots=4, num_aux=3, slot_boundaries=(0, 3, 6, 9), num_layers=12)


def test_too_few_slots() -> None:
    with pytest.raises(ValueError, match="2 hidden-state slots but the draft's fc takes 3"):
        w.candidate_wirings(num_slots=2, num_aux=3)


def test_format_boundaries() -> None:
    assert w.format_boundaries((0, 3, 31)) == "embed, h3, h31"
    assert w.format_boundaries(None) == "?"


def test_wiring_with_the_wrong_count_is_named_not_run() -> None:
    ws = w.candidate_wirings(num_slots=4, num_aux=4, slot_boundaries=(0, 2, 6, 9), num_layers=12)
    by = {x.name: x for x in ws}
    assert by["training"].slots == (0, 1, 2, 3)
    assert by["serving default"].slots == () and "feeds 3 hidden states but the draft's fc takes 4" in by["serving default"].note


def test_ids_in_any_convention_reach_fc_in_ascending_order() -> None:
    """Engines capture inside their layer loop: vllm:29,2,16 is fed as boundaries 2, 16, 29."""
    kw = {"num_slots": 4, "num_aux": 3, "slot_boundaries": (2, 3, 16, 29), "num_layers": 32}
    assert w.parse_wiring("vllm:29,2,16", **kw).boundaries == (2, 16, 29)
    assert w.parse_wiring("specforge:28,1,15", **kw).boundaries == (2, 16, 29)
    assert w.parse_wiring("vllm:29,2,16", **kw).slots == (0, 2, 3)
    with pytest.raises(ValueError, match="repeats a layer id"):
        w.parse_wiring("vllm:2,2,16", **kw)


def test_serving_fallback_never_feeds_the_verifier_state() -> None:
    ws = w.candidate_wirings(num_slots=4, num_aux=3, final_slot=3)
    assert {x.name: x.slots for x in ws}["serving default"] == (0, 1, 2)
    ws = w.candidate_wirings(num_slots=4, num_aux=3)
    assert {x.name: x.slots for x in ws}["serving default"] == (1, 2, 3)
