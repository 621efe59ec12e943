"""The Accuracy pane asks for the training data when none is known (d): the modal checks the slots, the
session reads the data's first file on the host (LocalHost), saves glob and slots into the host's table of
hosts.toml (the rest of the file as it was) and the doctor reruns: wiring-mismatch appears.

A real Session on the demo world's target and draft (the seeds' flags, no layer-id key), no server.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from textual.widgets import Input

from eagle3_tui.profile import demo_profile, load_profile
from eagle3_tui.session import Session
from eagle3_tui.ui.factory import make_app
from eagle3_tui.ui.screens.data_modal import DataModal
from eagle3_tui.ui.themes import builtin_theme_dir
from eagle3_tui.ui.widgets.findings import FindingsPane
from tests.ui.recorded import until_ready

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def _hosts_file(world, tmp_path):
    demo = demo_profile(world, port=1, state_dir=tmp_path / "state")
    keys = {"launch_command": demo.launch_command, "draft_path": demo.draft_path, "target_path": demo.target_path,
            "state_dir": demo.state_dir, "port": 1}
    path = tmp_path / "hosts.toml"
    path.write_text("# my hosts\n[localhost]\n" + "".join(f"{k} = {json.dumps(v)}\n" for k, v in keys.items())
                    + 'theme = "eagle3-dark"  # kept\n\n["gpu"]\naddress = "10.0.0.5"\n')
    return path


async def _until(pilot, cond, what, timeout: float = 150.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what() if callable(what) else what}"
        await asyncio.sleep(0.05)
    await pilot.pause()


def _rules(app) -> set[str]:
    return {f.rule_id for f in app.query_one(FindingsPane).findings}


async def test_d_asks_for_the_data_saves_it_to_the_profile_and_reruns_the_doctor(demo_world, tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    hosts = _hosts_file(demo_world, tmp_path)
    before = tomllib.loads(hosts.read_text())
    session = Session(load_profile("localhost", hosts, local=True))
    await session.attach()
    app = make_app(session, theme_dirs=[builtin_theme_dir()])
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await until_ready(pilot)
            assert "steps-override" in _rules(app) and "wiring-mismatch" not in _rules(app)
            assert "train-[:-1]" not in [p.name for p in app.query_one("#config-pane").presets]
            await pilot.press("4")
            assert "No training data known" in str(app.query_one("#check-notes").render())
            await pilot.press("d")
            modal = app.screen
            assert isinstance(modal, DataModal)
            modal.query_one("#data-glob", Input).value = str(demo_world.data_glob)
            modal.query_one("#data-slots", Input).value = "0,x,6,9"
            await pilot.press("enter")
            assert "slots: '0,x,6,9' is not" in str(modal.query_one("#data-error").render())
            assert app.screen is modal  # refused here, nothing read or saved
            modal.query_one("#data-slots", Input).value = "0,2,6,9"
            await pilot.press("enter")
            await _until(pilot, lambda: app.screen is not modal,
                         lambda: f"the modal to close: {modal.query_one('#data-error').render()}")
            await _until(pilot, lambda: "wiring-mismatch" in _rules(app), "the doctor's rerun")
            assert "No training data known" not in str(app.query_one("#check-notes").render())
            assert "train-[:-1]" in [p.name for p in app.query_one("#config-pane").presets]
            assert any("slots hold boundaries 0, 2, 6, 9" in n.message for n in app._notifications)
    finally:
        await session.close()
    after = tomllib.loads(hosts.read_text())
    assert after["localhost"]["data_glob"] == str(demo_world.data_glob)
    assert after["localhost"]["data_slots"] == [0, 2, 6, 9]
    assert {k: v for k, v in after["localhost"].items() if not k.startswith("data_")} == before["localhost"]
    assert after["gpu"] == before["gpu"]
    assert hosts.read_text().startswith("# my hosts\n") and 'theme = "eagle3-dark"  # kept' in hosts.read_text()
