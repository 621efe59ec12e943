"""Broken inputs are one sentence or a finding with evidence, never a traceback or "no findings":
profiles (UTF-8, shell quoting), the draft config (not JSON, empty, a list, a string, NaN, nested past
the recursion limit), the checkpoint, the training data, and a corrupt ledger. Real files, LocalHost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eagle3_tui.errors import UserError
from eagle3_tui.profile import Profile, read_profiles
from eagle3_tui.session import Session

TARGET = {"architectures": ["LlamaForCausalLM"], "num_hidden_layers": 12, "hidden_size": 32}


def test_a_profile_that_is_not_utf8_is_one_sentence(tmp_path: Path) -> None:
    p = tmp_path / "hosts.toml"
    p.write_bytes(b'["gpu"]\naddress = "caf\xe9"\n')
    with pytest.raises(UserError, match=r"is not UTF-8 text \(byte 22\); TOML files must be UTF-8"):
        read_profiles(p)


def test_an_unbalanced_quote_in_launch_command_is_one_sentence(tmp_path: Path) -> None:
    p = tmp_path / "hosts.toml"
    p.write_text('["gpu"]\nlaunch_command = "python -m sglang.launch_server --model-path \'/m"\n')
    with pytest.raises(UserError, match=r"host 'gpu': launch_command is not valid shell quoting \(No closing quotation\)"):
        read_profiles(p)


def _session(tmp_path: Path, **kw) -> Session:
    draft, target = tmp_path / "draft", tmp_path / "target"
    draft.mkdir(exist_ok=True)
    target.mkdir(exist_ok=True)
    (target / "config.json").write_text(json.dumps(TARGET))
    prof = Profile(name="here", local=True, port=1, draft_path=str(draft), target_path=str(target),
                   state_dir=str(tmp_path / "state"), **kw)
    return Session(prof)


BROKEN_CONFIGS = {
    "not json": (b"{oops", "is not valid JSON"),
    "empty": (b"", "is not valid JSON"),
    "a list": (b"[1, 2]", "is a JSON list, not an object"),
    "a string": (b'"config"', "is a JSON string, not an object"),
    "NaN": (b'{"hidden_size": NaN}', "holds NaN, which is not a JSON number"),
    "too deep": (b'{"a": ' + b"[" * 100000 + b"]" * 100000 + b"}", "nested too deeply"),
    "not utf-8": (b'{"name": "\xff"}', "is not UTF-8 text"),
}


@pytest.mark.parametrize("case", list(BROKEN_CONFIGS))
async def test_doctor_reports_a_broken_draft_config_with_evidence(tmp_path, monkeypatch, case):
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    data, says = BROKEN_CONFIGS[case]
    session = _session(tmp_path)
    (tmp_path / "draft" / "config.json").write_bytes(data)
    async with session:
        findings = await session.survey.refresh_findings()
        f = next(f for f in findings if f.rule_id == "draft-config-malformed")
        assert f.severity == "error" and any(says in e.detail for e in f.evidence), f.evidence
        assert any(e.source == "SGLang" and "will not start" in e.detail for e in f.evidence)
        with pytest.raises(UserError, match=says.split(",")[0]) as info:
            await session.presets.plan("train-[:-1]" if session.profile.data_slots else "sglang-default")
        assert "cannot be applied" in str(info.value) and "\n" not in str(info.value)


async def test_doctor_reports_a_missing_config_a_corrupt_checkpoint_and_missing_data(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    session = _session(tmp_path, data_glob=str(tmp_path / "nowhere" / "*.ckpt"))
    (tmp_path / "draft" / "model.safetensors").write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{trunc")
    async with session:
        ids = {f.rule_id: f for f in await session.survey.refresh_findings()}
    assert "draft-config-unreadable" in ids and "does not exist" in ids["draft-config-unreadable"].evidence[0].detail
    assert "checkpoint-unreadable" in ids
    assert "none with a readable header" in ids["checkpoint-unreadable"].evidence[0].detail
    assert "data-unreadable" in ids and ids["data-unreadable"].evidence[0].detail == "no file matches"


async def test_a_corrupt_ledger_is_said_not_skipped(tmp_path, monkeypatch):
    data = tmp_path / "data"
    data.mkdir()
    (data / "ledger.sqlite3").write_bytes(b"this is not a database" * 100)
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(data))
    session = _session(tmp_path)
    notices = []
    session.add_listener(lambda ev: notices.append(ev) if type(ev).__name__ == "Notice" else None)
    session.records.record("benchmark", {}, {"tok_s": 1.0})
    assert session.records.problem is not None
    assert "could not be written" in session.records.problem and "this benchmark run is not recorded" in session.records.problem
    assert any("not recorded" in n.message for n in notices)
    await session.close()
