"""The fast-lane side of the real-SGLang demo: the Hugging Face tokenizer folder, the flags and environment
a real server gets, and the one sentence where `.venv-sglang` is missing (no real server needed)."""

from __future__ import annotations

import json
from pathlib import Path

from eagle3_tui.cli import main
from eagle3_tui.session.demo import real_sglang
from eagle3_tui.sim.hf_tokenizer import FOLDER, ensure_hf_tokenizer, write_hf_tokenizer
from eagle3_tui.sim.tokenizer import ByteTokenizer


def test_the_hf_tokenizer_maps_each_byte_to_its_id_and_adds_bos(tmp_path):
    folder = write_hf_tokenizer(tmp_path)
    assert folder == tmp_path / FOLDER
    tok = json.loads((folder / "tokenizer.json").read_text())
    vocab = tok["model"]["vocab"]
    assert sorted(vocab.values()) == list(range(259))
    assert vocab["A"] == ord("A") and vocab["Ġ"] == ord(" ") and vocab["Ċ"] == ord("\n")  # GPT-2's byte map
    b = ByteTokenizer()
    assert {t["content"]: t["id"] for t in tok["added_tokens"]} == {"<s>": b.bos_id, "</s>": b.eos_id, "<pad>": b.pad_id}
    assert tok["post_processor"]["single"][0] == {"SpecialToken": {"id": "<s>", "type_id": 0}}
    cfg = json.loads((folder / "tokenizer_config.json").read_text())
    assert cfg["tokenizer_class"] == "PreTrainedTokenizerFast" and cfg["eos_token"] == "</s>"
    # a world built before the folder existed gets it; one that has it is left alone
    (folder / "tokenizer.json").write_text("kept")
    assert ensure_hf_tokenizer(tmp_path) == folder and (folder / "tokenizer.json").read_text() == "kept"


def test_server_flags_and_environment(tmp_path):
    real = real_sglang.RealSglang(python=tmp_path / "python", support=tmp_path / "support")
    (tmp_path / "target").mkdir()
    argv = real_sglang.server_argv(real, target=tmp_path / "target", draft=tmp_path / "draft", port=1234,
                                   steps=1, topk=1, draft_tokens=16)
    joined = " ".join(argv)
    for flag in ("-m sglang.launch_server", "--device cpu", "--disable-cuda-graph", "--max-total-tokens 32768",
                 "--attention-backend intel_amx", "--speculative-num-draft-tokens 16", "--port 1234"):
        assert flag in joined
    assert argv[argv.index("--tokenizer-path") + 1] == str(tmp_path / "target" / FOLDER)
    env = real.env({"PYTHONPATH": "/elsewhere", "HOME": "/h"})
    assert env["PYTHONPATH"].split(":") == [str(tmp_path / "support"), "/elsewhere"]
    assert env["SGLANG_USE_CPU_ENGINE"] == "1" and env["OMP_NUM_THREADS"] == "1" and env["HOME"] == "/h"


def test_demo_on_sglang_without_the_venv_says_how_to_build_it(monkeypatch, capsys):
    monkeypatch.setattr(real_sglang, "VENV", ".venv-sglang-not-built-here")
    assert real_sglang.find_real_sglang() is None
    assert main(["--demo", "--engine", "sglang"]) != 0
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "make sglang" in err


def test_the_checkout_has_the_support_folder():
    root = Path(real_sglang.checkout_root())
    assert (root / "real_engines" / "sglang" / "cpu_support" / "sgl_kernel" / "__init__.py").exists()
    assert (root / "real_engines" / "sglang" / "requirements.txt").exists()
