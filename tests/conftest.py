"""Shared fixtures. Each lives in tests/plugins/<part>.py next to what it starts; imported here so
every test module can use them by name."""

from tests.plugins.sshd import *  # noqa: F403
from tests.plugins.world import *  # noqa: F403
