"""A server started with --api-key: the profile's api_key (or EAGLE3_TUI_API_KEY) is sent as a Bearer token.

One sim server with `--api-key`: a session whose profile holds the key polls and benchmarks it; a wrong
key in the profile (it wins over the command line's) and no key at all are one clear 401 sentence.
"""

from __future__ import annotations

import asyncio

import pytest

from eagle3_tui.profile import API_KEY_ENV, load_profile
from eagle3_tui.session import Session
from eagle3_tui.session.host.probe import client_options
from eagle3_tui.session.launch import LaunchSpec
from eagle3_tui.sglang.client import SGLangClient, Unauthorized
from tests.plugins.world import SPEC_ARGS, start_sim_server

KEY = "s3cret-key"


def test_api_key_from_the_profile_and_the_environment(tmp_path, monkeypatch):
    path = tmp_path / "hosts.toml"
    path.write_text('["gpu"]\napi_key = "from-file"\n')
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    assert load_profile("gpu", path).api_key == "from-file"
    monkeypatch.setenv(API_KEY_ENV, "from-env")
    assert load_profile("gpu", path).api_key == "from-env"
    path.write_text('["gpu"]\napi_key = 5\n')
    with pytest.raises(Exception, match="api_key must be a string"):
        load_profile("gpu", path)


def test_the_profiles_key_wins_over_the_command_lines():
    spec = LaunchSpec(argv=("python", "-m", "sglang.launch_server", "--api-key", "argv-key"), cwd=None)
    assert client_options(spec, 9, api_key="profile-key")["api_key"] == "profile-key"
    assert client_options(spec, 9)["api_key"] == "argv-key"
    assert client_options(None, 9)["api_key"] is None


@pytest.fixture(scope="module")
def keyed_server(demo_world, tmp_path_factory):
    """One keyed server for the module's tests (starting one takes seconds)."""
    server = start_sim_server(demo_world, tmp_path_factory.mktemp("srv"), args=(*SPEC_ARGS, "--api-key", KEY))
    yield server
    server.stop()


def _session(tmp_path, monkeypatch, port, key: str | None) -> Session:
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv(API_KEY_ENV, raising=False)
    path = tmp_path / "hosts.toml"
    path.write_text(f'[localhost]\nport = {port}\nstate_dir = "{tmp_path / "state"}"\n'
                    + (f'api_key = "{key}"\n' if key else ""))
    return Session(load_profile("localhost", path, local=True))


def test_a_keyed_server_polled_and_benchmarked_through_the_profiles_key(keyed_server, tmp_path, monkeypatch):
    async def go() -> None:
        s = _session(tmp_path, monkeypatch, keyed_server.port, KEY)
        try:
            await s.attach()
            info = await s.poll_server_info()
            assert info.get("speculative_algorithm") == "EAGLE3"
            r = await s.bench.run(num_prompts=2, concurrency=2, max_tokens=8)
            assert r.ok == 2 and r.errors == 0 and r.output_tps > 0
        finally:
            await s.close()

    asyncio.run(go())


def test_a_keyed_server_without_the_key_or_with_a_wrong_one_is_one_401_sentence(keyed_server, tmp_path, monkeypatch):
    async def go() -> None:
        bare = SGLangClient(**client_options(None, keyed_server.port))
        try:
            with pytest.raises(Unauthorized) as err:
                await bare.server_info()
            said = str(err.value)
            assert "answered 401 to /server_info with no API key" in said and "api_key" in said
            assert "\n" not in said
        finally:
            await bare.aclose()
        s = _session(tmp_path, monkeypatch, keyed_server.port, "wrong")
        try:
            await s.attach()
            with pytest.raises(Unauthorized, match="with a wrong API key: it runs with --api-key"):
                await s.bench.run(num_prompts=1, concurrency=1, max_tokens=4)
        finally:
            await s.close()

    asyncio.run(go())
