"""The installed SGLang in the session: read from the source the server imports (a real wheel's files
found through the server's PYTHONPATH), or from the sim's release; the doctor, the presets and the
served view follow it. Sims are started as `... > access.log 2> server.log`, as SGLang logs to stderr.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from eagle3_tui.profile import Profile
from eagle3_tui.session import LogBatch, Session
from eagle3_tui.session.launch import LaunchSpec
from eagle3_tui.sglang.logline import HttpAccess
from tests.plugins.world import SERVER_START_S, free_port, make_draft_dir
from tests.sglang_wheels import wheel

READY = "The server is fired up and ready to roll!"
TRAINED = (-1, 1, 5)
"""The generic ids of the demo world's trained wiring: boundaries 0, 2, 6 (its slots [:-1])."""


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    return tmp_path / "data"


def _unpack_sglang(version: str, dest: Path) -> Path:
    """The wheel's `sglang/` Python files under `dest` (a site directory); nothing is imported."""
    with zipfile.ZipFile(wheel(version)) as zf:
        for name in zf.namelist():
            if name.startswith("sglang/") and name.endswith(".py"):
                zf.extract(name, dest)
    return dest / "sglang"


async def test_read_from_the_source_the_server_imports(tmp_path: Path, any_host: Any) -> None:
    """A server process whose PYTHONPATH holds SGLang 0.5.6: the session reads that package's own files,
    through a LocalHost and over SSH."""
    from eagle3_tui.session.host.probe import read_installed

    site = tmp_path / "site"
    _unpack_sglang("0.5.6", site)
    spec = LaunchSpec.from_argv([sys.executable, "-m", "sglang.launch_server", "--model-path", "/m"],
                                cwd=str(tmp_path), env={"PYTHONPATH": str(site)})
    got, where = await read_installed(any_host, spec, Profile("h", local=True), "Qwen3ForCausalLM", 36)
    assert where == str(site / "sglang")
    assert got is not None and got.version == "0.5.6" and got.embed_capture
    assert any(n.how == "read from source" for n in got.notes)
    ids = got.evaluate((-1, 17, 32))
    assert ids.captures == (0, 18, 33) and ids.prefill_only and ids.captures_cuda_graph == (2, 18, 33)
    # a source checkout run from its python/ directory: the cwd is on the server's path
    checkout = LaunchSpec.from_argv([sys.executable, "-m", "sglang.launch_server", "--model-path", "/m"],
                                    cwd=str(site), env={})
    got, where = await read_installed(any_host, checkout, Profile("h", local=True), "LlamaForCausalLM", 32)
    assert where == str(site / "sglang") and got is not None and not got.embed_capture
    # no sglang on that path: nothing read, and the session falls back to the version
    bare = LaunchSpec.from_argv([sys.executable, "-m", "sglang.launch_server", "--model-path", "/m"],
                                cwd=str(tmp_path), env={"PYTHONPATH": str(tmp_path / "empty")})
    assert (await read_installed(any_host, bare, Profile("h", local=True), "Qwen3ForCausalLM", 36))[0] is None


def test_version_fallback_says_assumed() -> None:
    from eagle3_tui.session.host.facts import FactsSnapshot, build_facts
    from eagle3_tui.session.host.probe import TargetInfo

    t = TargetInfo(arch="DeepseekV3ForCausalLM", num_layers=61,
                   draft_text='{"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 29, 57]}}')
    f = build_facts(FactsSnapshot(target=t, server_info={"version": "0.5.23"}))
    assert f.installed is not None and f.installed.source.startswith("assumed from version")
    assert f.installed.captures == (2, 30, 58)  # 0.5.17+: all +1, because the first id is 1
    assert f.installed.evaluate((2, 30, 58)).captures == (2, 30, 58)  # otherwise verbatim
    assert build_facts(FactsSnapshot(target=t)).installed is None


class Sim:
    """A sim server in its own process group, its log split as `> access.log 2> server.log`."""

    def __init__(self, world: Any, workdir: Path, layer_ids: tuple[int, ...] | None, *flags: str) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.world = world
        draft = make_draft_dir(world, workdir / "draft", layer_ids=list(layer_ids) if layer_ids else None)
        self.port = free_port()
        self.server_log = workdir / "server.log"
        self.access_log = workdir / "access.log"
        argv = [sys.executable, "-m", "eagle3_tui.sim.server", "--model-path", str(world.target_dir),
                "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(draft),
                "--speculative-num-steps", "3", "--speculative-eagle-topk", "1",
                "--speculative-num-draft-tokens", "4", "--sim-background-load", "1", "--decode-log-interval", "8",
                "--host", "127.0.0.1", "--port", str(self.port), *flags]
        with open(self.access_log, "wb") as out, open(self.server_log, "wb") as err:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=err, start_new_session=True, cwd=workdir)
        deadline = time.monotonic() + SERVER_START_S
        while READY not in self.server_log.read_text(errors="replace"):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise AssertionError(f"sim did not start:\n{self.server_log.read_text()[-2000:]}")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)


@pytest.fixture
def sims(demo_world: Any, tmp_path: Path) -> Iterator[Any]:
    started: list[Sim] = []

    def start(name: str, layer_ids: tuple[int, ...] | None, *flags: str) -> Sim:
        sim = Sim(demo_world, tmp_path / name, layer_ids, *flags)
        started.append(sim)
        return sim

    yield start
    for sim in started:
        sim.stop()


