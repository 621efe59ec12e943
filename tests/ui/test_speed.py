"""What keeps the console cheap while a busy server logs (issue 14), checked as behaviour, not time:
the levels' shortcut for the common batch agrees with the event walk (the log measuring its lines where
they are written: test_measured_log.py), a key that toggles the pane's state lays nothing out, the
filter box and the log model wait until needed, the charts' bucketing can leave the event loop with the
same result, and the GIL switch interval while the console runs."""

from __future__ import annotations

import random
from typing import Any

from textual.app import App, ComposeResult
from textual.widgets import Label

from eagle3_tui.sglang.logline import LogReader
from eagle3_tui.sglang.logmix import DEFAULT_MIX, make_line
from eagle3_tui.ui.log_levels import LineLevels
from eagle3_tui.ui.widgets.log_pane import LogPane


def _mixed_lines(seed: int, n: int) -> list[str]:
    """A busy server's lines, failures and warnings far more often than in life."""
    rng = random.Random(seed)
    kinds = [*DEFAULT_MIX, "asgi_traceback", "warning", "tqdm"]
    weights = [*DEFAULT_MIX.values(), 0.05, 0.05, 0.02]
    text = "".join(make_line(k, rng, 1775419200.0 + i) + "\n" for i, k in enumerate(rng.choices(kinds, weights, k=n)))
    return text.split("\n")[:-1]


def test_the_common_batch_shortcut_agrees_with_the_walk() -> None:
    """Random batch cuts of a mixed log (tracebacks held over batches, warnings, tqdm's `\\r`): `add`,
    which skips the walk for a batch of one plain event per line, leaves every line at the level the
    walk alone gives, and says `late` for the same batches."""
    for seed in range(6):
        lines = _mixed_lines(seed, 3000)
        rng = random.Random(100 + seed)
        reader = LogReader()
        fast, walk = LineLevels(), LineLevels()
        shortcuts = 0
        i = 0
        while i < len(lines):
            chunk = lines[i : i + rng.choice((1, 2, 5, 40, 300))]
            i += len(chunk)
            events = [ev for line in chunk for ev in reader.feed(line)]
            shortcuts += not fast._waiting and len(events) == len(chunk)
            assert fast.add(chunk, events) == walk._walk(chunk, events)
            assert list(fast._waiting) == list(walk._waiting)
        final = reader.flush()
        assert fast.add([], final) == walk._walk([], final)
        assert fast._levels == walk._levels
        assert shortcuts > 0 and "bad" in fast._levels.values() and "warn" in fast._levels.values()


class _Pane(App[None]):
    def compose(self) -> ComposeResult:
        yield LogPane(id="logpane")


def _layouts_asked(widget: Any) -> list[bool]:
    """From now on, for each `refresh` of `widget`: whether it asked for a layout of the screen."""
    asked: list[bool] = []
    original = widget.refresh

    def spy(*regions, repaint=True, layout=False, recompose=False):  # type: ignore[no-untyped-def]
        asked.append(layout)
        return original(*regions, repaint=repaint, layout=layout, recompose=recompose)

    widget.refresh = spy
    return asked


async def test_pause_and_wrap_keys_lay_out_nothing_for_the_state_line() -> None:
    """The state row has a fixed size: its new text (PAUSED, wrap, the +N counter) repaints that row and
    never asks for a layout of the whole screen."""
    app = _Pane()
    async with app.run_test(size=(80, 20)) as pilot:
        pane = app.query_one(LogPane)
        pane.add_lines([f"line {i}" for i in range(50)])
        pane.flush()
        await pilot.pause()
        label = pane.query_one("#log-state", Label)
        asked = _layouts_asked(label)
        pane.action_pause()
        pane.add_lines(["new while paused"])
        pane.tick()
        pane.action_pause()
        pane.wrap = True
        await pilot.pause()
        assert asked and not any(asked)
        assert "wrap" in str(label.render())


async def test_the_filter_box_is_mounted_by_the_first_slash() -> None:
    """Not on the first frame (an Input is not cheap and is hidden there); `/` mounts and focuses it, and a
    filter set before any `/` applies all the same."""
    from textual.widgets import Input

    app = _Pane()
    async with app.run_test(size=(80, 20)) as pilot:
        pane = app.query_one(LogPane)
        assert not pane.query(Input)
        pane.add_lines(["keep me", "drop me"])
        assert pane.set_filter("keep") and list(pane.log_widget.lines) == ["keep me"]
        assert pane.set_filter("(bad") is False
        await pane.action_filter()
        await pilot.pause()
        box = pane.query_one("#log-filter", Input)
        assert app.focused is box and box.value == "keep"
        await pane.action_filter()
        assert len(pane.query(Input)) == 1


