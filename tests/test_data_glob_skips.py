"""`--data '<folder>/*'` over a trainer's output folder: what the trainer wrote beside the samples
(data_config.json, sample_lengths.json, token_freq.pt) is skipped with a one-line note, a folder the
glob matches (speculators' hidden_states/) is read as a data root, and the check runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from eagle3_tui.eagle.checkpoint import BadInput
from eagle3_tui.eagle.datasets import expand


def _speculators_folder(world, dest: Path, n: int = 6) -> Path:
    """speculators' layout: OUT/hidden_states/hs_i.safetensors beside data_config.json and token_freq.pt."""
    (dest / "hidden_states").mkdir(parents=True)
    for i in range(n):
        (dest / "hidden_states" / f"hs_{i}.safetensors").symlink_to(
            Path(world.root) / "speculators_st" / "hidden_states" / f"hs_{i}.safetensors")
    (dest / "data_config.json").write_text(f'{{"num_samples": {n}}}\n')
    (dest / "token_freq.pt").write_bytes(b"not a sample")
    return dest


def test_a_glob_over_a_trainer_folder_skips_what_is_not_data(tmp_path):
    v1 = tmp_path / "v1"
    v1.mkdir()
    for i in (0, 1, 2, 10):
        (v1 / f"data_{i}.pt").write_bytes(b"x")
    (v1 / "data_config.json").write_text("{}")
    (v1 / "sample_lengths.json").write_text("{}")
    skipped: list[str] = []
    files = expand(f"{v1}/*", skipped)
    assert [os.path.basename(f) for f in files] == ["data_0.pt", "data_1.pt", "data_2.pt", "data_10.pt"]
    assert sorted(os.path.basename(s) for s in skipped) == ["data_config.json", "sample_lengths.json"]

    spec = tmp_path / "spec"
    (spec / "hidden_states").mkdir(parents=True)
    (spec / "hidden_states" / "hs_0.safetensors").write_bytes(b"x")
    (spec / "data_config.json").write_text("{}")
    (spec / "token_freq.pt").write_bytes(b"x")
    skipped = []
    assert [os.path.basename(f) for f in expand(f"{spec}/*", skipped)] == ["hs_0.safetensors"]
    assert sorted(os.path.basename(s) for s in skipped) == ["data_config.json", "token_freq.pt"]

    only = tmp_path / "only"
    only.mkdir()
    (only / "data_config.json").write_text("{}")
    with pytest.raises(BadInput, match=r"matches only data_config\.json, which is not training data"):
        expand(f"{only}/*", [])


def test_check_runs_on_a_speculators_folder_glob(tmp_path, demo_world):
    folder = _speculators_folder(demo_world, tmp_path / "out")
    r = subprocess.run([sys.executable, "-m", "eagle3_tui", "check", "--local", "--draft", str(demo_world.draft_dir),
                        "--data", f"{folder}/*", "--target", str(demo_world.target_dir), "--samples", "4"],
                       capture_output=True, text=True, timeout=300,
                       env={**os.environ, "EAGLE3_TUI_DATA_DIR": str(tmp_path / "data")})
    assert r.returncode == 0, r.stderr
    notes = [line for line in (r.stdout + r.stderr).splitlines() if "not training data" in line]
    assert notes == ["note: skipped 2 matched files that are not training data (data_config.json, token_freq.pt)"], notes
    assert "Traceback" not in r.stderr
