"""`eagle3-tui sglang-info --local` without --arch/--num-layers/--layer-ids: the served target's and the
served draft config's, read by a read-only session from the profile's paths (no server, no SGLang wheel)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from eagle3_tui.cli import main
from tests.plugins.world import make_draft_dir


def _profile(tmp_path: Path, **paths: Any) -> str:
    path = tmp_path / "hosts.toml"
    body = "".join(f"{k} = {json.dumps(str(v))}\n" for k, v in paths.items())
    path.write_text(f'[localhost]\nport = 1\nstate_dir = "{tmp_path / "state"}"\n{body}')
    return str(path)


@pytest.fixture
def info(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))

    def run(profile: str, *extra: str) -> tuple[int, Any, str]:
        rc = main(["sglang-info", "--local", "--profile", profile, "--sglang-version", "0.5.6", *extra])
        out = capsys.readouterr()
        return rc, (json.loads(out.out) if rc == 0 and "--json" in extra else out.out), out.err

    return run


def test_the_served_target_and_draft_ids_by_default(demo_world, tmp_path, info):
    draft = make_draft_dir(demo_world, tmp_path / "draft", layer_ids=[1, 5, 8])
    prof = _profile(tmp_path, target_path=demo_world.target_dir, draft_path=draft)
    rc, out, _ = info(prof, "--json")
    assert rc == 0
    assert (out["arch"], out["num_layers"], out["layer_ids"]) == ("LlamaForCausalLM", 12, [1, 5, 8])
    assert out["captures"] == [2, 6, 9]  # 0.5.6: +1 each
    assert out["served_from"] == [f"{demo_world.target_dir}/config.json", f"{draft}/config.json"]
    # a flag given wins over the served value; the rest stays the served one's
    rc, out, _ = info(prof, "--layer-ids", "2,6,9", "--json")
    assert (out["num_layers"], out["layer_ids"], out["captures"]) == (12, [2, 6, 9], [3, 7, 10])
    rc, text, _ = info(prof)
    assert "LlamaForCausalLM with 12 layers, ids [1, 5, 8]" in text and "from the served configs:" in text


def test_no_served_target_known_is_one_sentence(tmp_path, info):
    rc, _, err = info(_profile(tmp_path))
    assert rc == 2 and "needs --arch and --num-layers" in err and "target_path" in err
    assert len(err.strip().splitlines()) == 1


def test_a_target_repo_id_not_in_the_hosts_hub_cache_is_named(tmp_path, info, monkeypatch):
    cache = tmp_path / "hub"
    prof = tmp_path / "hosts.toml"
    prof.write_text(f'[localhost]\nport = 1\nstate_dir = "{tmp_path / "state"}"\n'
                    f'launch_command = "sglang serve Qwen/NoSuchModel --port 1"\n'
                    f'launch_env = {{ HF_HUB_CACHE = "{cache}" }}\n')
    rc, _, err = info(str(prof))
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert (f"target Qwen/NoSuchModel is a Hugging Face repo id not in the host's cache ({cache}): "
            "give target_path in the profile") in err


def test_with_no_release_named_the_served_servers_own_sglang_answers(demo_world, tmp_path, monkeypatch, capsys):
    """The profile's launch command (a sim standing for SGLang 0.5.6): --local alone, no --sglang-version."""
    draft = make_draft_dir(demo_world, tmp_path / "draft", layer_ids=[1, 5, 8])
    argv = ["python", "-m", "eagle3_tui.sim.server", "--model-path", str(demo_world.target_dir),
            "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(draft),
            "--sglang-version", "0.5.23", "--port", "1"]
    prof = tmp_path / "hosts.toml"
    prof.write_text(f'[localhost]\nport = 1\nstate_dir = "{tmp_path / "state"}"\nlaunch_command = {json.dumps(argv)}\n')
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    assert main(["sglang-info", "--local", "--profile", str(prof), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["version"], out["arch"], out["num_layers"], out["layer_ids"]) == ("0.5.23", "LlamaForCausalLM", 12,
                                                                                 [1, 5, 8])
    assert out["captures"] == [2, 6, 9] and out["source"] == "assumed from version 0.5.23"
