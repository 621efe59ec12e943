"""Advice that knows the load: the running requests read from SGLang's decode lines as it writes them, the
CUDA-graph limit from /server_info (0.5.6 ServerArgs.cuda_graph_max_bs / cuda_graph_bs) or the launch flags,
a tree too wide for the batch, a benchmark at another concurrency, and the cost model with batch and width."""

from __future__ import annotations

import argparse

import pytest

from eagle3_tui.commands.hostcmds import _concurrency
from eagle3_tui.doctor import Facts, diagnose
from eagle3_tui.doctor import load_rules as L
from eagle3_tui.doctor.advice import CostModel, Measured, batch_of, better_flags, calibrate, measured_configs
from eagle3_tui.eagle.predict import Prediction
from eagle3_tui.eagle.spec_config import STANDARD_GRID, SpecConfig
from eagle3_tui.sglang import launch
from eagle3_tui.sglang.logline import DecodeStats, parse_line
from eagle3_tui.telemetry.ledger import LedgerRow
from eagle3_tui.telemetry.metrics import Telemetry


def _decode(running: int, second: int) -> str:
    """A decode line as SGLang 0.5.x writes it (scheduler_metrics_mixin.log_decode_stats)."""
    return (f"[2025-11-29 07:07:{second:02d} TP0] Decode batch. #running-req: {running}, #token: 1320, token usage: "
            f"0.19, accept len: 1.59, accept rate: 0.59, cuda graph: True, gen throughput (token/s): 55.60, "
            f"#queue-req: 0, ")


def _load(*running: int) -> tuple[float | None, float | None]:
    t = Telemetry()
    for i, n in enumerate(running):
        ev = parse_line(_decode(n, i))
        assert isinstance(ev, DecodeStats)
        t.ingest(ev)
    s = t.summary(120.0)
    return s.means["running_req"], s.peaks["running_req"]


def _argv(*extra: str, steps: int = 3, topk: int = 1, draft: int = 4) -> list[str]:
    return ["python", "-m", "sglang.launch_server", "--model-path", "/m", "--speculative-algorithm", "EAGLE3",
            "--speculative-draft-model-path", "/d", "--speculative-num-steps", str(steps),
            "--speculative-eagle-topk", str(topk), "--speculative-num-draft-tokens", str(draft), *extra]


def _facts(argv: list[str], running: tuple[int, ...], **kw) -> Facts:
    mean, peak = _load(*running)
    la = launch.parse_launch(argv)
    return Facts(launch=la, effective=launch.effective(la), running_reqs_mean=mean, running_reqs_peak=peak,
                 launch_source="process 4242", log_path="/var/log/sglang.log", **kw)


def test_running_requests_from_decode_lines() -> None:
    mean, peak = _load(7, 2, 6, 41)
    assert mean == pytest.approx(14.0) and peak == 41


def test_cuda_graph_bs_against_the_running_requests_seen() -> None:
    info = {"cuda_graph_max_bs": 32, "cuda_graph_bs": None, "disable_cuda_graph": False}
    f = L.cuda_graph_bs(_facts(_argv(), (24, 40, 48), server_args=info))
    assert f is not None and f.severity == "warning" and "48 requests, above --cuda-graph-max-bs 32" in f.title
    assert [e.source for e in f.evidence] == ["/var/log/sglang.log", "/server_info cuda_graph_max_bs"]
    assert "--cuda-graph-max-bs to at least 48" in f.fix
    assert L.cuda_graph_bs(_facts(_argv(), (24, 30, 32), server_args=info)) is None  # within the graphs
    # the launch flags when /server_info was not read: the list's largest, or the max
    f = L.cuda_graph_bs(_facts(_argv("--cuda-graph-bs", "1", "2", "4", "8", "--port", "30000"), (12,)))
    assert f is not None and f.evidence[1].source == "process 4242: --cuda-graph-bs"
    f = L.cuda_graph_bs(_facts(_argv("--cuda-graph-max-bs", "16"), (20,)))
    assert f is not None and "--cuda-graph-max-bs 16" in f.evidence[1].source
    # graphs off, or the limit unknown (SGLang chose it from GPU memory): silent
    assert L.cuda_graph_bs(_facts(_argv("--cuda-graph-max-bs", "16", "--disable-cuda-graph"), (20,))) is None
    assert L.cuda_graph_bs(_facts(_argv(), (200,))) is None


