"""End to end against the real sim server, through LocalHost and through the real sshd fixture.

The story of the seeds on the demo world: started with `--speculative-num-steps 1
--speculative-num-draft-tokens 16 --speculative-eagle-topk 1` and no layer-id key, the doctor
reports `steps-override` and `wiring-mismatch` with evidence; the `train-[:-1]` preset and a
restart raise the measured accept length and the ledger shows both runs; a preset that makes the
server fail ends in `failed` with the log tail, and rollbacks restore the launch command and the
draft config byte for byte with a healthy server; a second restart while one runs is refused;
read-only refuses. Benchmarks are tiny (CPU is scarce); no wall-clock thresholds.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from eagle3_tui.eagle.wiring import format_boundaries
from eagle3_tui.errors import UserError
from eagle3_tui.profile import Preset, Profile, demo_profile
from eagle3_tui.session import ReadOnlyError, RestartFailed, RestartProgress, Session
from eagle3_tui.session.presets.catalog import set_flags
from tests.plugins.ports import free_port

pytestmark = pytest.mark.slow

BENCH = {"num_prompts": 4, "concurrency": 2, "max_tokens": 24}
AS_LLAMA = Preset("as-llama", "flags", flags={"sim-target-arch": "llama"},
                  description="the target served as Llama: 0.5.6's llama.py cannot capture the embedding for -1")


def _profile(world, tmp_path: Path) -> Profile:
    """The demo profile (the seeds' broken flags), with one background request instead of four (CPU is
    scarce) and CUDA graphs off: on the demo's SGLang 0.5.6 with graphs on, layer ids reach prefill only
    (the console story covers that), so a wiring preset would change only each request's first draft,
    and whether that raised the accept length was up to the world."""
    profile = demo_profile(world, port=free_port(), state_dir=tmp_path / "demo")
    profile.launch_command = set_flags(profile.launch_command, {"sim-background-load": 1, "disable-cuda-graph": True})
    profile.demo = False  # behave like a real host profile (read-only would refuse starting it)
    profile.launch_env = {"SGLANG_E2E_MARK": "kept", "E2E_NOT_KEPT": "x"}
    return profile


@pytest.fixture
def ledger_dir(tmp_path, monkeypatch) -> Path:
    d = tmp_path / "data"
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(d))
    return d


async def _story(session: Session, world, *, full: bool) -> None:
    events: list = []
    session.add_listener(events.append)
    await session.attach()
    assert session.server.state == "stopped", "nothing runs on the fresh port yet"
    await session.control.start()
    s = session.server
    assert s.state == "ready" and s.pgid
    # SGLang's rule: topk 1 forces draft tokens = steps + 1 = 2
    assert (s.steps, s.topk, s.draft_tokens, s.requested_draft_tokens) == (1, 1, 2, 16)
    assert s.layer_ids is None and s.active_preset == "sglang-default"

    # --- a second session with only the port discovers the server from the process table
    bare = Profile(name=session.profile.name + "-bare", local=session.profile.local, port=s.port,
                   state_dir=str(Path(session.profile.local_state_dir()).parent / "bare"))
    other = Session(bare, host=session.host)
    try:
        await other.attach()
        o = other.server
        assert o.pid == s.pgid and o.state == "ready" and o.argv == s.argv
        assert o.log_path == session.profile.log_path  # what the server's stdout points to in /proc
        assert (o.steps, o.draft_tokens) == (1, 2)
        # the relaunch environment came from /proc/<pid>/environ, all of it (tests/test_restart_env.py)
        assert other.spec.env.get("SGLANG_E2E_MARK") == "kept" and other.spec.env.get("E2E_NOT_KEPT") == "x"
        assert other.spec.env_whole
    finally:
        await other.close()

    if full:
        await _headless_commands(session, world)

    # --- the doctor, with evidence
    by_id = {f.rule_id: f for f in await session.survey.refresh_findings()}
    assert "steps-override" in by_id and "wiring-mismatch" in by_id, sorted(by_id)
    steps_ev = " ".join(e.detail for e in by_id["steps-override"].evidence)
    assert "--speculative-num-steps 1" in steps_ev and "--speculative-num-draft-tokens 16" in steps_ev
    wiring = by_id["wiring-mismatch"]
    trained = format_boundaries(world.slot_boundaries[:-1])
    assert trained in wiring.title and any(session.target.draft_config_path in e.source or "config" in e.source
                                           for e in wiring.evidence)

    # --- measured before
    before = await session.bench.run(**BENCH)
    assert before.ok == BENCH["num_prompts"] and before.accept_len is not None

    # --- train-[:-1], and a second restart while it runs is refused
    config = session.target.draft_config_path
    original = Path(config).read_bytes() if session.profile.local else None
    plan = await session.presets.plan("train-[:-1]")
    assert plan.ok, plan.problems
    assert "eagle_aux_hidden_state_layer_ids" in plan.diff
    task = asyncio.ensure_future(session.presets.apply(plan))
    await asyncio.sleep(0)
    with pytest.raises(UserError, match="already running"):
        await session.control.restart()
    await task
    assert session.server.state == "ready"
    assert session.server.boundaries == tuple(world.slot_boundaries[:-1])
    assert session.server.active_preset == "train-[:-1]"
    assert "wiring-mismatch" not in {f.rule_id for f in session.findings}
    after = await session.bench.run(**BENCH)
    assert after.accept_len > before.accept_len, (before.accept_len, after.accept_len)

    rows = [r for r in session.records.rows() if r.kind == "benchmark"]
    assert len(rows) == 2
    assert rows[0].config["layer_ids"] is None and rows[1].config["layer_ids"] == list(plan.preset.layer_ids)
    assert rows[1].accept_len > rows[0].accept_len
    kinds = [r.kind for r in session.records.rows()]
    assert "preset" in kinds and kinds.count("restart") >= 2
    phases = [e.phase for e in events if isinstance(e, RestartProgress)]
    assert {"stopping", "port", "launching", "loading", "ready"} <= set(phases)

    print(f"\naccept length (requests): {before.accept_len:.3f} -> {after.accept_len:.3f}; "
          f"log window {before.accept_len_log} -> {after.accept_len_log}; "
          f"tok/s {before.output_tps:.1f} -> {after.output_tps:.1f}")
    if not full:
        await _baseline(session)

    # --- a preset that makes the server fail: -1 ids on a target whose 0.5.6 model file cannot capture it
    session.profile.presets.append(AS_LLAMA)
    argv_before = session.server.argv
    bad = await session.presets.plan("as-llama")
    assert bad.ok and "--sim-target-arch llama" in bad.diff
    with pytest.raises(RestartFailed):
        await session.presets.apply(bad)
    failed = session.server
    assert failed.state == "failed"
    assert failed.log_tail and len(failed.log_tail) <= 40
    assert failed.message
    assert failed.argv[failed.argv.index("--sim-target-arch") + 1] == "llama"

    # --- rollback: the launch command comes back exactly, the server is healthy
    await session.presets.rollback()
    assert session.server.state == "ready" and session.server.argv == argv_before
    c = await session.client()
    assert await c.health()
    # --- rollback again: the draft config comes back byte for byte (the original: no layer-id key).
    # Locally from another process (`eagle3-tui rollback`), through the undo stack this machine keeps.
    if full:
        out = await asyncio.to_thread(_cli, session, world, "rollback", "--yes")
        assert "ready" in out and "server: ready" in out.splitlines()[-1]
        await session.survey.refresh_servers()
        await session.survey.read_launch_facts()
    else:
        await session.presets.rollback()
    assert session.server.state == "ready" and session.server.layer_ids is None
    if original is not None:
        assert Path(config).read_bytes() == original
    else:
        assert await session.host.read_bytes(config) == plan.before.encode()
    with pytest.raises(UserError, match="nothing to roll back"):
        await session.presets.rollback()
    if not full:
        return

    # --- the server dies on its own: the session notices, state failed with the log tail
    import os
    import signal

    os.killpg(session.server.pgid, signal.SIGKILL)
    deadline = asyncio.get_running_loop().time() + 30
    while session.server.state != "failed":
        assert asyncio.get_running_loop().time() < deadline, "the dead server was not noticed"
        await asyncio.sleep(0.2)
    assert "exited" in session.server.message and session.server.log_tail


async def _baseline(session: Session) -> None:
    """A baseline needs the server without speculation: refused with it, measured without, rolled back."""
    from eagle3_tui.telemetry.ledger import speedups

    with pytest.raises(UserError, match="without speculation"):
        await session.bench.run(baseline=True, **BENCH)
    await session.presets.apply(await session.presets.plan("no-speculation"))
    assert not session.server.speculative and session.server.active_preset == "no-speculation"
    base = await session.bench.run(baseline=True, **BENCH)
    assert base.baseline and session.telemetry.baseline_tps == base.output_tps
    await session.presets.rollback()
    assert session.server.speculative and session.server.active_preset == "train-[:-1]"
    spec = await session.bench.run(**BENCH)
    rows = session.records.rows()
    last = rows[-1]
    assert any(r.is_baseline for r in rows) and last.kind == "benchmark"
    assert speedups(rows)[last.id] == pytest.approx(spec.output_tps / base.output_tps)
    print(f"baseline {base.output_tps:.1f} tok/s, speculative {spec.output_tps:.1f} tok/s")


def _cli(session: Session, world, *argv: str) -> str:
    """Run `eagle3-tui ARGV --local` against the session's server and state dir; its stdout."""
    import contextlib
    import io

    from tests.test_hostcmds import run

    prof = Path(session.profile.local_state_dir()).parent / "hosts.toml"
    prof.write_text(f'[localhost]\ndata_slots = {list(world.slot_boundaries)}\n'
                    f'state_dir = "{session.profile.local_state_dir()}"\n')
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert run([*argv, "--local", "--profile", str(prof), "--port", str(session.server.port)]) == 0
    return out.getvalue()


