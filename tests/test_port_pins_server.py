"""`--port` names the server a changing command acts on: when nothing the console recognises runs
there, apply, rollback and restart refuse, naming what they found, and the other server on the same
machine is left exactly as it was (same process, same config bytes, no backup, its log not rotated).

Two servers on one machine: a sim server on port A (attached once with `--port A`, so the console
remembers its launch), and on port P either nothing or a server the console cannot recognise (the
sim server started through a wrapper script: its command line is not a launch command).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugins.world import READY, SPEC_ARGS, free_port, make_draft_dir

pytestmark = pytest.mark.slow

PRESET = "train-[:-1]"
ARGS = (*SPEC_ARGS, "--sim-embed-capture-patch", "--sim-background-load", "0")


def _cli(tmp_path: Path, prof: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EAGLE3_TUI_DATA_DIR": str(tmp_path / "data")}
    env.pop("EAGLE3_TUI_FAULT", None)
    return subprocess.run([sys.executable, "-m", "eagle3_tui", *argv, "--local", "--profile", str(prof)],
                          capture_output=True, text=True, env=env, timeout=180)


def _wrapped_server(tmp_path: Path, world) -> tuple[subprocess.Popen[bytes], int]:
    """The sim server behind a wrapper script: SGLang runs there, but no process says so."""
    port = free_port()
    wrapper = tmp_path / "serve.py"
    wrapper.write_text("import runpy, sys\nsys.argv[0] = 'sim'\n"
                       "runpy.run_module('eagle3_tui.sim.server', run_name='__main__')\n")
    log = tmp_path / "wrapped.log"
    with open(log, "wb") as f:
        proc = subprocess.Popen([sys.executable, str(wrapper), "--model-path", str(world.target_dir),
                                 "--host", "127.0.0.1", "--port", str(port), "--sim-background-load", "0"],
                                stdout=f, stderr=subprocess.STDOUT, start_new_session=True, cwd=tmp_path)
    for _ in range(1200):
        if READY in log.read_text(errors="replace") or proc.poll() is not None:
            break
        subprocess.run(["sleep", "0.05"])
    assert READY in log.read_text(errors="replace"), log.read_text()[-2000:]
    return proc, port


def _snapshot(server, cfg: Path) -> tuple[bool, bytes, list[str], list[str]]:
    return (server.proc.poll() is None, cfg.read_bytes(), sorted(p.name for p in cfg.parent.iterdir()),
            sorted(p.name for p in server.log_path.parent.iterdir()))


@pytest.mark.parametrize("on_p", ["nothing", "unrecognised"])
def test_port_names_the_server_or_the_command_refuses(tmp_path, demo_world, sim_server, on_p):
    a = sim_server(*ARGS, draft_dir=make_draft_dir(demo_world, tmp_path / "draft0"))  # its own draft config
    cfg = tmp_path / "draft0" / "config.json"
    prof = tmp_path / "hosts.toml"
    prof.write_text(f'["localhost"]\nremote_python = "{sys.executable}"\nstate_dir = "{tmp_path}/state"\n'
                    f"data_slots = {json.dumps(list(demo_world.slot_boundaries))}\nrestart_deadline_s = 60\n")
    other = None
    try:
        if on_p == "unrecognised":
            other, p = _wrapped_server(tmp_path, demo_world)
        else:
            p = free_port()
        r = _cli(tmp_path, prof, "presets", "--port", str(a.port))  # attached once: A's launch is remembered
        assert r.returncode == 0, r.stderr
        assert json.loads((tmp_path / "state" / "launch.json").read_text())["port"] == a.port
        before = _snapshot(a, cfg)

        for cmd in (["apply", PRESET, "--yes"], ["rollback", "--yes"], ["restart", "--yes"]):
            r = _cli(tmp_path, prof, *cmd, "--port", str(p))
            assert r.returncode == 2 and "Traceback" not in r.stderr, (cmd, r.stdout, r.stderr)
            if cmd[0] == "rollback":
                assert "nothing to roll back" in r.stderr or f"port {p}" in r.stderr, r.stderr
                continue
            assert f"refusing to {'apply preset' if cmd[0] == 'apply' else 'restart'}" in r.stderr, r.stderr
            assert f"runs on port {p}" in r.stderr and f"port {a.port}" in r.stderr, r.stderr  # what it found
            assert "nothing was changed" in r.stderr
            assert _snapshot(a, cfg) == before, cmd  # A untouched: same process, config, folder, log
        if other is not None:
            assert other.poll() is None  # nor the unrecognised one
        assert not (tmp_path / "state" / "undo.json").exists() or json.loads(
            (tmp_path / "state" / "undo.json").read_text())["stack"] == []
    finally:
        if other is not None:
            other.kill()
            other.wait()


def test_several_servers_and_none_named_is_refused(tmp_path, demo_world, sim_server):
    a = sim_server(*ARGS, draft_dir=make_draft_dir(demo_world, tmp_path / "draft0"))
    b = sim_server(*ARGS, draft_dir=make_draft_dir(demo_world, tmp_path / "draft1"))
    prof = tmp_path / "hosts.toml"
    prof.write_text(f'["localhost"]\nremote_python = "{sys.executable}"\nstate_dir = "{tmp_path}/state"\n'
                    f"data_slots = {json.dumps(list(demo_world.slot_boundaries))}\n")
    cfgs = [tmp_path / f"draft{i}" / "config.json" for i in (0, 1)]
    before = [_snapshot(s, c) for s, c in zip((a, b), cfgs, strict=True)]
    for cmd in (["restart", "--yes"], ["bench", "-n", "1"]):
        r = _cli(tmp_path, prof, *cmd)
        assert r.returncode == 2 and "Traceback" not in r.stderr, (cmd, r.stderr)
        assert "several servers (SGLang or vLLM) run here" in r.stderr and "--port" in r.stderr, r.stderr
        assert f"port {a.port}" in r.stderr and f"port {b.port}" in r.stderr
    assert [_snapshot(s, c) for s, c in zip((a, b), cfgs, strict=True)] == before


def test_pid_names_the_server(tmp_path, demo_world, sim_server):
    a = sim_server(*ARGS, draft_dir=make_draft_dir(demo_world, tmp_path / "draft0"))
    b = sim_server(*ARGS, draft_dir=make_draft_dir(demo_world, tmp_path / "draft1"))
    prof = tmp_path / "hosts.toml"
    prof.write_text(f'["localhost"]\nremote_python = "{sys.executable}"\nstate_dir = "{tmp_path}/state"\n'
                    f"data_slots = {json.dumps(list(demo_world.slot_boundaries))}\nrestart_deadline_s = 60\n")
    cfgs = [tmp_path / f"draft{i}" / "config.json" for i in (0, 1)]
    before = [_snapshot(s, c) for s, c in zip((a, b), cfgs, strict=True)]
    stranger = subprocess.Popen(["sleep", "60"])  # a process, not a server
    try:
        for pid in (stranger.pid, 999_999_999):
            r = _cli(tmp_path, prof, "apply", PRESET, "--yes", "--pid", str(pid))
            assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
            assert f"no SGLang or vLLM server this console recognises runs with pid {pid}" in r.stderr, r.stderr
            assert f"port {a.port}" in r.stderr and f"port {b.port}" in r.stderr and "nothing was changed" in r.stderr
        r = _cli(tmp_path, prof, "restart", "--yes", "--pid", str(b.proc.pid), "--port", str(a.port))
        assert r.returncode == 2 and f"not on port {a.port}" in r.stderr, r.stderr
        assert [_snapshot(s, c) for s, c in zip((a, b), cfgs, strict=True)] == before

        r = _cli(tmp_path, prof, "restart", "--yes", "--pid", str(b.proc.pid))
        assert r.returncode == 0 and "server: ready" in r.stdout and f"port {b.port}" in r.stdout, r.stderr
        assert b.proc.wait(30) is not None  # B was restarted (its old process is gone) ...
        assert _snapshot(a, cfgs[0]) == before[0]  # ... and A left as it was
    finally:
        stranger.kill()
        stranger.wait()
        pidfile = b.log_path.parent / ".server.log.pid"
        if pidfile.exists():  # B's relaunch: its command line does not name tmp_path
            from eagle3_tui.remote.procgroup import stop_group

            stop_group(int(pidfile.read_text()), 10.0)
