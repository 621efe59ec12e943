"""The doctor learns the trained wiring from the training data: `doctor --data GLOB [--data-slots ..]`.

Pure parts (the slots against the data's first file, the layout's slice) without a host; the data's
first file read by the check's own reader (`datasets.describe`); one run of the real command on the
demo world's seeds' flags, with the data read on the host (LocalHost) by the host's Python.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from eagle3_tui import cli
from eagle3_tui.eagle.checkpoint import BadInput
from eagle3_tui.errors import UserError
from eagle3_tui.profile import demo_profile
from eagle3_tui.session.host.training_data import DataHead, parse_slots, resolve

HEAD = DataHead("/d/*.pt", "speculators-v1", 10, "/d/data_0.pt", 4, 128, (0, 1, 2), 3, (0,))


def test_given_slots_must_fit_the_data_and_the_target():
    got = resolve(HEAD, (0, 2, 6, 9), num_layers=12)
    assert got.slots == (0, 2, 6, 9) and got.convention == "[:-1]"
    with pytest.raises(UserError, match=r"name 3 boundaries but /d/data_0\.pt holds 4 hidden-state slots"):
        resolve(HEAD, (0, 2, 6), num_layers=12)
    with pytest.raises(UserError, match="boundary 13 but the target has 12 layers"):
        resolve(HEAD, (0, 2, 6, 13), num_layers=12)


def test_slots_text_is_integers_or_one_sentence():
    assert parse_slots("0, 3,31,59") == (0, 3, 31, 59)
    assert parse_slots("") is None
    with pytest.raises(UserError, match="--data-slots: '0,x' is not"):
        parse_slots("0,x")
    with pytest.raises(UserError, match="0 \\(the embedding output\\) or more"):
        parse_slots("-1,2,30,58")


def test_every_way_in_refuses_negative_slots_with_the_same_sentence(tmp_path, capsys):
    """One parser (eagle.wiring.parse_slots): `check --data-slots`, the check itself, the doctor's
    `--data-slots` and a profile's `data_slots` all refuse a negative boundary alike."""
    from eagle3_tui.cli import main
    from eagle3_tui.eagle.accuracy import parse_args
    from eagle3_tui.profile import profile_from_table

    why = "boundaries are 0 (the embedding output) or more, got -1, 2"
    assert main(["check", "--draft", str(tmp_path), "--data", str(tmp_path), "--data-slots=-1,2"]) == 2
    assert capsys.readouterr().err == f"eagle3-tui: --data-slots: {why}\n"
    with pytest.raises(SystemExit, match=re.escape(f"--data-slots: {why}")):
        parse_args(["--draft", "d", "--data", "x", "--data-slots=-1,2"])
    with pytest.raises(UserError, match=re.escape(f"data_slots: {why}")):
        profile_from_table("h", {"data_slots": [-1, 2]})


def test_layout_slice_and_inferred_slots():
    specforge = DataHead("g", "specforge", 1, "f", 3, 64, (0, 1, 2), None)
    assert resolve(specforge, (0, 3, 31), num_layers=60).convention == "[:]"
    st = DataHead("g", "speculators", 1, "hs_0.safetensors", 4, 64, (0, 1, 2), 3)
    inferred = resolve(st, None, num_layers=60)
    assert inferred.slots == (2, 30, 57, 60) and "generator default" in inferred.note
    # slot 0 is the embedding: not the generator's layout, so the slots stay unknown and the line says why
    unknown = resolve(DataHead("g", "speculators", 1, "f", 4, 64, (0, 1, 2), 3, (0,)), None, num_layers=60)
    assert unknown.slots is None and "slot 0 looks like the embedding output" in unknown.note
    assert "--data-slots" in unknown.summary()


def test_describe_reads_the_first_file_only_and_names_a_bad_shape(demo_world, tmp_path):
    import torch

    from eagle3_tui.eagle.datasets import describe

    d = describe(str(demo_world.data_glob))
    assert (d["layout"], d["num_slots"], d["training_slots"], d["final_slot"], d["embed_slots"]) == (
        "speculators-v1", 4, [0, 1, 2], 3, [0])
    torch.save({"input_ids": torch.zeros(5, dtype=torch.long), "loss_mask": torch.ones(5),
                "hidden_states": [torch.zeros(5)] * 4}, tmp_path / "data_0.pt")
    with pytest.raises(BadInput, match=r"'hidden_states' has shape \[5\] \(expected \[seq_len, hidden\]\)"):
        describe(str(tmp_path / "data_*.pt"))


