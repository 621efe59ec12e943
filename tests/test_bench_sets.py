"""Per-request accept length on the traffic served: prompts files with sets (MT-Bench's question.jsonl, a mix
with a `dataset` field), the per-set summary, the draft's published figure from its config or model card, and
a benchmark of the sim server grouped by set."""

from __future__ import annotations

import asyncio
import json

import pytest

from eagle3_tui.commands.hostcmds import format_bench
from eagle3_tui.eagle.published import from_config, from_model_card, published_accept_length
from eagle3_tui.errors import UserError
from eagle3_tui.sglang.client import (
    BenchResult,
    Prompt,
    SGLangClient,
    accept_by_set,
    load_prompt_sets,
    run_benchmark,
)

# MT-Bench's data/mt_bench/question.jsonl lines, as FastChat ships them
MT_BENCH = "\n".join(json.dumps(x) for x in (
    {"question_id": 81, "category": "writing", "turns": ["Compose an engaging travel blog post about a recent trip "
                                                         "to Hawaii.", "Rewrite your previous response."]},
    {"question_id": 101, "category": "reasoning", "turns": ["Imagine you are participating in a race with a group "
                                                            "of people.", "What if you overtook the last person?"]},
    {"question_id": 121, "category": "coding", "turns": ["Develop a Python program that reads all the text files "
                                                         "under a directory.", "Can you parallelize it?"]},
    {"question_id": 82, "category": "writing", "turns": ["Draft a professional email seeking your supervisor's "
                                                         "feedback.", "Take a moment to evaluate."]},
))


def test_prompt_sets_from_the_files_people_have() -> None:
    got = load_prompt_sets(MT_BENCH)
    assert [p.set for p in got] == ["writing", "reasoning", "coding", "writing"]
    assert got[0].text.startswith("Compose an engaging travel blog post")
    mix = '{"prompt": "a", "dataset": "sharegpt"}\n{"text": "b", "source": "gsm8k"}\nplain line\n'
    assert load_prompt_sets(mix) == [Prompt("a", "sharegpt"), Prompt("b", "gsm8k"), Prompt("plain line", "all")]
    assert load_prompt_sets('[{"prompt": "x", "set": "s1"}, "y"]') == [Prompt("x", "s1"), Prompt("y", "all")]
    with pytest.raises(UserError, match="not valid JSON"):
        load_prompt_sets('[{"prompt": "x"}')
    with pytest.raises(UserError, match="line 2"):
        load_prompt_sets('{"prompt": "x", "set": "a"}\n{bad\n')


def test_accept_length_by_set() -> None:
    pairs = [("writing", 2.0), ("coding", 4.0), ("writing", 3.0), ("coding", 5.0), ("coding", 6.0)]
    out = {s.name: s for s in accept_by_set(pairs)}
    assert list(out) == ["all", "writing", "coding"]
    assert out["writing"].requests == 2 and out["writing"].mean == 2.5 and out["writing"].p50 == 2.5
    assert out["coding"].p10 == pytest.approx(4.2) and out["coding"].p90 == pytest.approx(5.8)
    assert out["all"].requests == 5 and out["all"].mean == pytest.approx(4.0)
    only = accept_by_set([("all", 2.0), ("all", 3.0)])  # one set: no separate "all" line
    assert [s.name for s in only] == ["all"]
    assert accept_by_set([]) == []


def test_published_accept_length_from_config_and_model_card() -> None:
    got = from_config({"architectures": ["LlamaForCausalLMEagle3"], "eagle_config": {"accept_length": 3.1}})
    assert got is not None and got.accept_len == 3.1 and got.source == "config.json eagle_config.accept_length"
    assert from_config({"accept_length": 120}) is None  # not an accept length
    card = ("# EAGLE-3 draft for Llama-3.1-8B-Instruct\n\nTrained on ShareGPT and UltraChat.\n\n"
            "Average acceptance length on MT-Bench: 3.42 (temperature 0, 7 steps)\n")
    got = from_model_card(card)
    assert got is not None and got.accept_len == 3.42 and got.source == "README.md line 5"
    table = ("## Results\n\n| Benchmark | Accept Length | Speedup |\n|---|---:|---:|\n| MT-Bench | 2.87 | 1.9x |\n"
             "| HumanEval | 3.30 | 2.2x |\n")
    got = from_model_card(table)
    assert got is not None and got.accept_len == 2.87 and got.source == "README.md line 5"
    assert from_model_card("An EAGLE-3 draft. Steps 3, topk 1.") is None
    both = published_accept_length({"accept_length": 2.5}, card)
    assert both is not None and both.accept_len == 2.5  # the config's first


def test_the_bench_result_shows_sets_and_the_published_figure() -> None:
    r = BenchResult(num_prompts=4, concurrency=2, max_tokens=16, ok=4, errors=0, duration_s=1.0, output_tokens=64,
                    output_tps=64.0, latency_p50_s=0.5, latency_p90_s=0.6, accept_len_client=2.5, spec_verify_ct=26,
                    sets=accept_by_set([("writing", 2.0), ("coding", 3.0)]), published_accept_len=3.42,
                    published_source="/models/draft/README.md line 5")
    text = format_bench(r, None)
    assert "writing     1  2.00  2.00 / 2.00 / 2.00" in text
    assert "published         3.42 (/models/draft/README.md line 5)" in text
    assert r.as_dict()["sets"][1] == {"name": "writing", "requests": 1, "mean": 2.0, "p10": 2.0, "p50": 2.0,
                                      "p90": 2.0}


