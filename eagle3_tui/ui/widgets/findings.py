"""The doctor's findings, worst first; the highlighted one shows its evidence and fix."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.markup import escape
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

_SEVERITY = {
    "error": ("✖", "$accept-bad"),
    "warning": ("▲", "$accept-warn"),
    "info": ("●", "$primary"),
}


def finding_label(f: Any) -> str:
    icon, var = _SEVERITY.get(f.severity, ("?", "$foreground"))
    return f"[{var}]{icon}[/] {escape(f.title)}"


def finding_detail(f: Any) -> str:
    icon, var = _SEVERITY.get(f.severity, ("?", "$foreground"))
    lines = [
        f"[b][{var}]{icon} {escape(f.severity.upper())}[/][/b]  [b]{escape(f.title)}[/b]",
        f"[$foreground-muted]rule {escape(f.rule_id)}[/]",
        "",
        "[b]Evidence[/b]",
    ]
    for ev in f.evidence or []:
        lines.append(f"  [$secondary]{escape(str(ev.source))}[/]: {escape(str(ev.detail))}")
    if not f.evidence:
        lines.append("  –")
    lines += ["", "[b]Fix[/b]", f"  {escape(f.fix or '–')}"]
    return "\n".join(lines)


class FindingsPane(Horizontal):
    DEFAULT_CSS = """
    FindingsPane > OptionList { width: 2fr; height: 1fr; }
    FindingsPane > VerticalScroll { width: 3fr; height: 1fr; padding: 0 1; border-left: vkey $panel; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.findings: list[Any] = []

    def compose(self) -> ComposeResult:
        yield OptionList(id="findings-list")
        with VerticalScroll():
            yield Static("No findings yet: the doctor runs once the host is attached.", id="finding-detail")

    def set_findings(self, findings: Sequence[Any]) -> None:
        keep = self._selected_rule()
        self.findings = list(findings)
        ol = self.query_one(OptionList)
        ol.clear_options()
        ol.add_options([Option(finding_label(f), id=f"{i}") for i, f in enumerate(self.findings)])
        if not self.findings:
            self.query_one("#finding-detail", Static).update(
                "No findings: nothing the doctor knows is wrong."
            )
            return
        index = next((i for i, f in enumerate(self.findings) if f.rule_id == keep), 0)
        ol.highlighted = index
        self._show(index)

    def _selected_rule(self) -> str | None:
        ol = self.query_one(OptionList)
        if ol.highlighted is None or ol.highlighted >= len(self.findings):
            return None
        return self.findings[ol.highlighted].rule_id

    def _show(self, index: int | None) -> None:
        if index is None or index >= len(self.findings):
            return
        self.query_one("#finding-detail", Static).update(finding_detail(self.findings[index]))

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._show(event.option_index)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self._show(event.option_index)
