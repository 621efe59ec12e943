"""Shared fixtures. Each lives in tests/plugins/<part>.py next to what it starts; imported here so
every test module can use them by name."""

from __future__ import annotations

import pytest

from tests.plugins.sshd import *  # noqa: F403
from tests.plugins.world import *  # noqa: F403


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path, monkeypatch):
    """Every test gets its own data and config dirs (ledger, profiles, user themes): a developer's home
    never leaks in, and tests running at once in pytest-xdist workers never share a ledger. A test
    that needs other dirs sets them itself; what it starts inherits these."""
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("EAGLE3_TUI_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