def test_a_benchmark_of_the_sim_grouped_by_set(sim_server) -> None:
    srv = sim_server("--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
                     "--speculative-num-draft-tokens", "4", "--speculative-eagle-topk", "1")  # fmt: skip
    prompts = load_prompt_sets(MT_BENCH)

    async def go() -> BenchResult:
        async with SGLangClient(srv.base_url) as c:
            return await run_benchmark(c, prompts, num_prompts=8, concurrency=2, max_tokens=24)

    r = asyncio.run(go())
    by = {s.name: s for s in r.sets}
    assert set(by) == {"all", "writing", "reasoning", "coding"}
    assert by["writing"].requests == 4 and by["coding"].requests == 2 and by["all"].requests == r.ok == 8
    for s in r.sets:  # each request's accept length is SGLang's (completion tokens / verify steps), 1..steps+1
        assert 1.0 <= s.p10 <= s.p50 <= s.p90 <= 4.0 and s.p10 <= s.mean <= s.p90
    weighted = sum(by[n].mean * by[n].requests for n in ("writing", "reasoning", "coding")) / 8
    assert by["all"].mean == pytest.approx(weighted)


# `--log-requests` finish lines as SGLang 0.5.x writes them (utils/request_logger.py log_finished_request: the
# text format at --log-requests-level 0, which skips text and output ids; and --log-requests-format json).
FINISH_TEXT = (
    "[2026-05-02 10:00:01] Finish: obj=GenerateReqInput(validation_time=1.2e-05, received_time=1777715999.5, "
    "rid='a1b2', http_worker_ipc=None, return_logprob=False, stream=False, log_metrics=True), out={'meta_info': "
    "{'id': 'a1b2', 'finish_reason': {'type': 'length', 'length': 64}, 'prompt_tokens': 12, 'weight_version': "
    "'default', 'total_retractions': 0, 'completion_tokens': 64, 'cached_tokens': 0, 'spec_accept_rate': 0.43, "
    "'spec_accept_length': 2.2857142857142856, 'spec_accept_token_num': 36, 'spec_draft_token_num': 84, "
    "'spec_verify_ct': 28, 'e2e_latency': 0.81}}"
)
FINISH_OLD = (  # a build before 2025-10: spec_verify_ct only
    "[2025-09-02 10:00:02] Finish: obj=GenerateReqInput(rid='c3'), out={'meta_info': {'id': 'c3', "
    "'prompt_tokens': 9, 'completion_tokens': 30, 'cached_tokens': 0, 'spec_verify_ct': 20, 'e2e_latency': 0.4}}"
)
FINISH_JSON = "[2026-05-02 10:00:03] " + json.dumps({
    "timestamp": "2026-05-02T10:00:03.120", "event": "request.finished", "rid": "d4",
    "obj": {"rid": "d4", "stream": False},
    "out": {"meta_info": {"id": "d4", "completion_tokens": 40, "spec_accept_length": 3.3333333333333335,
                          "spec_verify_ct": 12, "e2e_latency": 0.3}}})


def test_per_request_accept_length_from_the_servers_finish_lines() -> None:
    from eagle3_tui.sglang.requests import finished_accept_lengths, logged_requests

    assert finished_accept_lengths(FINISH_TEXT) == [pytest.approx(64 / 28)]
    assert finished_accept_lengths(FINISH_OLD) == [1.5]
    assert finished_accept_lengths(FINISH_JSON) == [pytest.approx(40 / 12)]
    assert finished_accept_lengths("[2026-05-02 10:00:01] Receive: obj=GenerateReqInput(rid='a1b2')") == []
    lines = [x.encode() + b"\n" for x in (FINISH_TEXT, "garbage", FINISH_OLD, FINISH_JSON)]
    assert len(logged_requests(lines)) == 3


def test_replay_shows_the_live_traffics_per_request_accept_length(tmp_path, capsys) -> None:
    from eagle3_tui.cli import main

    decode = ("[2026-05-02 10:00:00 TP0] Decode batch. #running-req: 3, #token: 300, token usage: 0.01, "
              "accept len: 2.40, accept rate: 0.60, cuda graph: True, gen throughput (token/s): 80.00, #queue-req: 0, ")
    log = tmp_path / "server.log"
    log.write_text("\n".join([decode, FINISH_TEXT, FINISH_OLD, FINISH_JSON, decode]) + "\n")
    assert main(["replay", str(log), "--requests"]) == 0
    out = capsys.readouterr().out
    mean = (64 / 28 + 1.5 + 40 / 12) / 3
    assert f"per request: 3 finished, accept length mean {mean:.2f}" in out
    plain = tmp_path / "plain.log"
    plain.write_text(decode + "\n")
    assert main(["replay", str(plain), "--requests"]) == 0
    assert "no finished request with spec fields" in capsys.readouterr().out
    from eagle3_tui.commands.replay import logged_requests_of

    with pytest.raises(UserError, match="not stdin"):  # the file is read twice: stdin cannot be
        logged_requests_of("-")
