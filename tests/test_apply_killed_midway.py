"""An apply killed at every step, through the public CLI, locally and over the real sshd.

`EAGLE3_TUI_FAULT=<point>` makes `eagle3-tui apply train-[:-1] --yes` SIGKILL itself at that point
(eagle3_tui/remote/faults.py). After each kill: the draft config holds exactly the old or the new bytes;
the next command says what it found; `rollback --yes` leaves the old bytes (restarting the sim
server when there was something to undo); and after the next write no `.config.json.tmp-*` is left.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.plugins.world import free_port, make_draft_dir, stop_processes_under

pytestmark = pytest.mark.slow

PRESET = "train-[:-1]"
# point -> whether the new config is on the host after the kill
POINTS = {
    "undo-pending-mid": False,
    "undo-pending": False,
    "after-temp": False,
    "after-fsync": False,
    "after-backup": False,
    "after-rename": True,
    "undo-done-mid": True,
    "after-undo": True,
}


def _profile(tmp_path: Path, world, *, ssh=None) -> tuple[Path, Path, str]:
    draft = make_draft_dir(world, tmp_path / "draft")
    port = free_port()
    argv = [sys.executable, "-m", "eagle3_tui.sim.server", "--model-path", str(world.target_dir),
            "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(draft),
            "--speculative-num-steps", "1", "--speculative-num-draft-tokens", "2", "--speculative-eagle-topk", "1",
            "--host", "127.0.0.1", "--port", str(port), "--sim-background-load", "0", "--sim-embed-capture-patch"]
    if ssh is None:
        head, alias = '["here"]\nlocal = true\n', "here"
    else:
        head = f'["{ssh.alias}"]\nssh_config = "{ssh.ssh_config}"\n'
        alias = ssh.alias
    prof = tmp_path / "hosts.toml"
    prof.write_text(
        head
        + f"launch_command = {json.dumps(argv)}\n"
        + f'launch_cwd = "{tmp_path}"\nlog_path = "{tmp_path}/server.log"\n'
        + f'remote_python = "{sys.executable}"\ndraft_path = "{draft}"\ntarget_path = "{world.target_dir}"\n'
        + f'state_dir = "{tmp_path}/state"\nport = {port}\nrestart_deadline_s = 120\n'
        + f"data_slots = {json.dumps(list(world.slot_boundaries))}\n"
    )
    return prof, draft / "config.json", alias


def cli(prof: Path, alias: str, *argv: str, fault: str | None = None, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "EAGLE3_TUI_DATA_DIR": str(prof.parent / "data")}
    env.pop("EAGLE3_TUI_FAULT", None)
    if fault:
        env["EAGLE3_TUI_FAULT"] = fault
    return subprocess.run([sys.executable, "-m", "eagle3_tui", *argv, "--host", alias, "--profile", str(prof)],
                          capture_output=True, text=True, env=env, timeout=timeout)


def _temps(cfg: Path) -> list[str]:
    return [p.name for p in cfg.parent.iterdir() if p.name.startswith(".config.json.tmp-")]


def _kill_then_recover(tmp_path: Path, world, point: str, ssh=None) -> None:
    prof, cfg, alias = _profile(tmp_path, world, ssh=ssh)
    old = cfg.read_bytes()
    try:
        r = cli(prof, alias, "apply", PRESET, "--yes", fault=point)
        assert r.returncode == -signal.SIGKILL, (r.returncode, r.stderr)
        now = cfg.read_bytes()
        landed = POINTS[point]
        assert (now != old) == landed, "the config holds exactly the old bytes or the new ones"
        if landed:
            assert b"eagle_aux_hidden_state_layer_ids" in now and json.loads(now)
        if point in ("after-temp", "after-fsync", "after-backup"):
            assert _temps(cfg), "the killed writer left its temp (removed by the next write)"
        undo = tmp_path / "state" / "undo.json"
        if undo.exists():
            json.loads(undo.read_text())  # never a torn file

        r = cli(prof, alias, "rollback", "--yes")
        assert "Traceback" not in r.stderr
        if landed:
            assert r.returncode == 0, r.stderr
            assert "interrupted after" in r.stderr or point == "after-undo"
            assert "server: ready" in r.stdout
        else:
            assert r.returncode == 2 and "nothing to roll back" in r.stderr, r.stderr
            if point != "undo-pending-mid":
                assert "interrupted before" in r.stderr and "file is as it was" in r.stderr
        assert cfg.read_bytes() == old, "rollback leaves exactly the old bytes"

        # the next write (an apply to the end this time) removes the dead writer's temp files
        r = cli(prof, alias, "apply", PRESET, "--yes")
        assert r.returncode == 0, r.stderr
        assert _temps(cfg) == [] and cfg.read_bytes() != old
        assert not list((tmp_path / "state").glob(".undo.json.tmp-*"))
        assert hashlib.sha256(cfg.read_bytes()).hexdigest() == json.loads(undo.read_text())["stack"][-1]["sha256_after"]
    finally:
        stop_processes_under(tmp_path)


@pytest.mark.parametrize("point", list(POINTS))
def test_apply_killed_locally(tmp_path, demo_world, point):
    _kill_then_recover(tmp_path, demo_world, point)


# Over SSH the points that touch the host: before and after the rename. The undo record is local state,
# so its points (undo-*) behave the same whatever the transport and run locally only.
@pytest.mark.parametrize("point", ["after-temp", "after-rename"])
def test_apply_killed_over_ssh(tmp_path, demo_world, sshd, point):
    _kill_then_recover(tmp_path, demo_world, point, ssh=sshd)


def test_an_unwritable_state_folder_is_refused_before_the_host_changes(tmp_path, demo_world):
    prof, cfg, alias = _profile(tmp_path, demo_world)
    (tmp_path / "state").write_text("a file where the state folder should be")
    old = cfg.read_bytes()
    r = cli(prof, alias, "apply", PRESET, "--yes")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "cannot keep an undo record" in r.stderr and "nothing was changed on the host" in r.stderr
    assert cfg.read_bytes() == old and not list(cfg.parent.glob("config.json.bak-*"))


def test_a_corrupt_undo_history_is_said_and_kept(tmp_path, demo_world):
    prof, _cfg, alias = _profile(tmp_path, demo_world)
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "undo.json").write_bytes(b'{"stack": [')
    r = cli(prof, alias, "rollback", "--yes")
    assert r.returncode == 2 and "cannot be read" in r.stderr and "Traceback" not in r.stderr
    assert r.stderr.count("\n") <= 3