def test_a_tree_too_wide_for_the_batch_served() -> None:
    tree = _argv(steps=5, topk=4, draft=16)
    f = L.tree_too_wide(_facts(tree, (38, 40, 42)))
    assert f is not None and f.severity == "warning" and "16 draft tokens (topk 4) at ~40 requests" in f.title
    assert "--speculative-eagle-topk 1 --speculative-num-draft-tokens 6" in f.fix and "sweep -c 40" in f.fix
    assert L.tree_too_wide(_facts(tree, (2, 4))) is None  # 3 requests x 16 tokens: memory-bound, the tree is cheap
    assert L.tree_too_wide(_facts(_argv(steps=7, topk=1, draft=8), (60,))) is None  # a chain
    assert L.TREE_TOO_WIDE in [x.rule_id for x in diagnose(_facts(tree, (40,)))]


def test_a_benchmark_at_another_load() -> None:
    f = L.bench_load(_facts(_argv(), (40,), bench_concurrency=4, bench_source="this session's benchmark"))
    assert f is not None and f.severity == "info" and "bench -c match" in f.fix
    assert L.bench_load(_facts(_argv(), (40,), bench_concurrency=32)) is None
    assert L.bench_load(_facts(_argv(), (40,))) is None


TRUE = CostModel(t0=0.012, c_verify=0.00008, c_draft=0.0001, calibrated_on=0, baseline=True)
ACCEPT = {(1, 1, 2): 1.5, (3, 1, 4): 2.4, (7, 1, 8): 2.9, (5, 4, 16): 3.4, (6, 8, 32): 3.6}


def _measured(*at: tuple[tuple[int, int, int], int]) -> list[Measured]:
    return [Measured(SpecConfig(*c), ACCEPT[c], TRUE.tok_s(SpecConfig(*c), ACCEPT[c], b), b) for c, b in at]


def test_the_cost_model_fits_batch_and_tree_width() -> None:
    base_tps = 8 / TRUE.t0  # a baseline at 8 requests: 8 tokens per iteration
    m = calibrate(_measured(((3, 1, 4), 8), ((5, 4, 16), 8), ((7, 1, 8), 32)), base_tps, baseline_batch=8)
    assert m is not None and m.t0 == pytest.approx(TRUE.t0)
    assert m.c_verify == pytest.approx(TRUE.c_verify, rel=1e-6) and m.c_draft == pytest.approx(TRUE.c_draft, rel=1e-6)
    one, many = SpecConfig(5, 4, 16), SpecConfig(7, 1, 8)
    # at one request the wide tree is fastest; at sixty-four the chain
    assert m.tok_s(one, ACCEPT[(5, 4, 16)], 1) > m.tok_s(many, ACCEPT[(7, 1, 8)], 1)
    assert m.tok_s(one, ACCEPT[(5, 4, 16)], 64) < m.tok_s(many, ACCEPT[(7, 1, 8)], 64)


def test_better_flags_at_the_load_served() -> None:
    measured = _measured(((1, 1, 2), 8), ((3, 1, 4), 8), ((5, 4, 16), 8))
    preds = tuple(Prediction(SpecConfig(*c), a) for c, a in ACCEPT.items())

    def advice(running: tuple[int, ...]):
        return better_flags(_facts(_argv(steps=5, topk=4, draft=16), running, baseline_tps=8 / TRUE.t0,
                                   baseline_batch=8, predictions=preds, measured_configs=tuple(measured)))

    # the tree served: the fastest at one request (nothing to advise), at sixty-four a chain beats it
    assert advice((1, 1)) is None
    high = advice((64, 64))
    assert high is not None and ", topk 1, " in high.title
    assert "predicted at 64 request(s) in flight (running requests in the server log (mean))" in high.evidence[0].detail