async def _headless_commands(session: Session, world) -> None:
    """`eagle3-tui doctor --json`, `watch --no-ui`, `bench` against the running server (own event loops)."""
    import json

    doc = json.loads(await asyncio.to_thread(_cli, session, world, "doctor", "--json"))
    ids = {f["rule_id"] for f in doc["findings"]}
    assert {"steps-override", "wiring-mismatch"} <= ids and doc["server"]["draft_tokens"] == 2
    watch = await asyncio.to_thread(_cli, session, world, "watch", "--no-ui", "--count", "1", "--duration", "60")
    assert "accept len" in watch.splitlines()[-1]
    bench = await asyncio.to_thread(_cli, session, world, "bench", "-n", "2", "-c", "1", "--max-tokens", "8")
    assert "2/2 requests ok" in bench and "output tok/s" in bench


async def _stop(session: Session) -> None:
    try:
        if not session.restarting:
            await session.survey.refresh_servers()  # a relaunch by another process has a new group
        if session.server.pgid and not session.restarting:
            await session.control.stop()
    finally:
        await session.close()


@pytest.mark.usefixtures("ledger_dir")
async def test_story_through_localhost(demo_world, tmp_path):
    profile = _profile(demo_world, tmp_path)
    session = Session(profile)
    try:
        await _story(session, demo_world, full=True)
    finally:
        await _stop(session)
    await _readonly(profile)


async def _readonly(profile: Profile, host=None) -> None:
    """Read-only refuses every change, before touching anything."""
    ro = Session(profile, readonly=True, host=host)
    try:
        await ro.attach()
        plan = await ro.presets.plan("train-[:-1]")
        for call in (lambda: ro.presets.apply(plan), ro.control.restart, ro.presets.rollback, ro.control.start, ro.control.stop):
            with pytest.raises(ReadOnlyError, match="read-only"):
                await call()
    finally:
        await ro.close()


@pytest.mark.usefixtures("ledger_dir")
async def test_story_through_ssh(demo_world, tmp_path, ssh_host):
    profile = _profile(demo_world, tmp_path)
    profile.local = False
    profile.name = "ssh-demo"
    session = Session(profile, host=ssh_host)
    try:
        assert session.conn.kind == "connecting"
        await _story(session, demo_world, full=False)
        assert session.conn.kind == "connected"
    finally:
        await _stop(session)
    await _readonly(profile, ssh_host)