async def _attached(sim: Sim, tmp_path: Path, name: str) -> Session:
    """A session given only the port (and the data's slots): discovery finds the process and its log."""
    profile = Profile(name=name, local=True, port=sim.port, state_dir=str(tmp_path / f"state-{name}"),
                      data_slots=(0, 2, 6, 9))
    session = Session(profile)
    await session.attach()
    return session


async def _until(pred: Any, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.1)


@pytest.mark.slow
async def test_sim_0_5_6_graphs_replay_the_default(sims: Any, tmp_path: Path, data_dir: Path) -> None:
    """0.5.6 with CUDA graphs: the ids reach prefill only; the doctor says so and offers the flag."""
    sim = sims("v056", TRAINED, "--sglang-version", "0.5.6", "--sim-target-arch", "qwen3")
    session = await _attached(sim, tmp_path, "v056")
    try:
        s = session.server
        assert s.state == "ready" and s.log_path == str(sim.server_log)  # stderr's file, not stdout's
        assert s.boundaries == (0, 2, 6) and s.decode_boundaries == (2, 6, 9)
        await _until(lambda: session.telemetry.decode_lines >= 2)  # charted live from server.log
        assert "Decode batch" not in sim.access_log.read_text() and "POST /generate" in sim.access_log.read_text()
        # stdout's access lines are their own file: followed too, into the log pane, not into the run
        assert session.access_log == str(sim.access_log)
        batches: list[Any] = []
        session.add_listener(lambda ev: batches.append(ev) if isinstance(ev, LogBatch) else None)
        await _until(lambda: any("GET /server_info" in line for b in batches for line in b.lines))
        assert any(isinstance(e, HttpAccess) for b in batches for e in b.events)
        assert s.state == "ready" and session.server.state == "ready"
        findings = await session.survey.refresh_findings()
        hit = next(f for f in findings if f.rule_id == "ids-prefill-only")
        assert "h2" in hit.title and session.facts is not None and session.facts.installed is not None
        assert session.facts.installed.source.startswith("assumed from version 0.5.6")
        names = {p.name: p for p in session.presets.available()}
        assert names["train-[:-1]"].layer_ids == TRAINED and names["train-[:-1]"].boundaries == (0, 2, 6)
        assert names["disable-cuda-graph"].flags == {"disable-cuda-graph": True}
        plan = await session.presets.plan("train-[:-1]")
        assert plan.ok and any("decode under CUDA graphs replays" in w for w in plan.warnings)
        assert (await session.presets.plan("disable-cuda-graph")).after.rstrip().endswith("--disable-cuda-graph")
    finally:
        await session.close()


@pytest.mark.slow
async def test_sim_0_5_23_and_0_4_9(sims: Any, tmp_path: Path, data_dir: Path) -> None:
    """0.5.23: the ids reach decode, no finding; 0.4.9 Llama: -1 needs the patch, so no preset for it."""
    sim = sims("v0523", TRAINED, "--sglang-version", "0.5.23", "--sim-target-arch", "qwen3")
    session = await _attached(sim, tmp_path, "v0523")
    try:
        assert session.server.boundaries == (0, 2, 6) and session.server.decode_boundaries is None
        assert "server_args={" in sim.server_log.read_text()  # the 0.5.20+ start line
        findings = await session.survey.refresh_findings()
        assert not any(f.rule_id == "ids-prefill-only" for f in findings)
        assert "disable-cuda-graph" not in {p.name for p in session.presets.available()}
    finally:
        await session.close()
    old = sims("v049", (1, 5, 8), "--sglang-version", "0.4.9")
    session = await _attached(old, tmp_path, "v049")
    try:
        assert session.server.boundaries == (2, 6, 9) and session.server.decode_boundaries is None  # = the default
        plan = await session.presets.plan("train-[:-1]")
        assert not plan.ok and "embed-capture patch" in plan.problems[0]
    finally:
        await session.close()


@pytest.mark.slow
async def test_sim_deepseek_v3_0_5_23_ids_verbatim(sims: Any, tmp_path: Path, data_dir: Path) -> None:
    """DeepSeek-V3 on 0.5.23 takes ids verbatim (first id not 1): the preset writes the boundaries as ids."""
    sim = sims("ds", (0, 2, 6), "--sglang-version", "0.5.23", "--sim-target-arch", "deepseek_v3")
    session = await _attached(sim, tmp_path, "ds")
    try:
        assert session.server.boundaries == (0, 2, 6)
        assert {p.name: p for p in session.presets.available()}["train-[:-1]"].layer_ids == (0, 2, 6)
        await _until(lambda: session.telemetry.decode_lines >= 1)
        accept = session.telemetry.summary(60).accept_len
        # the trained wiring really reaches the draft: nearer the world's own chain prediction for it
        # than to the default wiring's
        m = sim.world.metrics
        assert accept is not None
        assert accept > (m["trained"]["predicted_accept_len"] + m["default"]["predicted_accept_len"]) / 2, (accept, m)
    finally:
        await session.close()


@pytest.mark.slow
async def test_api_key_server_benchmarked(sims: Any, tmp_path: Path, data_dir: Path) -> None:
    """The session sends the server's own --api-key (read from its command line) as the Bearer token."""
    sim = sims("key", None, "--api-key", "s3cret")
    session = await _attached(sim, tmp_path, "key")
    try:
        info = await session.poll_server_info()
        assert info.get("speculative_algorithm") == "EAGLE3"
        result = await session.bench.run(num_prompts=2, concurrency=1, max_tokens=16)
        assert result.ok == 2 and result.errors == 0
        assert '" 401 ' not in sim.access_log.read_text()  # no access line answered 401 (a client port may hold "401")
    finally:
        await session.close()
