"""`check` on a draft config.json with NaN or nested past the recursion limit: one sentence from
`readers.json_object` (the one validating reader), exit 2; NaN was taken as a number and the nesting
ended in an internal error. The check's zip runs them on a GPU host, readers.py with them."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from eagle3_tui.cli import main
from eagle3_tui.eagle import shipped
from tests.bare_python import bare_python

CONFIGS = {
    "nan": ('{"hidden_size": 16, "rope_theta": NaN}', "holds NaN, which is not a JSON number"),
    "deep": ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "is nested too deeply to read"),
}


def _draft(tmp_path: Path, text: str) -> Path:
    draft = tmp_path / "draft"
    draft.mkdir(parents=True)
    (draft / "config.json").write_text(text)
    return draft


@pytest.mark.parametrize("kind", list(CONFIGS))
def test_check_says_one_sentence_and_exits_2(tmp_path, capsys, kind):
    text, reason = CONFIGS[kind]
    draft = _draft(tmp_path, text)
    data = tmp_path / "data_0.pt"
    data.write_bytes(b"never read")
    assert main(["check", "--draft", str(draft), "--data", str(data)]) == 2
    assert capsys.readouterr().err == f"eagle3-tui: {draft / 'config.json'} {reason}\n"


def test_the_shipped_zip_refuses_them_the_same_way(tmp_path):
    """readers.py and checkpoint.py from the check's zip on a bare Python (no project installed): the same
    sentences, as the job's input error."""
    pyz = tmp_path / "accuracy.pyz"
    pyz.write_bytes(shipped.build())
    bare, env = bare_python(tmp_path)
    paths = {kind: str(_draft(tmp_path / kind, text) / "config.json") for kind, (text, _r) in CONFIGS.items()}
    script = (f"import json, sys\nsys.path.insert(0, {str(pyz)!r})\nfrom eagle3_tui.eagle import checkpoint as ck\n"
              f"out = {{}}\nfor kind, path in {paths!r}.items():\n"
              "    try:\n        ck.read_config(path)\n    except ck.BadInput as err:\n        out[kind] = str(err)\n"
              "print(json.dumps(out))\n")
    p = subprocess.run([*bare, "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=30)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == {kind: f"{paths[kind]} {reason}" for kind, (_t, reason) in CONFIGS.items()}
