"""`build_facts` over a hand-made `FactsSnapshot`: no session, no host; then the doctor on the result."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

import eagle3_tui.session.host.facts as facts_mod
from eagle3_tui.doctor import diagnose
from eagle3_tui.eagle.accuracy import CheckReport, predicted_accept_len
from eagle3_tui.session.events import ServerView
from eagle3_tui.session.host.facts import FactsSnapshot, build_facts
from eagle3_tui.session.host.probe import TargetInfo
from eagle3_tui.sglang.client import BenchResult
from eagle3_tui.sglang.logline import DecodeStats, parse_line
from eagle3_tui.telemetry.metrics import Telemetry

SEEDS_ARGV = ("python", "-m", "sglang.launch_server", "--model-path", "/models/target",
              "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/models/draft",
              "--speculative-num-steps", "1", "--speculative-num-draft-tokens", "16",
              "--speculative-eagle-topk", "1", "--port", "30000")
DRAFT_CONFIG = '{"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 64, "num_hidden_layers": 1}'
REPORT = Path(__file__).parent / "ui" / "data" / "check_report.json"


def report() -> CheckReport:
    return CheckReport.from_dict(json.loads(REPORT.read_text(encoding="utf-8")))


def live(accepts: list[float], tps: float = 50.0) -> Telemetry:
    tel = Telemetry()
    tel.baseline_tps = 90.0
    for i, a in enumerate(accepts):
        ev = parse_line(f"[2025-12-09 10:00:{i:02d}] Decode batch, #running-req: 4, #token: 900, token usage: 0.01, "
                        f"accept len: {a:.2f}, accept rate: 0.40, cuda graph: True, "
                        f"gen throughput (token/s): {tps:.2f}, #queue-req: 0, ")
        assert isinstance(ev, DecodeStats)
        tel.ingest(ev)
    return tel


def snapshot(**changes) -> FactsSnapshot:
    tel = live([1.2, 1.4])
    base = dict(
        server=ServerView(state="ready", pid=4242, pgid=4242, speculative=True, boundaries=(2, 6, 9),
                          accept_len_server=1.3, log_path="/var/log/sglang.log"),
        target=TargetInfo(draft_config_path="/models/draft/config.json", draft_text=DRAFT_CONFIG, num_layers=12,
                          hidden_size=64, arch="LlamaForCausalLM", target_config_path="/models/target/config.json"),
        launch_argv=SEEDS_ARGV,
        server_info={"speculative_num_steps": 1},
        data_slots=(0, 2, 6, 9),
        data_glob="/data/*.pt",
        live=tel.summary(120.0),
        accept_points=len(tel.series["accept_len"]),
        check=report(),
        log_warnings=("a warning",),
    )
    base.update(changes)
    return FactsSnapshot(**base)


def test_launch_target_and_data() -> None:
    f = build_facts(snapshot())
    assert f.launch is not None and f.launch.num_steps == 1 and f.launch_source == "process 4242"
    assert f.effective is not None and (f.effective.steps, f.effective.draft_tokens) == (1, 2)
    assert f.draft_config is not None and f.draft_config_path == "/models/draft/config.json"
    assert (f.target_num_layers, f.target_hidden_size, f.target_arch) == (12, 64, "LlamaForCausalLM")
    assert f.data_slot_boundaries == (0, 2, 6, 9) and f.training_convention == "[:-1]"
    assert f.data_source == "/data/*.pt" and f.server_args == {"speculative_num_steps": 1}
    assert f.log_warnings == ("a warning",) and f.log_path == "/var/log/sglang.log"


def test_predicted_accept_length_is_the_shared_rule() -> None:
    """The doctor's number is `eagle.accuracy.predicted_accept_len` for the served boundaries."""
    rep = report()
    served = build_facts(snapshot())
    assert served.predicted_accept_len == predicted_accept_len(rep, (2, 6, 9)) == pytest.approx(1.345)
    trained = build_facts(snapshot(server=ServerView(state="ready", speculative=True, boundaries=(0, 2, 6))))
    assert trained.predicted_accept_len == pytest.approx(1.734)
    assert build_facts(snapshot(check=None)).predicted_accept_len is None


def test_live_numbers_from_the_log_and_a_benchmark() -> None:
    f = build_facts(snapshot())
    assert f.live_accept_len == pytest.approx(1.3) and f.live_gen_tps == pytest.approx(50.0)
    assert f.live_source == "server log" and f.baseline_tps == 90.0
    assert f.log_decode_lines == 2 and f.log_has_accept_stats is True and f.server_info_accept_len == 1.3
    bench = BenchResult(num_prompts=4, concurrency=2, max_tokens=24, ok=4, errors=0, duration_s=1.0,
                        output_tokens=96, output_tps=56.8, latency_p50_s=None, latency_p90_s=None,
                        accept_len_client=1.25, spec_verify_ct=77)
    f = build_facts(snapshot(last_bench=bench))
    assert f.live_gen_tps == 56.8 and f.live_source == "benchmark"
    assert f.live_accept_len == pytest.approx(1.3), "the log's accept length wins over the benchmark's"


def test_no_accept_stats_in_the_log() -> None:
    tel = Telemetry()
    ev = parse_line("[2025-12-09 10:00:00] Decode batch, #running-req: 4, #token: 900, token usage: 0.01, "
                    "gen throughput (token/s): 50.00, #queue-req: 0, ")
    assert isinstance(ev, DecodeStats)
    tel.ingest(ev)
    f = build_facts(snapshot(live=tel.summary(120.0), accept_points=0))
    assert f.log_decode_lines == 1 and f.log_has_accept_stats is False


def test_an_empty_snapshot_knows_nothing() -> None:
    f = build_facts(FactsSnapshot())
    assert f.launch is None and f.draft_config is None and f.predicted_accept_len is None
    assert f.launch_source == "launch command" and f.log_has_accept_stats is None
    assert list(diagnose(f)) == []


def test_a_broken_launch_command_or_config_is_no_fact() -> None:
    f = build_facts(snapshot(launch_argv=("bash", "-c", "true"), target=TargetInfo(draft_text="{not json")))
    assert f.launch is None and f.draft_config is None and f.launch_source == "process 4242"


def test_the_doctor_on_the_seeds_story() -> None:
    ids = {x.rule_id for x in diagnose(build_facts(snapshot()))}
    assert {"steps-override", "wiring-mismatch"} <= ids, ids


def test_facts_never_import_the_session() -> None:
    tree = ast.parse(Path(facts_mod.__file__).read_text(encoding="utf-8"))
    names = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert "eagle3_tui.session" not in names and "eagle3_tui.session.facade" not in names
