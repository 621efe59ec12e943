"""The run ledger: real SQLite files in a temp dir, concurrent writers, corrupt files, renderings."""

from __future__ import annotations

import argparse
import csv
import io
import json
import multiprocessing
import sqlite3

import pytest

from eagle3_tui.cli import host_options
from eagle3_tui.commands import ledger as ledger_cmd
from eagle3_tui.eagle.accuracy import CheckReport, WiringResult, predicted_accept_len
from eagle3_tui.errors import UserError
from eagle3_tui.telemetry.ledger import (
    SCHEMA_VERSION,
    Ledger,
    config_summary,
    speedups,
    to_csv,
    to_markdown,
    to_text,
)

T0 = 1_790_000_000.0  # 2026-09-21 UTC


def seed_story(led: Ledger, host: str = "gpu1") -> None:
    """The seeds' numbers: 90 baseline, 56.8 with spec, 46.7 after the steps fix, 54.8 after the wiring fix."""
    led.record("baseline", host, {"speculative": False}, {"tok_s": 90.0, "baseline": True}, ts=T0)
    led.record("benchmark", host, {"steps": 1, "topk": 1, "draft_tokens": 2, "layer_ids": [2, 30, 58],
                                   "boundaries": [3, 31, 59]}, {"tok_s": 56.8, "accept_len": 1.6}, ts=T0 + 60)
    led.record("benchmark", host, {"steps": 15, "topk": 1, "draft_tokens": 16, "layer_ids": [2, 30, 58],
                                   "boundaries": [3, 31, 59]}, {"tok_s": 46.7, "accept_len": 1.9}, "steps fix", ts=T0 + 120)
    led.record("preset", host, {"preset": "train-[:-1]", "layer_ids": [-1, 2, 30], "boundaries": [0, 3, 31]}, {},
               ts=T0 + 150)
    led.record("benchmark", host, {"preset": "train-[:-1]", "steps": 5, "topk": 1, "draft_tokens": 6,
                                   "layer_ids": [-1, 2, 30], "boundaries": [0, 3, 31]},
               {"tok_s": 54.8, "accept_len": 1.8}, "wiring fix", ts=T0 + 180)


@pytest.fixture
def led(tmp_path) -> Ledger:
    return Ledger(tmp_path / "ledger.sqlite3")


def test_records_and_reads_back_with_the_config_snapshot(led: Ledger) -> None:
    seed_story(led)
    led.record("check", "other", {"layer_ids": None}, {"predicted_accept_len": 3.2})
    rows = led.rows()
    assert [r.id for r in rows] == [1, 2, 3, 4, 5, 6]
    assert [r.kind for r in rows[:3]] == ["baseline", "benchmark", "benchmark"]
    assert rows[4].config["boundaries"] == [0, 3, 31] and rows[4].results == {"tok_s": 54.8, "accept_len": 1.8}
    assert rows[2].note == "steps fix" and rows[0].is_baseline and not rows[1].is_baseline
    assert [r.host for r in led.rows(host="other")] == ["other"]
    assert len(led.rows(host="gpu1", kind="benchmark")) == 3


def test_speedup_is_against_the_latest_earlier_baseline(led: Ledger) -> None:
    seed_story(led)
    led.record("benchmark", "gpu2", {"baseline_tps": 50.0}, {"tok_s": 75.0})
    sp = speedups(led.rows())
    assert sp[1] == 1.0
    assert sp[2] == pytest.approx(56.8 / 90.0) and sp[5] == pytest.approx(54.8 / 90.0)
    assert sp[4] is None  # a preset row has no tok/s
    assert sp[6] == pytest.approx(1.5)  # no baseline run on gpu2: the config's baseline_tps
    assert [r.speedup for r in led.rows(host="gpu1", kind="benchmark")] == [
        pytest.approx(56.8 / 90), pytest.approx(46.7 / 90), pytest.approx(54.8 / 90)]


def test_markdown_table_is_what_goes_in_a_report(led: Ledger) -> None:
    seed_story(led)
    md = to_markdown(led.rows())
    lines = md.splitlines()
    assert lines[0] == "| # | time (UTC) | kind | host | config | accept len | tok/s | speedup | note |"
    assert lines[2].startswith("| 1 | 2026-09-21 ") and "| 90.0 | 1.00x |" in lines[2] and "no speculation" in lines[2]
    assert "| 1.60 | 56.8 | 0.63x |" in lines[3]
    assert "steps 15 topk 1 draft 16; ids [2, 30, 58] = h3, h31, h59" in lines[4]
    assert "train-[:-1]; steps 5 topk 1 draft 6; ids [-1, 2, 30] = embed, h3, h31" in lines[6]
    assert "| 1.80 | 54.8 | 0.61x | wiring fix |" in lines[6]
    assert len(lines) == 7
    only_benchmarks = to_markdown(led.rows(kind="benchmark"))  # the baseline row is gone, its speedup is not
    assert "| 0.61x | wiring fix |" in only_benchmarks


