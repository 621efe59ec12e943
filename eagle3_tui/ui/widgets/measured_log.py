"""Textual's `Log` with the width of new lines measured where they are written, and a rebuild that
keeps its size when it can (`replace_lines`).

`Log.write_lines` (textual 8.2) starts a thread worker for every write to measure the new lines' width
in cells, and that worker's answer sets the virtual size again: at ten writes a second while a busy
server logs, that is ten threads a second competing with the event loop for the GIL, and a second
layout of the whole screen after each write that widened the log. Lines that are printable ASCII (a
log's lines, nearly always) are as many cells wide as they have characters, which `len` says at C
speed; only the other lines are measured as `Log` does, and all of it on the spot.

This is the one module that uses Textual's private API (`Log._update_size`, `_update_maximum_width`,
`_process_line`, `_lines`, `_render_line_cache`, `_updates`, `_clear_y`, `_width`):
tests/ui/test_measured_log.py fails when a release changes them, and pyproject.toml bounds textual to
the releases it passes on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from rich.cells import cell_len
from textual.geometry import Size
from textual.widgets import Log


def _plain(lines: Sequence[str]) -> bool:
    """Every line printable ASCII (checked at C speed, without joining them: a joined batch of
    request dumps is megabytes, and such short-lived big blocks grow the process's heap)."""
    return all(map(str.isascii, lines)) and all(map(str.isprintable, lines))


def max_cells(lines: Sequence[str]) -> int:
    """The widest of `lines` in terminal cells, as `Log` renders them (tabs expanded, escapes replaced)."""
    if not lines:
        return 0
    if _plain(lines):  # the usual batch: no Python step per line
        return max(map(len, lines))
    process = Log._process_line
    return max(len(ln) if ln.isascii() and ln.isprintable() else cell_len(process(ln)) for ln in lines)


class MeasuredLog(Log):
    """A `Log` whose writes measure their lines at once instead of in a thread worker."""

    def _update_size(self, updates: int, lines: list[str]) -> None:  # type: ignore[override]
        if lines:
            self._update_maximum_width(updates, max_cells(lines))

    def replace_lines(self, lines: Iterable[str]) -> None:
        """`clear()` then `write_lines(lines)` as one change: the virtual size is set once, to what the
        new lines take, so new lines that fill the same room (a pause or resume in a flood) ask for a
        repaint of the log and no layout of the screen (`clear` alone sets the size to zero first)."""
        new_lines = list(lines)
        if not _plain(new_lines):  # printable ASCII holds no line break to split at
            new_lines = [part for line in new_lines for part in line.splitlines()]
        width = max_cells(new_lines)  # before the cut, as Log
        if self.max_lines is not None and len(new_lines) > self.max_lines:
            del new_lines[: len(new_lines) - self.max_lines]
        self._lines.clear()
        self._lines.extend(new_lines)
        self._render_line_cache.clear()
        self._updates += 1
        self._clear_y = 0
        self._width = width
        self.virtual_size = Size(self._width, len(self._lines))
        self.refresh()
