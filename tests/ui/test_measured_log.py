"""The one widget that leans on Textual's private API: `MeasuredLog` overrides `Log._update_size` and
rebuilds `Log`'s line store (`_lines`, `_render_line_cache`, `_updates`, `_clear_y`, `_width`) in
`replace_lines`. These tests fail when a Textual release changes what it relies on (pyproject.toml
bounds textual to the releases they pass on)."""

from __future__ import annotations

import inspect

from rich.cells import cell_len
from textual.app import App, ComposeResult
from textual.widgets import Log

from eagle3_tui.ui.widgets.measured_log import MeasuredLog, max_cells


def test_log_still_has_what_measured_log_overrides_and_rebuilds() -> None:
    """The names MeasuredLog uses are Log's, with the signature it overrides: a rename in Textual would
    leave the override dead (a thread per write again) or break replace_lines."""
    assert list(inspect.signature(Log._update_size).parameters) == ["self", "updates", "lines"]
    assert list(inspect.signature(Log._update_maximum_width).parameters) == ["self", "updates", "size"]
    assert callable(Log._process_line)
    log = Log()
    for name in ("_lines", "_render_line_cache", "_updates", "_clear_y", "_width"):
        assert hasattr(log, name), name
    assert isinstance(log._lines, list) and hasattr(log._render_line_cache, "clear")


def test_max_cells_is_the_width_log_measures() -> None:
    cases = [
        ["plain ascii", "a bit longer plain ascii"],
        ["tab\tinside", "x"],
        ["日本語のログ", "ab"],
        ["\x1b[31mred\x1b[0m text", "b"],
        ["Capturing batches (bs=4 avail_mem=61.3 GB):  73%|███████   | 17/23\rnext"],
        ["bell\x07", "cr\r"],
        [],
    ]
    for lines in cases:
        want = max((cell_len(Log._process_line(ln)) for ln in lines), default=0)
        assert max_cells(lines) == want, lines


def _shown(log: Log) -> list[str]:
    """The rows the log paints now (through its render cache)."""
    log.scroll_to(0, 0, animate=False, immediate=True)
    return [log.render_line(y).text for y in range(log.size.height)]


class _OneLog(App[None]):
    def compose(self) -> ComposeResult:
        yield MeasuredLog(id="log")


async def test_a_write_is_measured_at_once_without_a_worker() -> None:
    app = _OneLog()
    async with app.run_test(size=(60, 10)) as pilot:
        log = app.query_one(MeasuredLog)
        lines = ["short", "x" * 150, "日本語" * 10]
        log.write_lines(lines)
        assert log.virtual_size.width == 150, "measured in the write, not later by a thread"
        assert not list(app.workers), "no thread worker per write"
        log.clear()
        log.write_lines(["abc"])
        assert log.virtual_size.width == 3
        await pilot.pause()


async def test_replace_lines_is_clear_then_write_in_one_size_change() -> None:
    app = _OneLog()
    async with app.run_test(size=(60, 10)) as pilot:
        log = app.query_one(MeasuredLog)
        log.max_lines = 5
        for lines in (["a", "bb", "ccc"], ["x" * 90, "tab\there", "日本語", "two\nrows", "a\rb"], [f"{i}" for i in range(9)]):
            log.clear()
            log.write_lines(lines)
            want = (list(log.lines), log.virtual_size, _shown(log))
            log.write_lines(["something else, wider than all of them" * 3])
            _shown(log)  # rendered rows cached
            log.replace_lines(lines)
            assert (list(log.lines), log.virtual_size, _shown(log)) == want, lines
        await pilot.pause()