def _profile_file(world: Any, tmp_path: Path) -> Path:
    """The demo host's profile (the seeds' flags, the draft without a layer-id key) with no data in it."""
    prof = demo_profile(world, port=1, state_dir=tmp_path / "state")
    keys = {"launch_command": prof.launch_command, "log_path": prof.log_path, "draft_path": prof.draft_path,
            "target_path": prof.target_path, "state_dir": prof.state_dir, "port": 1}
    path = tmp_path / "hosts.toml"
    path.write_text("[localhost]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items()))
    return path


@pytest.fixture
def doctor(demo_world, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    path = _profile_file(demo_world, tmp_path)

    def run(*extra: str) -> tuple[int, str, str]:
        rc = cli.main(["doctor", "--local", "--profile", str(path), *extra])
        out = capsys.readouterr()
        return rc, out.out, out.err

    return run


@pytest.mark.slow
def test_doctor_with_data_on_the_demos_server_reports_the_steps_override_and_the_wiring_mismatch(
        demo_world, sim_server, tmp_path, monkeypatch, capsys):
    """The demo's sim server on the seeds' flags (steps 1, draft tokens 16, topk 1, no layer-id key),
    found on the host by its port; the data given on the command line only."""
    from tests.plugins.world import make_draft_dir

    draft = make_draft_dir(demo_world, tmp_path / "draft")
    server = sim_server("--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "1",
                        "--speculative-num-draft-tokens", "16", "--speculative-eagle-topk", "1",
                        "--sim-embed-capture-patch", draft_dir=draft)
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    hosts = tmp_path / "hosts.toml"
    hosts.write_text(f'[localhost]\nport = {server.port}\nstate_dir = "{tmp_path / "state"}"\n')
    rc = cli.main(["doctor", "--local", "--profile", str(hosts), "--data", str(demo_world.data_glob),
                   "--data-slots", "0,2,6,9"])
    out = capsys.readouterr().out
    assert rc == 0 and f"server: ready (pid {server.proc.pid}" in out
    assert "4 slots of 128, slots hold boundaries 0, 2, 6, 9, trainer feeds [:-1]" in out
    assert "steps-override: --speculative-num-draft-tokens 16 is silently replaced by 2" in out
    assert "wiring-mismatch: the draft was trained on embed, h2, h6 but is served h2, h6, h9" in out


def test_doctor_without_data_says_the_trained_wiring_is_unknown_in_one_line(doctor):
    rc, out, _ = doctor()
    assert rc == 0 and "wiring-mismatch" not in out and "steps-override" in out
    line = next(ln for ln in out.splitlines() if "trained wiring unknown" in ln)
    assert "--data GLOB [--data-slots B0,B1,..]" in line


def test_a_profile_glob_that_cannot_be_read_is_a_line_not_an_exit(demo_world, tmp_path, monkeypatch, capsys):
    """The profile's data_glob without slots is read to infer them; when it cannot be, the doctor goes on."""
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    path = _profile_file(demo_world, tmp_path)
    path.write_text(path.read_text() + 'data_glob = "/nonexistent/hs_*.safetensors"\n')
    assert cli.main(["doctor", "--local", "--profile", str(path)]) == 0
    out = capsys.readouterr().out
    assert "trained wiring unknown: the profile's data_glob cannot be read (the data pattern " in out
    assert "steps-override" in out


@pytest.mark.parametrize(("extra", "said"), [
    (("--data", "/nonexistent/data_*.pt"), "the data pattern /nonexistent/data_*.pt matches no files"),
    (("--data", "/nonexistent/data_*.pt", "--data-slots", "0,two"), "--data-slots: '0,two' is not"),
])
def test_doctor_bad_data_input_is_one_sentence_exit_2(doctor, extra, said):
    rc, _out, err = doctor(*extra)
    assert rc == 2 and said in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_doctor_over_ssh_reads_the_data_on_the_host(sshd, demo_world, tmp_path, monkeypatch, capsys):
    """`doctor --host ALIAS --data ..` through the real sshd: the first file read by the host's Python."""

    from tests.plugins.world import make_draft_dir

    draft = make_draft_dir(demo_world, tmp_path / "draft")
    prof = sshd.write_profile(tmp_path / "hosts.toml", draft_path=draft, target_path=demo_world.target_dir,
                              state_dir=tmp_path / "state", port=1)
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    assert cli.main(["doctor", "--json", "--host", sshd.alias, "--profile", str(prof),
                     "--data", str(demo_world.data_glob), "--data-slots", "0,2,6,9"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["training_data"] == {"glob": str(demo_world.data_glob), "slots": [0, 2, 6, 9],
                                    "convention": "[:-1]", "note": ""}
    mismatch = next(f for f in doc["findings"] if f["rule_id"] == "wiring-mismatch")
    assert "trained on embed, h2, h6 but is served h2, h6, h9" in mismatch["title"]
