"""`eagle3-tui sglang-info` over real SGLang releases (only the files the analysis reads, from the wheels)."""

from __future__ import annotations

import json
import sys

import pytest

from eagle3_tui.cli import main
from tests.sglang_wheels import package_dir


@pytest.fixture(scope="module")
def pkgs(tmp_path_factory):
    root = tmp_path_factory.mktemp("sglang")
    return {v: package_dir(v, root / v) for v in ("0.5.6", "0.5.23")}


def _json(capsys, argv):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out)


def test_json_fields_for_qwen3_on_0_5_6(pkgs, capsys):
    out = _json(capsys, ["sglang-info", "--sglang-dir", str(pkgs["0.5.6"]), "--arch", "qwen3",
                         "--num-layers", "36", "--layer-ids", "2,18,33", "--json"])
    assert out["version"] == "0.5.6"
    assert out["arch"] == "Qwen3ForCausalLM"
    assert out["layer_ids"] == [2, 18, 33]
    assert out["captures"] == [3, 19, 34]
    assert out["captures_cuda_graph"] == [2, 18, 33]
    assert out["fails"] is None
    assert out["embed_capture"] is True
    assert out["draft_loader"] == {"layers_prefix": False, "multi_layer": False, "applies": []}
    assert out["auto_spec"] == [5, 4, 8]
    assert out["log_stream"] == "stderr"
    assert out["source"] == "read from source"
    assert any(e["source"].startswith("srt/models/qwen3.py:") for e in out["evidence"])


def test_equals_form_for_negative_ids_and_a_start_up_failure(pkgs, capsys):
    out = _json(capsys, ["sglang-info", "--sglang-dir", str(pkgs["0.5.23"]), "--arch", "deepseek_v3",
                         "--num-layers", "61", "--layer-ids=-1,2,30", "--json"])
    assert out["layer_ids"] == [-1, 2, 30]
    assert out["captures"] is None and "captures 2" in out["fails"]
    assert out["embed_capture"] is False and out["embed_id"] == 0
    assert out["draft_loader"]["applies"] == ["fc_norm", "norm_output", "norm_before_fc"]
    path = out["speculative_path"]
    assert path["spec_v2"] == "only" and "Eagle3DeepseekV2ForCausalLM" in path["draft_classes"]
    assert "DeepseekV3ForCausalLM" in path["draft_path_from_target"] and path["expert_recorder_capture_safe"] is False


def test_no_id_key_and_text_output(pkgs, capsys):
    out = _json(capsys, ["sglang-info", "--sglang-dir", str(pkgs["0.5.23"]), "--arch", "llama",
                         "--num-layers", "32", "--json"])
    assert out["layer_ids"] is None and out["captures"] == [2, 16, 29]
    assert main(["sglang-info", "--sglang-dir", str(pkgs["0.5.6"]), "--arch", "llama", "--num-layers", "32",
                 "--layer-ids", "2,16,29"]) == 0
    text = capsys.readouterr().out
    assert "prefill captures:       h3, h17, h30" in text
    assert "graphed decode replays: h2, h16, h29" in text and "prefill only" in text
    assert "speculative path: spec v2 opt-in (SGLANG_ENABLE_SPEC_V2)" in text


def test_table_only(capsys):
    out = _json(capsys, ["sglang-info", "--sglang-version", "0.5.6", "--arch", "deepseek_v3",
                         "--num-layers", "61", "--layer-ids", "2,30,58", "--json"])
    assert out["captures"] == [3, 31, 59] and out["captures_cuda_graph"] == [2, 30, 58]
    assert out["source"] == "assumed from version 0.5.6"


def test_local_finds_the_package_with_the_hosts_python(pkgs, capsys, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(pkgs["0.5.23"].parent))
    out = _json(capsys, ["sglang-info", "--local", "--python", sys.executable, "--arch", "qwen3",
                         "--num-layers", "36", "--layer-ids=-1,2,17", "--json"])
    assert out["version"] == "0.5.23" and out["captures"] == [0, 3, 18]
    assert out["source"] == "read from source"


@pytest.mark.parametrize(("extra", "words"), [
    (["--sglang-dir", "{tmp}", "--arch", "llama", "--num-layers", "32"], "is not an sglang package"),
    (["--sglang-dir", "{pkg}", "--arch", "falcon", "--num-layers", "32"], "unknown target architecture"),
    (["--sglang-dir", "{pkg}", "--arch", "llama", "--num-layers", "32", "--layer-ids", "2,x,5"], "not a list of integer"),
    (["--sglang-dir", "{pkg}", "--arch", "llama"], "needs --arch and --num-layers"),
    (["--sglang-dir", "{pkg}", "--target-config", "{tmp}/none.json"], "cannot read the target config"),
    (["--arch", "llama", "--num-layers", "32"], "exactly one of"),
])
def test_bad_input_is_one_sentence_and_exit_2(pkgs, capsys, tmp_path, extra, words):
    argv = ["sglang-info", *(a.format(tmp=tmp_path, pkg=pkgs["0.5.6"]) for a in extra)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert words in err and len(err.splitlines()) == 1


def test_target_and_draft_configs_give_arch_layers_and_ids(pkgs, capsys, tmp_path):
    target = tmp_path / "config.json"
    target.write_text(json.dumps({"architectures": ["KimiK25ForConditionalGeneration"],
                                  "text_config": {"num_hidden_layers": 61}}))
    draft = tmp_path / "draft.json"
    draft.write_text(json.dumps({"architectures": ["LlamaForCausalLMEagle3"],
                                 "eagle_config": {"eagle_aux_hidden_state_layer_ids": [2, 30, 58]}}))
    out = _json(capsys, ["sglang-info", "--sglang-dir", str(pkgs["0.5.23"]), "--target-config", str(target),
                         "--draft-config", str(draft), "--json"])
    assert (out["arch"], out["num_layers"], out["layer_ids"]) == ("KimiK25ForConditionalGeneration", 61, [2, 30, 58])
    assert out["captures"] == [2, 30, 58]


def test_host_reads_the_package_over_ssh(pkgs, capsys, monkeypatch, sshd):
    """--host with --sglang-dir: the directory on that host, read over a real sshd on loopback."""
    from eagle3_tui.commands import sglang_info

    monkeypatch.setattr(sglang_info, "make_host", lambda args: sshd.make_host(python=sys.executable))
    out = _json(capsys, ["sglang-info", "--host", sshd.alias, "--sglang-dir", str(pkgs["0.5.6"]),
                         "--arch", "deepseek_v3", "--num-layers", "61", "--layer-ids", "2,30,58", "--json"])
    assert out["version"] == "0.5.6" and out["source"] == "read from source"
    assert out["captures"] == [3, 31, 59] and out["captures_cuda_graph"] == [2, 30, 58]
    assert main(["sglang-info", "--host", sshd.alias, "--sglang-dir", "/nonexistent", "--arch", "llama",
                 "--num-layers", "32"]) == 2
    assert "is not an sglang package" in capsys.readouterr().err
