"""The doctor's findings, worst first; the highlighted one shows its evidence and fix."""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.markup import escape
from textual.reactive import reactive
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

if TYPE_CHECKING:
    from eagle3_tui.doctor.findings import Finding

_SEVERITY = {
    "error": ("✖", "$accept-bad"),
    "warning": ("▲", "$accept-warn"),
    "info": ("●", "$primary"),
}


def finding_label(f: Finding) -> str:
    icon, var = _SEVERITY.get(f.severity, ("?", "$foreground"))
    return f"[{var}]{icon}[/] {escape(f.title)}"


def finding_detail(f: Finding) -> str:
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

    findings: reactive[tuple[Finding, ...]] = reactive((), init=False, always_update=True)
    """The doctor's findings, worst first (as the session ordered them)."""

    def compose(self) -> ComposeResult:
        yield OptionList(id="findings-list")
        with VerticalScroll():
            yield Static("No findings yet: the doctor runs once the host is attached.", id="finding-detail")

    def watch_findings(self, old: tuple[Finding, ...], new: tuple[Finding, ...]) -> None:
        keep = self._selected_rule(old)
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

    def _selected_rule(self, findings: tuple[Finding, ...]) -> str | None:
        ol = self.query_one(OptionList)
        if ol.highlighted is None or ol.highlighted >= len(findings):
            return None
        return findings[ol.highlighted].rule_id

    def _show(self, index: int | None) -> None:
        if index is None or index >= len(self.findings):
            return
        self.query_one("#finding-detail", Static).update(finding_detail(self.findings[index]))

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._show(event.option_index)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self._show(event.option_index)
