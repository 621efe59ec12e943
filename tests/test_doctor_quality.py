"""Accept length that is low or falling once the wiring is right: the known engine bugs (read against the real
SGLang wheels), a drift over hours (real vLLM and SGLang log lines as the engines write them, fed through the
session's telemetry), the draft's quality by prompt set against its published figure (the benchmark's own
per-set summary and model-card reader), multistep-decay's fix, and the commands that isolate an engine bug."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from eagle3_tui.doctor import Facts, diagnose
from eagle3_tui.doctor import engine_bugs as EB
from eagle3_tui.doctor import quality_rules as Q
from eagle3_tui.doctor.advice import MULTISTEP_DECAY
from eagle3_tui.eagle.draft_config import DraftConfig
from eagle3_tui.eagle.published import from_model_card
from eagle3_tui.engines import get_engine
from eagle3_tui.session.events import ServerView
from eagle3_tui.session.host.facts import FactsSnapshot, build_facts
from eagle3_tui.sglang.installed import read_release
from eagle3_tui.sglang.launch import parse_launch
from eagle3_tui.sglang.logline import DecodeStats, parse_line
from eagle3_tui.sglang.requests import accept_by_set
from eagle3_tui.telemetry.metrics import Telemetry
from tests.sglang_wheels import reader

SGLANG = ("python -m sglang.launch_server --model-path /models/target --speculative-algorithm EAGLE3 "
          "--speculative-draft-model-path /models/draft --speculative-num-steps 3 --speculative-eagle-topk 1 "
          "--speculative-num-draft-tokens 4")
VLLM = ("vllm serve /models/target --speculative-config "
        "'{\"method\": \"eagle3\", \"model\": \"/models/draft\", \"num_speculative_tokens\": 3}'")
VLLM_LOG = Path(__file__).parent / "vllm_samples" / "serve_trained.log"


def found(f: Facts) -> dict[str, object]:
    return {x.rule_id: x for x in diagnose(f)}


# --- the known-bugs table against the real wheels ----------------------------------------------------------


@pytest.mark.parametrize(("version", "has_fix"), [("0.4.9", False), ("0.4.10", False), ("0.5.2", False),
                                                   ("0.5.3", True), ("0.5.6", True)])
def test_the_radix_cache_row_matches_the_wheels(version, has_fix):
    src = reader(version)("srt/mem_cache/radix_cache.py") or ""
    assert ("convert_to_bigram_key" in src) is has_fix  # defined there in 0.5.3, imported from utils by 0.5.6
    row = next(b for b in EB.KNOWN_BUGS if b.key == "sglang-radix-bigram")
    assert EB.in_range(row, version) is (not has_fix)


def test_a_known_engine_bug_on_the_release_served():
    f = Facts(launch=parse_launch(shlex.split(SGLANG)), release=read_release(reader("0.5.2")))
    hit = found(f)[EB.KNOWN_ENGINE_BUG]
    assert hit.severity == "warning" and "SGLang 0.5.2" in hit.title
    assert "--disable-radix-cache" in hit.fix and "0.5.3" in hit.fix
    assert any("#10846" in e.source for e in hit.evidence)
    off = Facts(launch=parse_launch(shlex.split(SGLANG + " --disable-radix-cache")),
                release=read_release(reader("0.5.2")))
    assert EB.KNOWN_ENGINE_BUG not in found(off)
    assert EB.KNOWN_ENGINE_BUG not in found(Facts(launch=parse_launch(shlex.split(SGLANG)),
                                                  release=read_release(reader("0.5.3"))))
    # an unreadable release says nothing rather than guessing
    assert EB.in_range(EB.KNOWN_BUGS[0], "garbage") is None and EB.in_range(EB.KNOWN_BUGS[0], None) is None


# --- drift over hours -----------------------------------------------------------------------------------------


def _vllm_lines(accept: float, running: int, stamp: str) -> list[str]:
    """The Engine and SpecDecoding lines of the captured vLLM 0.32 log, with another time, load and accept length."""
    lines = VLLM_LOG.read_text().splitlines()
    engine = next(x for x in lines if "Engine 000:" in x)
    spec = next(x for x in lines if "SpecDecoding metrics:" in x)
    engine = re.sub(r"Running: \d+ reqs", f"Running: {running} reqs", engine)
    spec = re.sub(r"Mean acceptance length: [\d.]+", f"Mean acceptance length: {accept:.2f}", spec)
    return [re.sub(r"\d\d-\d\d \d\d:\d\d:\d\d", stamp, x) for x in (engine, spec)]


def _vllm_telemetry(points: list[tuple[float, float, int]]) -> Telemetry:
    """(seconds from the start, accept length, running requests) through vLLM's log feed into the telemetry."""
    t = Telemetry()
    feed = get_engine("vllm").log_feed()
    for s, accept, running in points:
        hh, mm = divmod(int(s) // 60, 60)
        for line in _vllm_lines(accept, running, f"12-03 {10 + hh:02d}:{mm:02d}:00"):
            for ev in feed.feed(line):
                t.ingest_spec(ev, 1_000_000.0 + s)  # type: ignore[arg-type]
    return t


def _vllm_facts(t: Telemetry, release: str = "0.19.1", flags: str = "") -> Facts:
    server = ServerView(engine="vllm", version=release, pid=4242, speculative=True)
    return build_facts(FactsSnapshot(server=server, launch_argv=tuple(shlex.split(VLLM + flags)),
                                     accept_history=t.drift.slices()))


def test_accept_falling_over_hours_at_the_same_load_on_vllm():
    # three hours, a point every five minutes, four requests in flight throughout, 2.62 falling to 2.10
    pts = [(i * 300.0, 2.62 - 0.52 * i / 35, 4) for i in range(36)]
    f = _vllm_facts(_vllm_telemetry(pts))
    hit = found(f)[Q.ACCEPT_DRIFT]
    assert hit.severity == "warning" and "vllm-prefix-cache-drift" in hit.title
    assert re.search(r"fell from 2\.5\d to 2\.1\d over 3\.0 h at the same load", hit.title)
    assert "--no-enable-prefix-caching`" in hit.fix and "Restart" in hit.fix
    assert any("#41838" in e.source for e in hit.evidence)
    assert any("~4 requests in flight" in e.detail for e in hit.evidence)
    bug = found(f)[EB.KNOWN_ENGINE_BUG]
    assert bug.severity == "info" and "0.19.1" in bug.title
    # already off: the known bug does not apply, and the fix does not repeat the flag
    off = found(_vllm_facts(_vllm_telemetry(pts), flags=" --no-enable-prefix-caching"))
    assert EB.KNOWN_ENGINE_BUG not in off and "--no-enable-prefix-caching`" not in off[Q.ACCEPT_DRIFT].fix


def test_no_drift_where_the_load_changed_or_the_run_is_short_or_restarted():
    # the fall comes with the load rising from 2 to 32 requests: the slices at the other load are left out
    pts = [(i * 300.0, 2.62 if i < 18 else 2.0, 2 if i < 18 else 32) for i in range(36)]
    assert Q.ACCEPT_DRIFT not in found(_vllm_facts(_vllm_telemetry(pts)))
    flat = [(i * 300.0, 2.6 + (0.02 if i % 2 else -0.02), 4) for i in range(36)]
    assert Q.ACCEPT_DRIFT not in found(_vllm_facts(_vllm_telemetry(flat)))
    short = [(i * 300.0, 2.62 - 0.05 * i, 4) for i in range(12)]  # one hour
    assert Q.ACCEPT_DRIFT not in found(_vllm_facts(_vllm_telemetry(short)))
    t = _vllm_telemetry([(i * 300.0, 2.62 - 0.52 * i / 35, 4) for i in range(36)])
    t.new_run(2_000_000.0)  # a restart: the slices start again
    assert t.drift.slices() == ()


def test_drift_from_sglang_decode_lines():
    t = Telemetry()
    for i in range(40):
        line = (f"[2025-11-29 07:07:00 TP0] Decode batch. #running-req: 8, #token: 1320, token usage: 0.19, "
                f"accept len: {2.9 - 0.02 * i:.2f}, accept rate: 0.59, cuda graph: True, gen throughput (token/s): "
                "55.60, #queue-req: 0, ")
        ev = parse_line(line)
        assert isinstance(ev, DecodeStats)
        t.ingest(ev, 1_000_000.0 + 300.0 * i)
    f = Facts(launch=parse_launch(shlex.split(SGLANG)), accept_history=t.drift.slices(), log_path="/var/log/s.log")
    hit = found(f)[Q.ACCEPT_DRIFT]
    assert "--disable-radix-cache`" in hit.fix and "known" not in hit.title


# --- draft quality by prompt set ------------------------------------------------------------------------------

CARD = ("# EAGLE-3 draft for Llama-3.1-8B-Instruct\n\nTrained on ShareGPT and UltraChat.\n\n"
        "Average accept length on MT-Bench: 3.42\n")


def _bench(pairs: list[tuple[str, float]]) -> dict[str, object]:
    pub = from_model_card(CARD)
    assert pub is not None
    return {"accept_by_set": tuple(accept_by_set(pairs)), "published_accept_len": pub.accept_len,
            "published_source": pub.source, "bench_source": "benchmark"}


def test_one_prompt_set_far_below_the_published_figure():
    pairs = [("chat", 3.2 + 0.02 * (i % 5)) for i in range(20)] + [("code", 1.6 + 0.02 * (i % 5)) for i in range(20)]
    hit = found(Facts(**_bench(pairs)))[Q.DRAFT_DOMAIN]  # type: ignore[arg-type]
    assert hit.severity == "warning" and "code" in hit.title and "chat is near it" in hit.title
    assert "more in-domain data for code" in hit.fix and "more training steps" in hit.fix
    assert any(e.source == "README.md line 5" and "3.42" in e.detail for e in hit.evidence)
    every = found(Facts(**_bench([(s, 1.5) for s in ("chat", "code") for _ in range(10)])))[Q.DRAFT_DOMAIN]  # type: ignore[arg-type]
    assert "on every prompt set" in every.title and "setup checks" in every.fix


def test_draft_domain_stays_silent_without_its_facts():
    pairs = [("chat", 3.3)] * 20 + [("code", 1.5)] * 3  # three requests are too few to judge a set
    assert Q.DRAFT_DOMAIN not in found(Facts(**_bench(pairs)))  # type: ignore[arg-type]
    no_pub = {**_bench([("code", 1.5)] * 20), "published_accept_len": None}
    assert Q.DRAFT_DOMAIN not in found(Facts(**no_pub))  # type: ignore[arg-type]
    garbage = {**_bench([("code", 1.5)] * 20), "published_accept_len": 0.5}
    assert Q.DRAFT_DOMAIN not in found(Facts(**garbage))  # type: ignore[arg-type]


def test_multistep_decay_names_too_little_data_when_that_is_the_cause():
    base = {"step_accept": (0.8, 0.45, 0.4), "predicted_accept_len": 2.1, "live_accept_len": 2.05}
    plain = found(Facts(**base))[MULTISTEP_DECAY]  # type: ignore[arg-type]
    assert "test-time-training steps" in plain.fix and "in-domain" not in plain.fix
    pairs = [("chat", 3.3)] * 20 + [("code", 1.5)] * 20
    data = found(Facts(**base, **_bench(pairs)))[MULTISTEP_DECAY]  # type: ignore[arg-type]
    assert "too little data like code" in data.fix and "more in-domain data" in data.fix
    assert "will not lift" in data.fix


# --- isolating an engine bug ----------------------------------------------------------------------------------


def test_low_accept_with_every_check_passing_gets_the_commands_to_compare():
    argv = shlex.split(SGLANG)
    f = Facts(launch=parse_launch(argv), release=read_release(reader("0.5.23")), live_accept_len=1.3,
              predicted_accept_len=2.6)
    hit = found(f)[Q.COMPARE_TO_ISOLATE]
    assert hit.severity == "info" and "every setup check passes" in hit.title
    assert f"`{shlex.join([*argv, '--disable-cuda-graph'])}`" in hit.fix
    assert "`pip install 'sglang==0.5.22'`" in hit.fix
    # a setup fault found: that is the cause to fix first, no comparison advised
    top = DraftConfig.parse(json.dumps({"architectures": ["LlamaForCausalLMEagle3"],
                                        "eagle_aux_hidden_state_layer_ids": [2, 16, 29]}))
    assert Q.COMPARE_TO_ISOLATE not in found(Facts(launch=parse_launch(argv), draft_config=top, target_num_layers=32,
                                                   live_accept_len=1.3, predicted_accept_len=2.6))
    # accept not low, or not known: nothing to compare
    assert Q.COMPARE_TO_ISOLATE not in found(Facts(launch=parse_launch(argv), live_accept_len=2.5,
                                                   predicted_accept_len=2.6))
    assert Q.COMPARE_TO_ISOLATE not in found(Facts(launch=parse_launch(argv)))


def test_compare_on_vllm_speaks_vllm():
    server = ServerView(engine="vllm", version="0.32.0+cpu", pid=4242, speculative=True, steps=3, topk=1,
                        draft_tokens=4)
    f = build_facts(FactsSnapshot(server=server, launch_argv=tuple(shlex.split(VLLM))))
    f.live_accept_len = 1.2
    hit = found(f)[Q.COMPARE_TO_ISOLATE]
    assert "--enforce-eager`" in hit.fix and "`pip install 'vllm==0.31.0'`" in hit.fix
    assert "--disable-cuda-graph" not in hit.fix
    assert any("few drafted tokens accepted" in hit.title or "3 tokens drafted" in e.detail for e in hit.evidence)


def test_bad_values_never_reach_the_rules_as_a_traceback():
    from eagle3_tui.telemetry.drift import AcceptSlice, DriftSlices

    d = DriftSlices()
    for v in (float("nan"), float("inf"), None):
        d.add(1_000_000.0, v, v)
    d.add(float("nan"), 2.0, 4.0)
    assert d.slices() == ()
    odd = Facts(accept_history=(AcceptSlice(0.0, float("nan"), None, 1), AcceptSlice(9e3, 2.0, float("nan"), 0)),
                published_accept_len=float("nan"), live_accept_len=float("nan"), predicted_accept_len=float("inf"))
    got = diagnose(odd)
    assert not any("could not run" in x.title for x in got)
