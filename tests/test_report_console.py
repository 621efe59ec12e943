"""The console's `r`: the report written in a worker, where screenshots go, its path in a toast; `--readonly`
leaves it on (it writes only on this machine). Pilot over the recorded session (its real log feed)."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path

import pytest

from eagle3_tui.report.markdown import SECTIONS
from eagle3_tui.ui.factory import make_app
from eagle3_tui.ui.themes import builtin_theme_dir
from tests.ui.recorded import clock_of, recorded_report, recorded_session, until_ready


async def _press_r_and_wait(pilot, folder: Path) -> Path:
    app = pilot.app
    await until_ready(pilot)
    await pilot.press("r")
    deadline = time.monotonic() + 60
    while not list(folder.glob("eagle3-report-*/report.md")):
        if time.monotonic() > deadline:
            raise AssertionError(f"no report written; toasts {[n.message for n in app._notifications]}")
        await asyncio.sleep(0.1)
    while app.main.jobs.busy("report"):
        await asyncio.sleep(0.05)
    await pilot.pause()
    (path,) = folder.glob("eagle3-report-*/report.md")
    assert any(n.message == f"report written: {path}" for n in app._notifications), \
        [n.message for n in app._notifications]
    assert [p.name for p in folder.iterdir()] == [path.parent.name], "nothing beside it (no temp folder left)"
    return path


@pytest.mark.parametrize("readonly", [False, True], ids=["read-write", "readonly"])
async def test_r_writes_the_report_and_says_where(tmp_path, readonly):
    session, _ = recorded_session(tmp_path, readonly=readonly)
    session.known.check = recorded_report()
    shots = tmp_path / "shots"
    app = make_app(session, clock=clock_of(session), theme_dirs=[builtin_theme_dir()], screenshot_dir=shots)
    async with app.run_test(size=(120, 40)) as pilot:
        path = await _press_r_and_wait(pilot, shots)
    md = path.read_text(encoding="utf-8")
    assert re.findall(r"^## (.+)$", md, flags=re.M) == list(SECTIONS)
    assert path.parent.name.startswith("eagle3-report-recorded-")
    assert (path.parent / "charts" / "accept-and-tps-over-time.png").read_bytes()[:4] == b"\x89PNG"
    assert "(served)" in md  # the session's check, its served wiring marked


async def test_r_into_an_unusable_folder_says_why_in_one_toast_and_writes_nothing(tmp_path):
    session, _ = recorded_session(tmp_path)
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    app = make_app(session, clock=clock_of(session), theme_dirs=[builtin_theme_dir()], screenshot_dir=blocker)
    async with app.run_test(size=(120, 40)) as pilot:
        await until_ready(pilot)
        await pilot.press("r")
        deadline = time.monotonic() + 30
        while not any("report failed" in n.message for n in app._notifications):
            assert time.monotonic() < deadline, [n.message for n in app._notifications]
            await asyncio.sleep(0.05)
        (toast,) = [n.message for n in app._notifications if "report failed" in n.message]
    assert toast.startswith(f"report failed: cannot write the report in {blocker}") and "\n" not in toast
    assert blocker.read_text() == "x" and [p.name for p in tmp_path.iterdir() if p.name.startswith("eagle3")] == []
