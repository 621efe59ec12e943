"""Shared fixtures. Each lives in tests/plugins/<part>.py next to what it starts; imported here so
every test module can use them by name."""

from __future__ import annotations

import os
import tempfile

import pytest

from tests.plugins.real_vllm import *  # noqa: F403
from tests.plugins.sshd import *  # noqa: F403
from tests.plugins.world import *  # noqa: F403

# plugins with hooks of their own: the lanes from fixtures, and the real-SGLang fixtures
pytest_plugins = ["tests.plugins.lanes", "tests.plugins.real_sglang"]


@pytest.fixture(autouse=True)
def _isolated_dirs(tmp_path, monkeypatch):
    """Every test gets its own data and config dirs (ledger, profiles, user themes): a developer's home
    never leaks in, and tests running at once in pytest-xdist workers never share a ledger. A test
    that needs other dirs sets them itself; what it starts inherits these."""
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("EAGLE3_TUI_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))


@pytest.fixture(scope="session", autouse=True)
def _run_tmpdir(tmp_path_factory):
    """The host-side temp folders of this run (a check job's `eagle3-check-*`, a demo's world copy) go
    in the run's own temp dir, a separate one per pytest-xdist worker: a test that looks for its job's
    folder or process under TMPDIR never sees another worker's. The sshd fixture passes it on."""
    tmp = tmp_path_factory.mktemp("tmp", numbered=False)
    old = os.environ.get("TMPDIR")
    os.environ["TMPDIR"] = str(tmp)
    tempfile.tempdir = None  # gettempdir() reads TMPDIR again
    yield
    if old is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = old
    tempfile.tempdir = None
