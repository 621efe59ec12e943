"""Headless host commands: argument handling, read-only refusal, output formats (no server needed)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from eagle3_tui.actions import host_action
from eagle3_tui.cli import host_options
from eagle3_tui.commands import hostcmds
from eagle3_tui.errors import UserError
from eagle3_tui.session import ReadOnlyError
from eagle3_tui.sglang.client import BenchResult
from eagle3_tui.sglang.logline import parse_line
from eagle3_tui.telemetry.metrics import Telemetry


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="eagle3-tui")
    sub = p.add_subparsers(dest="command")
    hostcmds.register(sub, host_options())
    return p


def run(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    return args.func(args)


@pytest.mark.parametrize("cmd", [["apply", "train-[:-1]", "--yes"], ["restart", "--yes"], ["rollback", "--yes"]])
def test_readonly_refuses_every_change_before_connecting(cmd):
    # the host does not exist: the refusal must come first, with no connection attempt
    with pytest.raises(ReadOnlyError, match=f"read-only: refusing to {host_action(cmd[0]).what}"):
        run([*cmd, "--host", "no-such-host.invalid", "--readonly"])


def test_all_subcommands_registered():
    p = parser()
    for name in hostcmds.NAMES:
        args = p.parse_args([name, "--local"] + (["x"] if name == "apply" else []))
        assert args.hostcmd == name and args.func is hostcmds.run
    a = p.parse_args(["bench", "--local", "--baseline", "-n", "3", "-c", "2", "--max-tokens", "9"])
    assert (a.baseline, a.num_prompts, a.concurrency, a.max_tokens) == (True, 3, 2, 9)


def test_presets_lists_builtins_and_profile_with_boundaries(tmp_path, monkeypatch, capsys):
    world = tmp_path / "w"
    (world / "target").mkdir(parents=True)
    (world / "draft").mkdir()
    (world / "target" / "config.json").write_text(json.dumps(
        {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 9, "hidden_size": 32}))
    (world / "draft" / "config.json").write_text('{"hidden_size": 32}\n')
    prof = tmp_path / "hosts.toml"
    prof.write_text(
        '[localhost]\n'
        f'launch_command = ["python", "-m", "eagle3_tui.sim.server", "--model-path", "{world}/target", '
        f'"--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "{world}/draft", '
        '"--speculative-num-steps", "1", "--speculative-num-draft-tokens", "16", "--speculative-eagle-topk", "1", '
        '"--port", "1"]\n'
        f'log_path = "{tmp_path}/s.log"\n'
        f'state_dir = "{tmp_path}/state"\n'
        'data_slots = [0, 2, 6, 9]\n'
        '[localhost.presets.mine]\nlayer_ids = [1, 3, 5]\n'
    )
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    assert run(["presets", "--local", "--profile", str(prof)]) == 0
    out = capsys.readouterr().out
    assert "* sglang-default" in out  # the active one: no key in the config
    assert "key absent -> boundaries h2, h4, h6" in out
    assert "train-[:-1]" in out and "ids -1,1,5 -> boundaries embed, h2, h6" in out
    assert "mine" in out and "ids 1,3,5 -> boundaries h2, h4, h6" in out and "[profile]" in out
    assert "steps=15" in out and "no-speculation" in out


def test_apply_without_yes_on_a_pipe_asks_for_yes(monkeypatch):
    class NoTty:
        def isatty(self):
            return False

    monkeypatch.setattr("sys.stdin", NoTty())
    with pytest.raises(UserError, match="--yes"):
        hostcmds._confirm(argparse.Namespace(yes=False), "apply x?")
    hostcmds._confirm(argparse.Namespace(yes=True), "apply x?")


def test_watch_line_and_bench_text():
    tel = Telemetry()
    tel.num_steps = 1
    ev = parse_line("[2025-12-09 10:00:00] Decode batch, #running-req: 4, #token: 900, token usage: 0.01, "
                    "accept len: 1.62, accept rate: 0.31, cuda graph: True, gen throughput (token/s): 56.80, "
                    "#queue-req: 0, ")
    line = hostcmds.format_decode(ev, tel)
    assert "accept len  1.62" in line and "gen   56.80 tok/s" in line and "running 4" in line
    r = BenchResult(num_prompts=4, concurrency=2, max_tokens=32, ok=4, errors=0, duration_s=2.0, output_tokens=128,
                    output_tps=64.0, latency_p50_s=0.5, latency_p90_s=0.9, accept_len_client=1.8, spec_verify_ct=70,
                    accept_len_log=1.7)
    text = hostcmds.format_bench(r, 80.0)
    assert "output tok/s      64.00" in text and "accept length     1.80" in text and "0.80x" in text


def test_profile_file_missing_is_clear(tmp_path):
    with pytest.raises(UserError, match="does not exist"):
        run(["doctor", "--local", "--profile", str(Path(tmp_path) / "nope.toml")])


def test_doctor_with_no_server_and_no_paths_says_there_is_nothing_to_diagnose(tmp_path, monkeypatch):
    """A host with no server and an empty profile must not print "no findings" (a clean bill of health)."""
    prof = tmp_path / "hosts.toml"
    prof.write_text(f'["here"]\nlocal = true\nport = 1\nstate_dir = "{tmp_path / "state"}"\n')
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    with pytest.raises(UserError, match="nothing to diagnose"):
        run(["doctor", "--host", "here", "--profile", str(prof)])


def test_doctor_over_ssh_from_the_cli(sshd, tmp_path, monkeypatch, capsys):
    """`eagle3-tui doctor --host ALIAS --json` through the real sshd (no server running: facts from files)."""
    draft = tmp_path / "draft"
    target = tmp_path / "target"
    draft.mkdir()
    target.mkdir()
    (target / "config.json").write_text(json.dumps(
        {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 12, "hidden_size": 32}))
    # vLLM-style top-level ids: SGLang never reads them
    (draft / "config.json").write_text(json.dumps({"hidden_size": 32, "eagle_aux_hidden_state_layer_ids": [1, 5, 8]}))
    prof = sshd.write_profile(tmp_path / "hosts.toml", draft_path=draft, target_path=target,
                              state_dir=tmp_path / "state", port=1)
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    assert run(["doctor", "--json", "--host", sshd.alias, "--profile", str(prof)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["host"] == sshd.alias and doc["server"]["state"] == "stopped"
    ids = {f["rule_id"]: f for f in doc["findings"]}
    assert "config-key-ignored" in ids
    assert any(str(draft) in e["source"] for e in ids["config-key-ignored"]["evidence"])