def test_markdown_escapes_pipes(led: Ledger) -> None:
    led.record("benchmark", "h|x", {}, {"tok_s": 1.0}, "a | b")
    assert "h\\|x" in to_markdown(led.rows()) and "a \\| b" in to_markdown(led.rows())


def test_csv_has_the_columns_and_full_json(led: Ledger) -> None:
    seed_story(led)
    rows = list(csv.DictReader(io.StringIO(to_csv(led.rows()))))
    assert len(rows) == 5
    assert rows[1]["accept_len"] == "1.60" and rows[1]["tok_s"] == "56.8" and rows[1]["speedup"] == "0.63x"
    assert json.loads(rows[4]["config_json"])["layer_ids"] == [-1, 2, 30]
    assert json.loads(rows[0]["results_json"]) == {"baseline": True, "tok_s": 90.0}


def test_text_table_aligns(led: Ledger) -> None:
    seed_story(led)
    lines = to_text(led.rows()).splitlines()
    assert lines[0].startswith("#  time (UTC)") and len(lines) == 6
    end = lines[0].index("tok/s") + len("tok/s")  # numbers are right-aligned under their header
    assert lines[2].index("56.8") + 4 == end and lines[1].index("90.0") + 4 == end


def test_config_summary_cases() -> None:
    assert config_summary({}) == "-"
    assert config_summary({"layer_ids": None, "boundaries": [2, 5, 7]}) == "ids default = h2, h5, h7"
    assert config_summary({"speculative": False, "preset": "baseline"}) == "baseline; no speculation"
    assert config_summary({"steps": 1, "topk": 1, "draft_tokens": 2, "requested_draft_tokens": 16}) == (
        "steps 1 topk 1 draft 2 (asked 16)"
    )


def test_a_check_row_shows_its_predicted_accept_length(led: Ledger) -> None:
    led.record("check", "h", {"layer_ids": [-1, 2, 30]}, {"predicted_accept_len": 3.2, "top1": 0.77})
    assert "| 3.20 predicted |" in to_markdown(led.rows())


def _report(**predicted: float) -> CheckReport:
    """A check that measured two wirings: "data [:-1]" (embed, h3, h31) and "draft config" (h3, h31, h59)."""
    wirings = [
        WiringResult("data [:-1]", [0, 3, 31], [0, 1, 2], top1=0.75, predicted_accept_len=predicted["embed"]),
        WiringResult("draft config", [3, 31, 59], [1, 2, 3], top1=0.31, predicted_accept_len=predicted["late"]),
    ]
    return CheckReport(draft_dir="/d", data="/data/*.pt", wirings=wirings)


def test_a_check_row_shows_the_prediction_for_the_boundaries_it_was_served_with(led: Ledger) -> None:
    report = _report(embed=3.4, late=1.5)
    served = {"layer_ids": None, "boundaries": [3, 31, 59]}
    led.record("check", "h", served, report.to_dict())  # to_dict's top level names the best wiring: 3.4
    led.record("check", "h", {"layer_ids": [-1, 2, 30], "boundaries": [0, 3, 31]}, report.to_dict())
    led.record("check", "h", {"boundaries": [1, 2, 3]}, report.to_dict())  # served wiring not measured
    led.record("check", "h", {}, report.to_dict())  # boundaries unknown: the draft config's wiring
    rows = led.rows()
    assert [r.predicted_accept_len for r in rows] == [1.5, 3.4, None, 1.5]
    assert [r.predicted_accept_len for r in rows] == [
        predicted_accept_len(report, r.config.get("boundaries")) for r in rows
    ]
    cells = [line.split(" | ")[5] for line in to_markdown(rows).splitlines()[2:]]
    assert cells == ["1.50 predicted", "3.40 predicted", "", "1.50 predicted"]


def test_a_check_row_with_a_broken_report_falls_back_to_its_figure(led: Ledger) -> None:
    led.record("check", "h", {"boundaries": [3]}, {"wirings": ["junk"], "predicted_accept_len": 2.5})
    led.record("check", "h", {"boundaries": "h3"}, {"wirings": [], "draft_dir": "/d", "data": "x"})
    assert [r.predicted_accept_len for r in led.rows()] == [2.5, None]


def test_missing_file_reads_as_empty_and_is_not_created(tmp_path) -> None:
    led = Ledger(tmp_path / "sub" / "none.sqlite3")
    assert led.rows() == []
    assert not led.path.exists()
    led.record("restart", "h", {}, {})
    assert led.path.exists() and len(led.rows()) == 1