def test_ledger_rows_carry_their_concurrency() -> None:
    rows = [LedgerRow(1, 0.0, "benchmark", "h", {"steps": 3, "topk": 1, "draft_tokens": 4},
                      {"accept_len": 2.4, "tok_s": 500.0, "concurrency": 8}),
            LedgerRow(2, 0.0, "benchmark", "h", {"steps": 5, "topk": 4, "draft_tokens": 16},
                      {"accept_len": 3.0, "tok_s": 90.0})]  # a row from before the field: one request
    got = {m.config: m.batch for m in measured_configs(rows, None)}
    assert got == {SpecConfig(3, 1, 4): 8, SpecConfig(5, 4, 16): 1}
    assert batch_of({"concurrency": True}) == 1


def test_the_sweep_grid_has_deeper_chains() -> None:
    chains = [c for c in STANDARD_GRID if c.topk == 1]
    assert {c.steps for c in chains} >= {7, 8} and all(c.draft_tokens == c.steps + 1 for c in chains)


def test_bench_concurrency_may_match_the_deployment() -> None:
    assert _concurrency("match") == "match" and _concurrency("12") == 12
    with pytest.raises(argparse.ArgumentTypeError):
        _concurrency("lots")


async def test_the_sessions_served_concurrency(tmp_path) -> None:
    """`bench -c match`: the decode lines' running requests (no server needed for them); none seen and no
    server to ask is one clear error."""
    from eagle3_tui.errors import UserError
    from eagle3_tui.profile import Profile
    from eagle3_tui.session import Session

    session = Session(Profile(name="load", local=True, port=1, state_dir=str(tmp_path / "st")))
    try:
        with pytest.raises(UserError, match="no running requests seen"):
            await session.bench.served_concurrency()
        for i, n in enumerate((30, 34, 38)):
            ev = parse_line(_decode(n, i))
            assert isinstance(ev, DecodeStats)
            session.telemetry.ingest(ev)
        c, seen = await session.bench.served_concurrency()
        assert c == 34 and "#running-req, mean 34.0" in seen
    finally:
        await session.close()


def test_sweep_rows_say_their_concurrency_and_prompts() -> None:
    from eagle3_tui.session.sweep import SweepStep

    row = SweepStep(SpecConfig(7, 1, 8), 2.9, 2.7, 310.0, prompt_format="chat", concurrency=16).to_dict()
    assert row["concurrency"] == 16 and row["prompt_format"] == "chat" and batch_of(row) == 16


def test_better_flags_on_vllm_advises_a_chain_in_vllms_terms() -> None:
    """vLLM drafts chains only: the advice ranks only the chains (the tree that would win is not servable),
    the fix names num_speculative_tokens inside --speculative-config, and the Config pane's preset serves it."""
    from eagle3_tui.engines import get_engine
    from eagle3_tui.session.terms import terms_for

    measured = _measured(((1, 1, 2), 8), ((3, 1, 4), 8), ((5, 4, 16), 8))
    preds = tuple(Prediction(SpecConfig(*c), a) for c, a in ACCEPT.items())
    facts = Facts(engine="vllm", engine_release="0.32.0+cpu", served_config=SpecConfig(1, 1, 2),
                  running_reqs_mean=1.0, baseline_tps=8 / TRUE.t0, baseline_batch=8, predictions=preds,
                  measured_configs=tuple(measured))
    sglang = better_flags(Facts(**{**facts.__dict__, "engine": "sglang"}))
    assert sglang is not None and sglang.title.startswith("steps 5, topk 4, draft 16")  # SGLang: a tree
    advice = better_flags(facts)
    assert advice is not None and advice.title.startswith("steps 7, topk 1, draft 8"), advice.title
    assert advice.fix.startswith("Serve num_speculative_tokens 7 in --speculative-config ")
    assert "better-flags" in {f.rule_id for f in diagnose(facts)}
    presets = {p.name: p for p in terms_for(get_engine("vllm")).advice_presets([advice])}
    assert dict(presets["better-flags"].flags) == {"num_speculative_tokens": 7}
    sglang_preset = terms_for(get_engine("sglang")).advice_presets([sglang])[0]
    assert dict(sglang_preset.flags) == {"speculative-num-steps": 5, "speculative-eagle-topk": 4,
                                         "speculative-num-draft-tokens": 16}


