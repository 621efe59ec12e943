"""The fleet's command line: `--host` given several times (the fleet, in the console and the command),
`--fleet FILE` opening the Fleet screen, and one-host commands refusing several hosts in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eagle3_tui.cli import build_parser, main
from eagle3_tui.ui.launch import build_app, fleet_requested
from eagle3_tui.ui.screens.fleet import FleetScreen
from tests.fleet_fakes import fake_server, sglang_metrics, vllm_metrics


def test_several_hosts_open_the_fleet_in_the_console() -> None:
    args = build_parser().parse_args(["--host", "http://127.0.0.1:30001", "--host", "http://127.0.0.1:30002",
                                      "--fleet-engine", "vllm"])
    assert args.hosts == ["http://127.0.0.1:30001", "http://127.0.0.1:30002"] and fleet_requested(args)
    app, _ = build_app(args)
    assert app.fleet is not None and isinstance(app.fleet.screen, FleetScreen)
    assert [(r.name, r.engine) for r in app.fleet.screen.fleet.rows] == [
        ("127.0.0.1:30001", "vllm"), ("127.0.0.1:30002", "vllm")]
    one = build_parser().parse_args(["--host", "gpu-box"])
    assert one.host == "gpu-box" and not fleet_requested(one)


def test_fleet_file_opens_the_fleet_screen(tmp_path: Path) -> None:
    path = tmp_path / "f.toml"
    path.write_text('[[server]]\nname = "x"\nbase_url = "http://127.0.0.1:30001"\nengine = "sglang"\n')
    app, _ = build_app(build_parser().parse_args(["--fleet", str(path)]))
    assert app.fleet is not None and [r.name for r in app.fleet.screen.fleet.rows] == ["x"]


def test_one_host_commands_refuse_several_hosts(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["doctor", "--host", "gpu-a", "--host", "gpu-b"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "several --host open the fleet" in err


def test_fleet_command_over_hosts(capsys: pytest.CaptureFixture[str]) -> None:
    with fake_server() as s, fake_server() as v:
        s.set("/metrics", sglang_metrics(2.2, 100.0))
        v.set("/metrics", vllm_metrics())
        code = main(["fleet", "--host", s.base_url, "--host", v.base_url, "--once", "--json", "--settle", "0"])
        assert code == 0
        rows = json.loads(capsys.readouterr().out)
        # --fleet-engine auto (the default): each server's engine told by its own /metrics
        assert [(r["engine"], r["status"]) for r in rows] == [("sglang", "ok"), ("vllm", "ok")]
        assert rows[0]["accept_now"] == 2.2 and rows[1]["steps"] == 3  # 3 per-position counters
        code = main(["fleet", "--host", s.base_url, "--host", v.base_url, "--fleet-engine", "sglang",
                     "--once", "--json", "--settle", "0"])
        rows = json.loads(capsys.readouterr().out)
        assert [r["status"] for r in rows] == ["ok", "garbage"]  # a vLLM answer has no sglang:* metrics
