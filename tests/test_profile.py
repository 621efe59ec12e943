"""Profiles: the TOML hosts file, lookups, overrides, errors as one sentence, the demo profile."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from eagle3_tui.errors import UserError
from eagle3_tui.profile import default_profile_path, demo_profile, load_profile, read_profiles

HOSTS = """
["gpu-box"]
address = "gpu-box.lan"
log_path = "/root/sglang.log"
launch_command = "python -m sglang.launch_server --model-path '/models/k 2'"
remote_python = "/root/venv/bin/python"
draft_path = "/models/draft"
data_glob = "/data/*.pt"
data_slots = [0, 3, 31, 59]
baseline_tps = 90
restart_deadline_s = 600

["gpu-box".presets."embed-3-31"]
layer_ids = [-1, 2, 30]
description = "training wiring"

["gpu-box".presets."steps-5"]
flags = { "--speculative-num-steps" = 5, "speculative-num-draft-tokens" = 6 }

[localhost]
log_path = "/tmp/s.log"
"""


@pytest.fixture
def config_dir(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("EAGLE3_TUI_CONFIG_DIR", str(tmp_path))
    (tmp_path / "hosts.toml").write_text(HOSTS)
    return tmp_path


def test_env_overrides_config_dir(config_dir):
    assert default_profile_path() == config_dir / "hosts.toml"


def test_table_by_name_and_by_address(config_dir):
    p = load_profile("gpu-box")
    assert p.target == "gpu-box.lan" and not p.local
    assert p.launch_command == ["python", "-m", "sglang.launch_server", "--model-path", "/models/k 2"]
    assert p.data_slots == (0, 3, 31, 59)
    assert p.baseline_tps == 90.0 and p.restart_deadline_s == 600.0
    by_addr = load_profile("gpu-box.lan")
    assert by_addr.name == "gpu-box"
    names = {pr.name: pr for pr in p.presets}
    assert names["embed-3-31"].kind == "layers" and names["embed-3-31"].layer_ids == (-1, 2, 30)
    assert names["steps-5"].kind == "flags"
    assert dict(names["steps-5"].flags) == {"speculative-num-steps": 5, "speculative-num-draft-tokens": 6}


def test_unknown_host_is_bare_profile_and_overrides_win(config_dir):
    p = load_profile("other-box", overrides={"log_path": "/x.log", "port": 31000})
    assert p.target == "other-box" and p.log_path == "/x.log" and p.port == 31000
    assert p.restart_deadline_s == 900.0 and p.presets == []
    # overriding must not change what the file says for the next load
    q = load_profile("gpu-box", overrides={"log_path": "/other.log"})
    assert q.log_path == "/other.log" and load_profile("gpu-box").log_path == "/root/sglang.log"


def test_localhost_and_local_flag_attach_without_ssh(config_dir):
    assert load_profile("localhost").local
    assert load_profile("localhost").log_path == "/tmp/s.log"
    assert load_profile(None, local=True).local
    with pytest.raises(UserError, match="no host given"):
        load_profile(None)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ('["h"]\nport = "x"\n', "port must be an integer"),
        ('["h"]\nport = true\n', "port must be an integer"),
        ('["h"]\nport = 70000\n', "port must be an integer"),
        ('["h"]\nbaseline_tps = true\n', "baseline_tps must be a positive number"),
        ('["h"]\nlaunch_command = []\n', "launch_command must be a list of strings"),
        ('["h"]\nlaunch_env = "A=1"\n', "launch_env must be a table"),
        ('["h"]\nkeymap = 3\n', "keymap must be a table"),
        ('["h"]\nlog_path = 3\n', "log_path must be a string"),
        ('["h"]\ndata_slots = [1, "a"]\n', "data_slots must be a list of integers"),
        ('["h"]\nnodes = ["a", 2]\n', "nodes must be a list of host names"),
        ('["h".presets.p]\nlayer_ids = [1]\nflags = {a = 1}\n', "both layer_ids and flags"),
        ('["h".presets.p]\ndescription = "x"\n', "needs layer_ids or flags"),
        ('["h"\nport = 1\n', "not valid TOML"),
        ('h = 3\n', "must be a table"),
    ],
)
def test_bad_files_are_one_sentence(tmp_path, text, match):
    f = tmp_path / "hosts.toml"
    f.write_text(text)
    with pytest.raises(UserError, match=match):
        read_profiles(f)


def test_nodes_are_the_hosts_in_rank_order(tmp_path):
    f = tmp_path / "hosts.toml"
    f.write_text('["h"]\nnodes = ["gpu-a", "gpu-b"]\n')
    assert read_profiles(f)["h"].nodes == ["gpu-a", "gpu-b"]


def test_missing_named_file_is_an_error_default_is_empty(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE3_TUI_CONFIG_DIR", str(tmp_path / "none"))
    assert read_profiles() == {}
    with pytest.raises(UserError, match="does not exist"):
        read_profiles(tmp_path / "nope.toml")


def test_demo_profile_copies_draft_without_layer_ids(tmp_path):
    draft = tmp_path / "world" / "draft"
    draft.mkdir(parents=True)
    cfg = {"architectures": ["LlamaForCausalLMEagle3"], "hidden_size": 64,
           "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 4, 7]}}
    (draft / "config.json").write_text(json.dumps(cfg, indent=2))
    (draft / "model.safetensors").write_bytes(b"weights")
    world = SimpleNamespace(draft_dir=draft, target_dir=tmp_path / "world" / "target",
                            data_glob=str(tmp_path / "world" / "data" / "*.pt"), slot_boundaries=(0, 2, 6, 9))
    p = demo_profile(world, port=30123, state_dir=tmp_path / "state")
    argv = p.launch_command
    assert argv[1:3] == ["-m", "eagle3_tui.sim.server"]
    i = argv.index
    assert argv[i("--speculative-num-steps") + 1] == "1"
    assert argv[i("--speculative-num-draft-tokens") + 1] == "16"
    assert argv[i("--speculative-eagle-topk") + 1] == "1"
    assert argv[i("--port") + 1] == "30123"
    # the story's release: 0.5.6 on a Qwen3 target (-1 captured stock, graphed decode replays the defaults)
    assert argv[i("--sglang-version") + 1] == "0.5.6" and argv[i("--sim-target-arch") + 1] == "qwen3"
    assert "--sim-embed-capture-patch" not in argv and "--disable-cuda-graph" not in argv
    assert argv[i("--sim-background-load") + 1] == "4"
    assert p.local and p.data_slots == (0, 2, 6, 9) and p.port == 30123
    copied = Path(p.draft_path)
    assert copied != draft and (copied / "model.safetensors").read_bytes() == b"weights"
    new_cfg = json.loads((copied / "config.json").read_text())
    assert "eagle_aux_hidden_state_layer_ids" not in json.dumps(new_cfg)
    assert new_cfg["hidden_size"] == 64
    # the cached world is untouched
    assert json.loads((draft / "config.json").read_text()) == cfg
