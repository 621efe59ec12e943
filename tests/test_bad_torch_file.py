"""A broken `.pt` file is one sentence: torch's warnings (a pickle-protocol UserWarning printed two lines
before the error) stay off the terminal, and its paragraph-long messages become a few words
(`checkpoint.torch_load`, the one way the check, the data reader and the weights loader read torch files)."""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from eagle3_tui.eagle import accuracy, checkpoint, datasets
from tests.test_check_mini import mini_config


def _files(root: Path) -> dict[str, Path]:
    import torch

    good = root / "good.pt"
    torch.save({"hidden_states": [torch.zeros(4, 8)] * 3, "input_ids": torch.arange(4),
                "loss_mask": torch.ones(4)}, good)
    files = {
        "truncated": good.read_bytes()[: good.stat().st_size // 2],
        "not-torch": b"hello, this is not a torch file\n" * 4,
        "plain-pickle": pickle.dumps({"a": 1}, protocol=4),  # the one torch warns about
        "empty": b"",
    }
    out = {}
    for name, data in files.items():
        out[name] = root / f"{name}.pt"
        out[name].write_bytes(data)
    return out


REASONS = {
    "truncated": "(it is cut short or corrupt: its zip archive is incomplete)",
    "not-torch": "(it is not a torch.save file)",
    "plain-pickle": "(it is not tensors saved by torch.save: a weights-only load refuses it)",
    "empty": "(it is empty or cut short)",
}


@pytest.mark.parametrize("kind", list(REASONS))
def test_every_torch_reader_says_one_sentence_and_warns_nothing(tmp_path, kind):
    path = str(_files(tmp_path)[kind])
    readers = [(datasets.read_sample, "a torch.save file"), (checkpoint._bin_header, "a torch state dict"),
               (accuracy._load_weights, "a torch state dict")]
    for read, what in readers:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with pytest.raises(checkpoint.BadInput) as err:
                read(path)
        assert caught == []
        assert str(err.value) == f"{path} could not be read as {what} {REASONS[kind]}"


def test_a_python_object_is_named():
    err = Exception("Weights only load failed. ... WeightsUnpickler error: Unsupported global: GLOBAL "
                    "fractions.Fraction was not an allowed global by default. Please use ...")
    assert checkpoint.torch_load_reason(err) == (
        "it holds a Python object (fractions.Fraction) that a weights-only load refuses")
    assert checkpoint.torch_load_reason(RuntimeError("x" * 300)).endswith("...")


def test_the_check_prints_one_line_per_broken_file(tmp_path):
    """A real process (pytest would swallow the warning): torch's protocol warning came first."""
    import torch
    from safetensors.torch import save_file

    files = _files(tmp_path)
    bin_draft, st_draft = tmp_path / "bin-draft", tmp_path / "st-draft"
    for d in (bin_draft, st_draft):
        d.mkdir()
        (d / "config.json").write_text(json.dumps(mini_config()))
    (bin_draft / "pytorch_model.bin").write_bytes(files["plain-pickle"].read_bytes())
    save_file({"x": torch.zeros(1)}, str(st_draft / "model.safetensors"))
    runs = [[str(bin_draft), str(files["truncated"])], [str(st_draft), str(files["truncated"])],
            [str(st_draft), str(files["not-torch"])]]
    script = ("import sys\nfrom eagle3_tui.cli import main\n"
              f"for draft, data in {runs!r}:\n"
              "    assert main(['check', '--draft', draft, '--data', data]) == 2\n")
    env = {**os.environ, "PYTHONWARNINGS": "default"}
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stderr.splitlines() == [
        f"eagle3-tui: {bin_draft / 'pytorch_model.bin'} could not be read as a torch state dict "
        f"{REASONS['plain-pickle']}",
        f"eagle3-tui: {files['truncated']} could not be read as a torch.save file {REASONS['truncated']}",
        f"eagle3-tui: {files['not-torch']} could not be read as a torch.save file {REASONS['not-torch']}",
    ]
