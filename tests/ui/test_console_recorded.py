"""Pilot tests of the console's keys on a real Session holding recorded state (no server needed):
log filter / invert / pause / wrap / g G, chart window and data, help, palette, themes, readonly."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Log, TabbedContent

from eagle3_tui.ui import viewmodel as vm
from eagle3_tui.ui.app import Eagle3App
from eagle3_tui.ui.factory import make_app
from eagle3_tui.ui.screens.help import HelpScreen
from eagle3_tui.ui.themes import builtin_theme_dir
from eagle3_tui.ui.widgets.charts import TimeChart
from eagle3_tui.ui.widgets.findings import FindingsPane
from eagle3_tui.ui.widgets.live_pane import LivePane
from eagle3_tui.ui.widgets.log_pane import LogPane
from tests.ui.recorded import clock_of, recorded_lines, recorded_session, until_ready


def recorded_app(tmp_path: Path, **kw) -> Eagle3App:
    session, _ = recorded_session(tmp_path, readonly=kw.pop("readonly", False))
    return make_app(
        session,
        clock=clock_of(session),
        theme_dirs=[builtin_theme_dir()],
        screenshot_dir=tmp_path / "shots",
        **kw,
    )


def chart_data(app: Eagle3App, which: str, points: int = 200) -> vm.ChartData:
    """What the accept-length or tok/s chart draws now (the view model over the app's session)."""
    live = app.query_one(LivePane)
    snap = app.main.snapshot()
    assert snap is not None
    series = vm.accept_series if which == "accept" else vm.tps_series
    return series(snap, t_end=live.clock(), window_s=live.window_s, points=points)


def log_text(app: Eagle3App) -> list[str]:
    return list(app.query_one("#log", Log).lines)


async def feed(app: Eagle3App, pilot, lines: list[str]) -> None:
    app.query_one(LogPane).add_lines(lines)
    app.query_one(LogPane).flush()
    await pilot.pause()


async def test_filter_invert_pause_wrap_and_scroll(tmp_path):
    app = recorded_app(tmp_path)
    lines = recorded_lines()
    async with app.run_test(size=(120, 40)) as pilot:
        await until_ready(pilot)
        await feed(app, pilot, lines)
        assert len(log_text(app)) == len(lines)
        # `/` regex filter
        await pilot.press("slash")
        assert app.focused is not None and app.focused.id == "log-filter"
        await pilot.press(*"WARNING|Error", "enter")
        shown = log_text(app)
        assert shown and all(("WARNING" in ln or "Error" in ln) for ln in shown)
        # `!` inverts
        await pilot.press("slash", *"!Decode", "enter")
        shown = log_text(app)
        assert shown and not any("Decode batch" in ln for ln in shown)
        # a bad regex keeps the old filter and says so
        await pilot.press("slash", *"(unclosed", "enter")
        assert app.query_one(LogPane).filter_text == "!Decode"
        await pilot.press("escape")
        # clearing the filter shows everything again
        await pilot.press("slash", "backspace", "enter")
        assert len(log_text(app)) == len(lines)
        # space pauses: new lines are held back and counted, resume writes them
        await pilot.press("space")
        assert app.query_one(LogPane).paused
        await feed(app, pilot, ["held back while paused 1", "held back while paused 2"])
        assert "held back while paused 1" not in log_text(app)
        assert app.query_one(LogPane).new_while_paused == 2
        await pilot.press("space")
        await pilot.pause()
        assert log_text(app)[-1] == "held back while paused 2"
        # g / G
        log = app.query_one("#log", Log)
        await pilot.press("g")
        await pilot.pause()
        assert log.scroll_y == 0
        await pilot.press("G")
        await pilot.pause()
        assert log.scroll_y == log.max_scroll_y > 0
        # w wraps long lines into several rows
        before = len(log_text(app))
        await pilot.press("w")
        await pilot.pause()
        assert len(log_text(app)) > before
        assert max(len(ln) for ln in log_text(app)) < 120


async def test_charts_draw_recorded_data_with_references_and_window(tmp_path):
    app = recorded_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await until_ready(pilot)
        await pilot.pause(0.8)
        chart = app.query_one("#chart-accept", TimeChart)
        assert chart.draws >= 1 and chart.points_drawn > 0
        data = chart_data(app, "tps")
        assert ("baseline" in data.references[0][1]) and data.references[0][0] == 90.0
        assert any("preset" in label for _, label in data.markers)
        # the newest recorded accept length (2.5-2.8 after the fix) is at the right end
        assert data.xs[-1] <= 0 and 70 < data.ys[-1] < 90
        narrow = chart_data(app, "accept")
        live = app.query_one(LivePane)
        await pilot.press("minus")
        assert live.window_s == 60.0
        short = chart_data(app, "accept")
        assert len(short.xs) < len(narrow.xs)
        await pilot.press("plus", "plus")
        assert live.window_s == 900.0
        # charts only redraw when visible: switch away, mark dirty, no new draw
        await pilot.press("2")
        draws = chart.draws
        live.mark_dirty()
        await pilot.pause(1.1)
        assert chart.draws == draws
        await pilot.press("1")
        await pilot.pause(1.1)
        assert chart.draws > draws


async def test_findings_detail_help_palette_theme_and_screenshot(tmp_path):
    app = recorded_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await until_ready(pilot)
        await pilot.click("#--content-tab-findings")  # the mouse works on tabs
        assert app.query_one(TabbedContent).active == "findings"
        await pilot.press("2")
        pane = app.query_one(FindingsPane)
        assert pane.findings and pane.findings[0].rule_id == app.session.findings[0].rule_id
        detail = str(pane.query_one("#finding-detail").render())
        assert "Evidence" in detail and "Fix" in detail
        await pilot.press("down")
        assert pane.findings[1].title in str(pane.query_one("#finding-detail").render())
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = str(app.screen.query_one("#help-text").render())
        for key in ("Filter the log", "Run the standalone accuracy check", "Apply preset", "ctrl+s"):
            assert key in text
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        # the palette lists the app's actions and themes; picking a theme switches it
        await pilot.press("ctrl+p")
        await pilot.press(*"Theme: eagle3-light")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause(0.2)
        assert app.theme == "eagle3-light"
        assert app.theme_variables["accept-good"].lower() == "#1b7f3b"
        await pilot.press("t")
        assert app.theme != "eagle3-light"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert list((tmp_path / "shots").glob("*.svg"))
        # a pane's key from the palette, on another tab: its tab is shown and the pane's action runs
        await pilot.press("2", "ctrl+p", *"Filter the log")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert app.query_one(TabbedContent).active == "live"
        assert app.focused is not None and app.focused.id == "log-filter"


async def test_keymap_from_profile_rebinds_by_id(tmp_path):
    app = recorded_app(tmp_path, keymap={"log-pause": "x", "help": "f2"})
    async with app.run_test(size=(120, 40)) as pilot:
        await until_ready(pilot)
        await pilot.press("x")
        assert app.query_one(LogPane).paused
        await pilot.press("f2")
        assert isinstance(app.screen, HelpScreen)
        assert "x" in str(app.screen.query_one("#help-text").render())


async def test_readonly_hides_changing_actions(tmp_path):
    app = recorded_app(tmp_path, readonly=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await until_ready(pilot)
        await pilot.press("3")
        for action in ("rollback", "restart", "sweep"):
            assert app.main.check_action(action, ()) is False
        assert app.main.config_pane.check_action("apply", ()) is False
        await pilot.press("R")
        await pilot.press("u")
        await pilot.press("S")
        await pilot.pause()
        assert app.screen is app.screen_stack[0]  # no confirmation popped up
        # the palette has no flag sweep; help lists it as disabled
        from eagle3_tui.ui.commands import ConsoleCommands
        from eagle3_tui.ui.screens.help import help_markup

        texts = [t for t, _, _ in ConsoleCommands(app.screen)._commands()]
        assert not any(t.startswith("Flag sweep") for t in texts) and not any(t.startswith("Apply preset") for t in texts)
        line = next(x for x in help_markup(app.keymap, True, app.key_owners()).splitlines() if "Flag sweep" in x)
        assert "(disabled: read-only)" in line
        assert "READONLY" in str(app.query_one("#status").render())


async def test_bad_user_theme_is_a_toast_not_a_crash(tmp_path):
    user = tmp_path / "themes"
    user.mkdir()
    (user / "broken.toml").write_text('name = "broken"\nprimary = "not-a-colour"\n')
    (user / "mine.toml").write_text(
        'name = "mine"\nprimary = "#123456"\n[variables]\naccept-good = "#00aa00"\n'
    )
    session, _ = recorded_session(tmp_path)
    app = make_app(session, clock=clock_of(session), theme_dirs=[builtin_theme_dir(), user], theme="mine")
    async with app.run_test(size=(120, 40)) as pilot:
        await until_ready(pilot)
        await pilot.pause()
        assert app.theme == "mine"
        assert app.theme_variables["accept-good"] == "#00aa00"
        assert any("broken.toml" in n.message for n in app._notifications)


def test_shipped_themes_are_valid_and_complete():
    from eagle3_tui.ui.themes import SEMANTIC_DEFAULTS, parse_theme

    files = sorted(builtin_theme_dir().glob("*.toml"))
    names = {parse_theme(f.read_text(), source=f.name, validate=True).name for f in files}
    assert {"eagle3-dark", "eagle3-light", "eagle3-high-contrast"} <= names
    for f in files:
        text = f.read_text()
        assert all(f"{k} =" in text for k in SEMANTIC_DEFAULTS), f.name


async def test_local_launch_path_attaches_without_a_server(tmp_path, monkeypatch):
    """`eagle3-tui --local` through launch.build_app: the session is built after the first frame and
    attaches through LocalHost and the status bar shows what it found, read-only."""
    import argparse

    from eagle3_tui.ui.launch import build_app
    from tests.plugins.ports import free_port

    # The profile pins a port nothing listens on (so servers other tests run here are not adopted),
    # and sets a theme and a keymap, which the console must take from it.
    (tmp_path / "config").mkdir(exist_ok=True)
    (tmp_path / "config" / "hosts.toml").write_text(
        f'[localhost]\nport = {free_port()}\ntheme = "eagle3-light"\nkeymap = {{ help = "f2" }}\n'
    )
    args = argparse.Namespace(host=None, local=True, profile=None, readonly=True, demo=False, accept_new_host_key=False)
    app, cleanup = build_app(args, theme_dirs=[builtin_theme_dir()])
    async with app.run_test(size=(120, 40)) as pilot:
        await until_ready(pilot)
        for _ in range(100):
            if app.session.conn.kind == "local" and app.session.server.state != "unknown":
                break
            await pilot.pause(0.1)
        status = str(app.query_one("#status").render())
        assert "● local" in status and "READONLY" in status
        assert f"server {app.session.server.state}" in status
        assert app.session.server.state in ("stopped", "unknown")
        assert app.theme == "eagle3-light"
        await pilot.press("f2")
        assert type(app.screen).__name__ == "HelpScreen"
        await pilot.press("escape")
        await pilot.press("R")  # read-only: no confirmation, nothing restarted
        await pilot.pause()
        assert app.screen is app.screen_stack[0]
        # a check without a draft or data: the pane says why (one sentence), nothing hangs
        await pilot.press("c")
        for _ in range(100):
            if not app.main.jobs.busy("check"):
                break
            await pilot.pause(0.1)
        notes = str(app.query_one("#check-notes").render())
        assert "check failed" in notes and "draft" in notes
        assert not app.query_one("#accuracy-pane").has_class("running")
    cleanup()


def test_marker_labels_do_not_overlap():
    from eagle3_tui.ui.widgets.charts import fit_marker_labels

    got = fit_marker_labels([(-40, "restart"), (-250, "preset steps=15"), (-247, "restart"), (-70, "benchmark"), (-400, "old")], -300, 5.0)
    assert got == [(-250, ""), (-247, "restart"), (-70, "bench"), (-40, "restart")]


def test_log_colours_come_from_the_parsed_events():
    """The pane colours what the session's LogReader said each line is (not its own regexes): the
    failure line and its traceback, a warning, the ready line; decode stats stay plain."""
    from rich.text import Text

    from eagle3_tui.sglang.logline import LogReader
    from eagle3_tui.ui.log_levels import LineLevels
    from eagle3_tui.ui.widgets.log_pane import LogHighlighter

    levels = LineLevels()
    h = LogHighlighter(levels)
    h.set_colors("#ff0000", "#ffff00", "#00ff00")
    lines = recorded_lines()
    reader = LogReader()
    for i in range(0, len(lines), 7):  # batches as the feed sends them; a failure's record may end later
        chunk = lines[i : i + 7]
        levels.add(chunk, [ev for line in chunk for ev in reader.feed(line)])
    levels.add([], reader.flush())
    styled = {}
    for line in lines:
        text = Text(line)
        h.highlight(text)
        styled[line] = text.spans[0].style.color.triplet.hex if text.spans else None
    failure = next(ln for ln in lines if "Scheduler hit an exception" in ln)
    frame = next(ln for ln in lines if ln.startswith("  File "))
    warning = next(ln for ln in lines if "WARNING" in ln)
    ready = next(ln for ln in lines if "ready to roll" in ln)
    decode = next(ln for ln in lines if "Decode batch" in ln)
    assert styled[failure] == styled[frame] == "#ff0000"
    assert styled[warning] == "#ffff00" and styled[ready] == "#00ff00" and styled[decode] is None