STEP_ACCEPT = (0.7, 0.6, 0.55, 0.5, 0.5, 0.5)


def _tree_facts(steps: int, topk: int, draft: int, running: tuple[int, ...], **kw) -> Facts:
    measured = _measured(((1, 1, 2), 8), ((3, 1, 4), 8), ((5, 4, 16), 8))
    preds = tuple(Prediction(SpecConfig(*c), a) for c, a in ACCEPT.items())
    more = {"baseline_tps": 8 / TRUE.t0, "baseline_batch": 8, "predictions": preds,
            "measured_configs": tuple(measured), "step_accept": STEP_ACCEPT, **kw}
    return _facts(_argv(steps=steps, topk=topk, draft=draft), running, **more)


def test_a_tree_at_two_to_seven_requests_gets_the_cost_models_chain() -> None:
    from eagle3_tui.doctor.advice import TREE_LOW_LOAD, tree_low_load
    from eagle3_tui.eagle.predict import chain_accept_len

    # 6/8/32 at four requests: the model (fitted to the measured rows) prefers a chain of the same steps
    wide = tree_low_load(_tree_facts(6, 8, 32, (4, 4, 4)))
    assert wide is not None and wide.rule_id == TREE_LOW_LOAD and wide.severity == "warning"
    chain = SpecConfig(6, 1, 7)
    m = calibrate(_measured(((1, 1, 2), 8), ((3, 1, 4), 8), ((5, 4, 16), 8)), 8 / TRUE.t0, baseline_batch=8)
    assert m is not None
    t_tree, t_chain = m.tok_s(SpecConfig(6, 8, 32), 3.6, 4), m.tok_s(chain, chain_accept_len(STEP_ACCEPT), 4)
    assert t_chain > t_tree
    assert f"~{t_chain:.1f} tok/s against the tree's ~{t_tree:.1f}" in wide.title
    assert "--speculative-eagle-topk 1 --speculative-num-draft-tokens 7" in wide.fix
    assert any(f"~{t_chain:.1f} tok/s at 4" in e.detail for e in wide.evidence)
    # 5/4/16 at two requests: the tree still pays, and the doctor says so with both numbers
    holds = tree_low_load(_tree_facts(5, 4, 16, (2, 2)))
    assert holds is not None and holds.severity == "info" and "the tree still pays" in holds.title
    # diagnose runs it
    assert TREE_LOW_LOAD in {x.rule_id for x in diagnose(_tree_facts(6, 8, 32, (4, 4)))}


def test_tree_low_load_stays_in_its_range_and_says_what_is_missing() -> None:
    from eagle3_tui.doctor.advice import tree_low_load

    assert tree_low_load(_tree_facts(6, 8, 32, (1, 1))) is None  # one request: the tree is nearly free
    assert tree_low_load(_tree_facts(6, 8, 32, (12, 12))) is None  # eight and up: tree-too-wide's ground
    assert tree_low_load(_tree_facts(3, 1, 4, (4, 4))) is None  # a chain already
    bare = tree_low_load(_facts(_argv(steps=6, topk=8, draft=32), (4, 4)))
    assert bare is not None and bare.severity == "info" and "no chain comparison yet" in bare.title
    missing = next(e.detail for e in bare.evidence if e.source == "missing")
    assert "cost model" in missing and "accept length" in missing
    assert "sweep -c 4" in bare.fix
