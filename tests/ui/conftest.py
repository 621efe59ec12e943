"""UI test set-up: an isolated data/config dir (ledger, user themes) so a developer's home never leaks in."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("EAGLE3_TUI_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
