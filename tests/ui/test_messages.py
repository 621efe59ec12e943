"""Session events → typed messages, and widgets mounted alone posting their own messages
(`App.run_test(message_hook=...)`, harlequin's functional-test pattern)."""

from __future__ import annotations

import typing

from textual.app import App, ComposeResult
from textual.message import Message

from eagle3_tui import session as s
from eagle3_tui.profile import Preset
from eagle3_tui.sglang.logline import LogReader
from eagle3_tui.ui.log_levels import LineLevels
from eagle3_tui.ui.messages import FromSession, SessionMessage, event_messages, message_for
from eagle3_tui.ui.widgets.config_pane import ConfigPane
from eagle3_tui.ui.widgets.log_pane import LogPane

# ---------------------------------------------------------------- the event table


def test_every_session_event_has_its_own_message():
    events = set(typing.get_args(s.SessionEvent))
    table = event_messages()
    missing = events - set(table)
    assert not missing, f"session events without a UI message: {sorted(e.__name__ for e in missing)}"
    assert len(set(table.values())) == len(table), "two events share one message"
    for event_type, message_type in table.items():
        assert issubclass(message_type, SessionMessage)
        assert message_type.__name__ == event_type.__name__  # FromSession.<the event's name>


def test_message_for_carries_the_event_and_skips_unknown_types():
    ev = s.Notice("disk almost full", "warning")
    msg = message_for(ev)
    assert isinstance(msg, FromSession.Notice) and msg.event is ev
    assert message_for(object()) is None
    a, b = FromSession.StatsUpdated(s.StatsUpdated()), FromSession.StatsUpdated(s.StatsUpdated())
    assert a.can_replace(b) and not FromSession.Notice(ev).can_replace(b)


# ---------------------------------------------------------------- widgets alone


class Alone(App[None]):
    """One widget, nothing else: what it posts is what the message hook sees."""

    def __init__(self, widget_factory) -> None:
        super().__init__()
        self.widget_factory = widget_factory

    def compose(self) -> ComposeResult:
        yield self.widget_factory()


def posted(messages: list[Message], kind: type[Message]) -> list:
    """The distinct messages of `kind` (the hook sees a message again at each node it bubbles to)."""
    return list({id(m): m for m in messages if isinstance(m, kind)}.values())


async def test_log_pane_posts_filter_changed_and_filter_error():
    messages: list[Message] = []
    app = Alone(lambda: LogPane(id="logpane"))
    async with app.run_test(size=(100, 20), message_hook=messages.append) as pilot:
        pane = app.query_one(LogPane)
        pane.add_lines(["[2025-01-01 00:00:00] Decode batch. accept len: 2.0", "[2025-01-01 00:00:01] hello"])
        pane.flush()
        pane.log_widget.focus()
        await pilot.press("slash", *"hello", "enter")
        [changed] = posted(messages, LogPane.FilterChanged)
        assert changed.text == "hello" and pane.filter_text == "hello"
        assert list(pane.log_widget.lines) == ["[2025-01-01 00:00:01] hello"]
        await pilot.press("slash", *"(bad", "enter")
        [error] = posted(messages, LogPane.FilterError)
        assert "bad regex" in error.error and pane.filter_text == "hello"
        await pilot.press("escape")  # closes the filter box (the pane's own esc)
        assert not pane.has_class("filtering")
        await pilot.press("space")
        assert pane.paused


def _presets() -> list[Preset]:
    return [
        Preset("sglang-default", "layers", None, boundaries=(2, 6, 9), builtin=True),
        Preset("train-[:-1]", "layers", (-1, 1, 5), boundaries=(0, 2, 6), builtin=True),
        Preset("steps=15", "flags", flags={"speculative-num-steps": 15}),
    ]


async def test_config_pane_posts_apply_requested_for_the_highlighted_preset():
    messages: list[Message] = []
    app = Alone(lambda: ConfigPane(id="config-pane"))
    async with app.run_test(size=(100, 24), message_hook=messages.append) as pilot:
        pane = app.query_one(ConfigPane)
        pane.presets = tuple(_presets())
        pane.active = "sglang-default"
        assert pane.cycle(1) is not None and pane.selected is not None
        assert pane.selected.name == "train-[:-1]"
        await pilot.press("enter")
        await pilot.pause()
        [asked] = posted(messages, ConfigPane.ApplyRequested)
        assert asked.name == "train-[:-1]"
        # the highlight survives a new list with the same names; read-only posts nothing
        pane.presets = tuple(reversed(_presets()))
        assert pane.selected is not None and pane.selected.name == "train-[:-1]"
        pane.readonly = True
        await pilot.press("enter")
        await pilot.pause()
        assert len(posted(messages, ConfigPane.ApplyRequested)) == 1


# ---------------------------------------------------------------- colours from events


def test_a_failure_held_over_a_batch_colours_lines_already_drawn():
    lines = [
        "[2025-01-01 00:00:00] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "scheduler.py", line 1, in run',
        "RuntimeError: CUDA error: an illegal memory access was encountered",
    ]
    after = "[2025-01-01 00:00:05] Decode batch. #running-req: 1, accept len: 2.00, gen throughput (token/s): 50.00"
    reader = LogReader()
    levels = LineLevels()
    first = [ev for line in lines for ev in reader.feed(line)]
    assert not first and levels.add(lines, first) is False  # held: the record has not ended
    assert levels.level(lines[1]) is None
    second = reader.feed(after)
    assert levels.add([after], second) is True  # the earlier batch's lines got their colour now
    assert [levels.level(ln) for ln in lines] == ["bad", "bad", "bad"]
    assert levels.level(after) is None


async def test_log_pane_hides_monitoring_polls_until_asked():
    """A quiet real server (SGLang 0.5.23 on the demo world, the console attached, two benchmarks): most of
    its log is the access lines of GET /server_info polls. They are hidden and counted; `h` shows them."""
    from pathlib import Path

    lines = (Path(__file__).parent / "data" / "real_sglang_0523_quiet.log").read_text().splitlines()
    gets = [ln for ln in lines if '"GET /' in ln]
    assert len(gets) > len(lines) / 5  # the capture is what the pane is for: a log buried in polls
    reader = LogReader()
    events = [e for ln in lines for e in reader.feed(ln)] + reader.flush()
    app = Alone(lambda: LogPane(id="logpane"))
    async with app.run_test(size=(120, 30)) as pilot:
        pane = app.query_one(LogPane)
        pane.add_batch(lines, events)
        pane.flush()
        shown = list(pane.log_widget.lines)
        assert [ln for ln in shown if ln] == [ln for ln in lines if ln and ln not in gets]
        assert any("POST /generate" in ln for ln in shown) and any("Decode batch" in ln for ln in shown)
        pane.tick()
        assert f"{len(gets):,} poll lines hidden (h shows)" in str(pane.query_one("#log-state").render())
        pane.log_widget.focus()
        await pilot.press("h")
        assert [ln for ln in pane.log_widget.lines if ln] == [ln for ln in lines if ln]
        assert "polls shown" in str(pane.query_one("#log-state").render())