def test_env_var_sets_the_default_location(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    led = Ledger()
    assert led.path == tmp_path / "data" / "ledger.sqlite3"
    led.record("restart", "h", {}, {})
    assert led.path.exists()


def test_corrupt_file_is_a_clear_user_error(tmp_path) -> None:
    bad = tmp_path / "ledger.sqlite3"
    bad.write_bytes(b"this is not a database, it is a text file that got in the way\n" * 100)
    with pytest.raises(UserError, match="not a usable SQLite database"):
        Ledger(bad).rows()
    with pytest.raises(UserError, match="move it aside"):
        Ledger(bad).record("restart", "h", {}, {})
    assert bad.read_bytes().startswith(b"this is not")  # nothing overwritten


def test_newer_schema_is_refused(led: Ledger) -> None:
    led.record("restart", "h", {}, {})
    with sqlite3.connect(led.path) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    with pytest.raises(UserError, match="newer eagle3-tui"):
        led.rows()


def test_bad_kind_and_unserialisable_values(led: Ledger) -> None:
    with pytest.raises(UserError, match="lowercase"):
        led.record("DROP TABLE", "h", {}, {})
    rid = led.record("check", "h", {"path": led.path, "ids": (1, 2)}, {"nan": float("inf")})
    row = led.rows()[0]
    assert row.id == rid and row.config == {"path": str(led.path), "ids": [1, 2]}


def _writer(path: str, host: str, n: int) -> None:
    led = Ledger(path)
    for i in range(n):
        led.record("benchmark", host, {"i": i}, {"tok_s": float(i)})


def test_concurrent_writers_lose_nothing(tmp_path) -> None:
    path = str(tmp_path / "ledger.sqlite3")
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_writer, args=(path, f"w{k}", 40)) for k in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    rows = Ledger(path).rows()
    assert len(rows) == 120 and len({r.id for r in rows}) == 120
    for k in range(3):
        assert [r.config["i"] for r in rows if r.host == f"w{k}"] == list(range(40))


# --- the command ----------------------------------------------------------------------------------


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    ledger_cmd.register(sub, host_options())
    args = parser.parse_args(["ledger", *argv])
    return args.func(args)


def test_command_prints_markdown_csv_and_text(led: Ledger, capsys) -> None:
    seed_story(led)
    led.record("benchmark", "gpu2", {}, {"tok_s": 10.0})
    assert _run(["--db", str(led.path), "--markdown", "--host", "gpu1"]) == 0
    out = capsys.readouterr().out
    assert out == to_markdown(led.rows(host="gpu1"))
    assert _run(["--db", str(led.path), "--csv"]) == 0
    assert len(list(csv.reader(io.StringIO(capsys.readouterr().out)))) == 7
    assert _run(["--db", str(led.path)]) == 0
    assert "54.8" in capsys.readouterr().out


def test_command_errors_and_empty(tmp_path, monkeypatch, capsys) -> None:
    with pytest.raises(UserError, match="no ledger at"):
        _run(["--db", str(tmp_path / "typo.sqlite3")])
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "fresh"))
    assert _run([]) == 0
    assert "no runs recorded yet" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        _run(["--markdown", "--csv"])


def test_rows_name_their_engine_and_old_rows_still_load(led: Ledger) -> None:
    from eagle3_tui.ui.widgets.ledger_pane import row_cells

    vllm_argv = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m"]
    sglang_argv = ["python", "-m", "sglang.launch_server", "--model-path", "/m"]
    led.record("benchmark", "h", {"engine": "vllm", "engine_release": "0.32.0", "argv": vllm_argv, "steps": 3},
               {"tok_s": 30.0, "accept_len": 2.5}, ts=T0)
    led.record("benchmark", "h", {"engine": "sglang", "engine_release": None, "steps": 3}, {"tok_s": 20.0}, ts=T0 + 1)
    # written before rows named the engine: read from the launch command, else unknown
    led.record("benchmark", "h", {"argv": sglang_argv, "steps": 3}, {"tok_s": 25.0}, ts=T0 + 2)
    led.record("benchmark", "h", {"steps": 3}, {"tok_s": 25.0}, ts=T0 + 3)
    rows = led.rows()
    assert [r.engine for r in rows] == ["vllm 0.32.0", "sglang", "sglang", None]
    assert config_summary(rows[0].config).startswith("vllm 0.32.0; steps 3")
    assert config_summary(rows[3].config) == "steps 3"
    text = to_text(rows)
    assert "vllm 0.32.0" in text and "| vllm 0.32.0; steps 3 |" in to_markdown(rows)
    assert [row_cells(r)[3] for r in rows] == ["vllm 0.32.0", "sglang", "sglang", "–"]
