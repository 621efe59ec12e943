"""A SIGKILLed `--demo` leaves its temp folder (nothing runs in a killed console): the folder names its
console's pid, and the next demo's boot removes every demo folder whose console is dead, and only those."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import eagle3_tui.session as session_face
from eagle3_tui.session.demo import lifecycle as demo


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _leftover(parent: Path, name: str, owner: str | None) -> Path:
    folder = parent / name
    (folder / "draft").mkdir(parents=True)
    (folder / "undo.json").write_text("[]")
    if owner is not None:
        (folder / demo.OWNER_FILE).write_text(owner)
    return folder


def test_only_folders_of_dead_demos_are_removed(tmp_path):
    dead = _leftover(tmp_path, "eagle3-tui-demo-dead", str(_dead_pid()))
    live = _leftover(tmp_path, "eagle3-tui-demo-live", str(os.getpid()))
    unclaimed = _leftover(tmp_path, "eagle3-tui-demo-old", None)  # an older version's: may still run
    garbage = _leftover(tmp_path, "eagle3-tui-demo-junk", "not a pid\n")
    other = _leftover(tmp_path, "someone-else", str(_dead_pid()))
    elsewhere = _leftover(tmp_path / "elsewhere", "eagle3-tui-demo-x", str(_dead_pid()))
    (tmp_path / "eagle3-tui-demo-link").symlink_to(elsewhere)
    target = tmp_path / "cache-file"
    target.write_text("not ours to remove")
    (dead / "draft" / "model.safetensors").symlink_to(target)  # the demo links the world's weights

    assert demo.remove_dead_demo_folders(tmp_path) == [dead]
    assert not dead.exists() and target.read_text() == "not ours to remove"
    assert all(p.is_dir() for p in (live, unclaimed, garbage, other, elsewhere))


def test_a_new_demo_folder_names_its_console_and_sweeps_dead_ones(tmp_path):
    dead = _leftover(tmp_path, "eagle3-tui-demo-dead", f"{_dead_pid()}\n")
    live = _leftover(tmp_path, "eagle3-tui-demo-live", str(os.getpid()))
    root, removed = demo.new_state_root(tmp_path)
    assert removed == [dead] and live.is_dir()
    assert root.parent == tmp_path and root.name.startswith(demo.DEMO_DIR_PREFIX)
    assert demo.owner_of(root) == os.getpid()
    assert demo.remove_dead_demo_folders(tmp_path) == []  # this console is alive: its folder stays


def test_the_demo_boot_sweeps_says_so_and_its_cleanup_removes_its_folder(tmp_path, monkeypatch):
    from eagle3_tui.ui.launch import demo_lifecycle

    dead = _leftover(tmp_path, "eagle3-tui-demo-dead", str(_dead_pid()))
    booted: list[Path] = []

    def fake_boot(readonly, state_root, build=None, engine="sim"):
        async def boot(progress):
            booted.append(state_root)
            return "session"
        return boot

    monkeypatch.setattr(session_face, "demo_boot", fake_boot)  # the console takes it from the package face
    lifecycle = demo_lifecycle(False, tmp_path)
    said: list[str] = []
    assert asyncio.run(lifecycle.boot(said.append)) == "session"
    assert not dead.exists() and said == ["removed 1 temp folder(s) left by demos that were killed"]
    (root,) = booted
    assert demo.owner_of(root) == os.getpid()
    lifecycle.cleanup()
    assert not root.exists() and list(tmp_path.iterdir()) == []