def test_the_console_imports_no_log_model_before_its_first_frame() -> None:
    """The app and its first screen's modules leave the log model (a page of regexes) to the session."""
    import subprocess
    import sys

    code = ("import sys; import eagle3_tui.ui.launch, eagle3_tui.ui.app; "
            "print(sorted(m for m in sys.modules if m.startswith(('eagle3_tui.sglang', 'eagle3_tui.session'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]", out


async def test_the_console_shortens_the_gil_switch_interval_while_it_runs(tmp_path) -> None:
    """The log feed's parsing thread holds the GIL in slices of the switch interval; while the console
    runs, the event loop waits at most 1 ms for it (Python's default is 5 ms), and the old value is back
    once the app has ended."""
    import sys

    from eagle3_tui.ui.app import SWITCH_INTERVAL_S
    from eagle3_tui.ui.factory import make_app

    before = sys.getswitchinterval()
    app = make_app(theme_dirs=[])
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert sys.getswitchinterval() == SWITCH_INTERVAL_S == 0.001
    assert sys.getswitchinterval() == before


def test_a_deferred_series_resolves_to_the_same_buckets() -> None:
    """The chart copies the ring on the event loop and buckets the copy in its build thread: the same
    xs, ys and markers as bucketing the ring itself, over a ring that has wrapped."""
    from eagle3_tui.telemetry.metrics import Telemetry
    from eagle3_tui.ui import viewmodel as vm

    tel = Telemetry(capacity=500)
    rng = random.Random(3)
    for i in range(1300):
        tel.series["accept_len"].append(1000.0 + i * 0.37, 1.0 + rng.random() * 3)
    tel.mark(1400.0, "restart")
    for points, window in ((60, 300.0), (1000, 100.0), (10, 30.0)):
        now = vm.series(tel, "accept_len", t_end=1481.0, window_s=window, points=points)
        later = vm.series(tel, "accept_len", t_end=1481.0, window_s=window, points=points, defer=True)
        assert later.raw is not None and not later.xs
        assert later.resolve() is later and later.raw is None
        assert (later.xs, later.ys, later.markers) == (now.xs, now.ys, now.markers) and now.xs
    empty = vm.series(Telemetry(), "gen_tps", t_end=0.0, window_s=60.0, points=10, defer=True)
    assert empty.raw is None and empty.resolve().xs == []


async def test_a_flood_is_written_every_other_tick_and_capped() -> None:
    """At most `flush_cap` rows (and the note of what was left out) per write; after a cut write the
    next tick writes nothing, and what came meanwhile waits for the one after; a quiet log is written
    at every tick."""
    app = _Pane()
    async with app.run_test(size=(80, 20)) as pilot:
        pane = app.query_one(LogPane)
        log = pane.log_widget
        pane.flush_cap = 50
        pane.add_lines([f"a{i}" for i in range(120)])
        pane._flush_tick()
        assert len(log.lines) == 51 and log.lines[0].startswith("… 70 lines not drawn") and pane.flooded
        pane.add_lines([f"b{i}" for i in range(120)])
        pane._flush_tick()
        assert len(log.lines) == 51, "the tick after a cut write is skipped"
        pane.add_lines([f"c{i}" for i in range(30)])
        pane._flush_tick()
        assert len(log.lines) == 102 and log.lines[51].startswith("… 100 lines not drawn")
        assert log.lines[-1] == "c29" and pane.skipped_on_screen == 170
        pane._flush_tick()  # skipped again; then a quiet log: every tick writes
        for i in range(3):
            pane.add_lines([f"d{i}"])
            pane._flush_tick()
            assert log.lines[-1] == f"d{i}" and not pane.flooded
        assert len(pane.history) == 273
        await pilot.pause()


def test_the_collector_is_on_again_whatever_way_the_console_start_ends(tmp_path, monkeypatch, capsys) -> None:
    """cli.main turns the collector off for the console's imports; run_console's freeze turns it on, and
    a start that fails before it (a profile that is not there) leaves it on too."""
    import gc

    from eagle3_tui import cli
    from eagle3_tui.ui import launch

    assert cli.main(["--profile", str(tmp_path / "missing.toml"), "--host", "nope"]) == 2
    assert gc.isenabled()
    seen: list[bool] = []

    def fake_run_console(args: object) -> int:
        seen.append(gc.isenabled())
        launch.freeze_startup_heap()
        seen.append(gc.isenabled())
        return 0

    monkeypatch.setattr(launch, "run_console", fake_run_console)
    try:
        assert cli.main(["--local"]) == 0
    finally:
        gc.unfreeze()
    assert seen == [False, True] and gc.isenabled()


async def test_a_pause_in_a_full_log_keeps_its_size_and_lays_nothing_out() -> None:
    """In a flood the log widget is full; a pause (and the resume) writes back as many rows as it
    holds, so its virtual size stays and no layout of the screen is asked for."""
    app = _Pane()
    async with app.run_test(size=(80, 20)) as pilot:
        pane = app.query_one(LogPane)
        log = pane.log_widget
        for i in range(30):
            pane.add_lines([f"line {i}-{j} " + "x" * (80 + j % 50) for j in range(500)])
            pane.flush()
        await pilot.pause()
        size, rows = log.virtual_size, len(log.lines)
        assert rows == 10_000
        asked = _layouts_asked(log)
        pane.action_pause()
        assert pane.paused and log.lines[-1] == pane.history[-1] and len(log.lines) == rows
        pane.action_pause()
        assert log.virtual_size == size and not any(asked)
        await pilot.pause()
