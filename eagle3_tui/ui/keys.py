"""Every key of the console in one table: bindings with ids (a profile's keymap overrides them by
id), the group they are listed under in `?` help, and which actions change the host."""

from __future__ import annotations

from textual.binding import Binding

# (group, bindings) in the order help lists them.
_GROUPS: list[tuple[str, list[Binding]]] = [
    (
        "Live: log and charts",
        [
            Binding(
                "slash",
                "filter",
                "Filter",
                tooltip="Filter the log (regex; a leading ! inverts; empty clears)",
                id="log-filter",
            ),
            Binding("space", "pause", "Pause", tooltip="Pause / resume following the log", id="log-pause"),
            Binding("g", "log_top", "Log top", show=False, id="log-top"),
            Binding("G", "log_bottom", "Log bottom", show=False, id="log-bottom"),
            Binding("w", "wrap", "Wrap long lines", show=False, id="log-wrap"),
            Binding("minus", "window(-1)", "Narrow chart window", show=False, id="window-narrow"),
            Binding("plus,equals_sign", "window(1)", "Widen chart window", show=False, id="window-widen"),
        ],
    ),
    (
        "Config: presets and restart",
        [
            Binding(
                "p", "preset(1)", "Preset", tooltip="Select the next preset (Config pane)", id="preset-next"
            ),
            Binding("P", "preset(-1)", "Previous preset", show=False, id="preset-prev"),
            Binding("enter", "apply_preset", "Apply preset (diff first)", show=False, id="preset-apply"),
            Binding("u", "rollback", "Roll back last apply", show=False, id="rollback"),
            Binding("R", "restart", "Restart server", show=False, id="restart"),
        ],
    ),
    (
        "Accuracy check and benchmarks",
        [
            Binding(
                "c", "check", "Check", tooltip="Run the standalone accuracy check on the host", id="check"
            ),
            Binding("escape", "cancel", "Cancel check / close filter", show=False, id="cancel"),
            Binding("b", "bench", "Bench", tooltip="Run a benchmark through the HTTP API", id="bench"),
            Binding(
                "B", "bench_baseline", "Baseline benchmark (no speculation)", show=False, id="bench-baseline"
            ),
        ],
    ),
    (
        "Panes",
        [
            Binding("1", "show_tab('live')", "Live", show=False, id="tab-live"),
            Binding("2", "show_tab('findings')", "Findings", show=False, id="tab-findings"),
            Binding("3", "show_tab('config')", "Config", show=False, id="tab-config"),
            Binding("4", "show_tab('accuracy')", "Accuracy", show=False, id="tab-accuracy"),
            Binding("5", "show_tab('ledger')", "Ledger", show=False, id="tab-ledger"),
        ],
    ),
    (
        "General",
        [
            Binding("question_mark,f1", "help", "Help", tooltip="Help: every key", id="help"),
            Binding("t", "next_theme", "Next theme", show=False, id="theme-next"),
            Binding("ctrl+s", "screenshot", "Save SVG screenshot", show=False, id="screenshot"),
            Binding("q,ctrl+q", "quit", "Quit", id="quit"),
        ],
    ),
]

APP_BINDINGS: list[Binding] = [b for _, group in _GROUPS for b in group]

# Actions that change the host: hidden and refused in --readonly.
CHANGING = frozenset({"apply_preset", "rollback", "restart"})

_DISPLAY = {
    "slash": "/",
    "space": "space",
    "question_mark": "?",
    "minus": "-",
    "plus": "+",
    "equals_sign": "=",
    "escape": "esc",
    "enter": "enter",
}


def groups() -> list[tuple[str, list[Binding]]]:
    extra = Binding("ctrl+p", "command_palette", "Command palette (every action, themes)", id="palette")
    return [*_GROUPS[:-1], (_GROUPS[-1][0], [*_GROUPS[-1][1], extra])]


def display(key: str) -> str:
    key = key.strip()
    return _DISPLAY.get(key, key)
