"""Settings written back into hosts.toml: one host's keys replaced or added in place, everything else as
written (other tables, comments, key order); a table the editor cannot change safely is refused."""

from __future__ import annotations

import sys

import pytest

from eagle3_tui.errors import UserError
from eagle3_tui.profile import read_profiles
from eagle3_tui.profile.write import edit_table, save_profile_values

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

HOSTS = """# my GPU hosts
["gpu-box"]
address = "10.0.0.5"   # the big one
data_slots = [
  0, 3,   # embed, l3 ]
  31, 59,
]
log_path = "/root/s[1].log"

["gpu-box".presets."embed-3-31"]
layer_ids = [-1, 2, 30]

[other]
address = "10.0.0.6"
"""


def test_keys_replaced_in_place_or_added_to_the_table_and_nothing_else_moves():
    out = edit_table(HOSTS, "gpu-box", {"data_glob": "/data/hs/*.pt", "data_slots": (0, 3, 31, 59, 61)})
    assert out.startswith('# my GPU hosts\n["gpu-box"]\naddress = "10.0.0.5"   # the big one\n'
                          'data_slots = [0, 3, 31, 59, 61]\nlog_path = "/root/s[1].log"\ndata_glob = "/data/hs/*.pt"\n\n'
                          '["gpu-box".presets."embed-3-31"]\n')
    assert out.endswith('[other]\naddress = "10.0.0.6"\n')
    data = tomllib.loads(out)
    assert data["gpu-box"]["presets"] == {"embed-3-31": {"layer_ids": [-1, 2, 30]}}


def test_a_new_table_is_appended_and_strings_are_escaped():
    out = edit_table(HOSTS, "new host", {"data_glob": '/d/"q"\\x.pt'})
    assert out.startswith(HOSTS) and tomllib.loads(out)["new host"] == {"data_glob": '/d/"q"\\x.pt'}
    assert tomllib.loads(edit_table("", "localhost", {"data_slots": (0, 2)})) == {"localhost": {"data_slots": [0, 2]}}


def test_save_is_atomic_reads_back_and_refuses_what_it_cannot_edit(tmp_path):
    path = tmp_path / "hosts.toml"
    path.write_text(HOSTS)
    save_profile_values(path, "other", {"data_glob": "/x/*.pt", "data_slots": (0, 1, 2, 3)})
    prof = read_profiles(path)["other"]
    assert (prof.data_glob, prof.data_slots, prof.address) == ("/x/*.pt", (0, 1, 2, 3), "10.0.0.6")
    assert path.read_text().startswith(HOSTS.split("[other]")[0])
    assert [p.name for p in tmp_path.iterdir()] == ["hosts.toml"]  # no temp left behind
    # the table's keys written as dotted keys of the file's root: not edited in place, refused, file kept
    dotted = 'other.address = "10.0.0.6"\n'
    path.write_text(dotted)
    with pytest.raises(UserError, match="add data_glob by hand"):
        save_profile_values(path, "other", {"data_glob": "/x"})
    assert path.read_text() == dotted
    path.write_text("[broken\n")
    with pytest.raises(UserError, match="cannot be read as TOML"):
        save_profile_values(path, "other", {"data_glob": "/x"})
