"""The suite's lanes, from the fixtures a test uses (directly or through another fixture), never from a
hand-written marker: a new test that asks for the demo world or an sshd is in that lane by construction.

    make test-fast   -m "not world and not sshd and not real_sglang and not real_vllm": the inner loop
    make test        every lane

The markers are declared in pyproject.toml ([tool.pytest.ini_options] markers).
"""

from __future__ import annotations

import pytest

# fixture name -> the lane (marker) of every test that uses it
LANES: dict[str, str] = {
    # the cached demo world (built once, about 4 CPU-minutes) and the sim servers started on it
    "demo_world": "world",
    "sim_server": "world",
    # a real OpenSSH sshd on 127.0.0.1 and the hosts connected through it
    "sshd": "sshd",
    "sshd_bastion": "sshd",
    "ssh_host_factory": "sshd",
    "ssh_host": "sshd",
    # the real engines' lanes: each in its own venv, serving the demo world
    "real_sglang": "real_sglang",
    "real_sglang_env": "real_sglang",
    "real_vllm": "real_vllm",
}

# parametrised fixtures that reach a lane's fixture only for some params (through getfixturevalue,
# which the fixture closure does not show): (fixture, param) -> lane
PARAM_LANES: dict[tuple[str, str], str] = {("any_host", "ssh"): "sshd"}

FAST = " and ".join(f"not {m}" for m in sorted(set(LANES.values())))


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by these markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        names = getattr(item, "fixturenames", ())
        params = getattr(getattr(item, "callspec", None), "params", {})
        lanes = {LANES[n] for n in names if n in LANES}
        lanes |= {lane for (n, value), lane in PARAM_LANES.items() if n in names and params.get(n) == value}
        for lane in sorted(lanes):
            if item.get_closest_marker(lane) is None:
                item.add_marker(lane)
