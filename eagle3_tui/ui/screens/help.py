"""`?` help: every key of the console, read from the live bindings so a keymap shows up."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.dom import DOMNode
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Static

from eagle3_tui.ui import keys


def help_markup(keymap: dict[str, str], readonly: bool, owners: Sequence[type[DOMNode]],
                hidden: Sequence[str] = ()) -> str:
    lines: list[str] = []
    groups = keys.groups(owners, hidden)
    for group, entries in groups:
        lines.append(f"[b $primary]{escape(group)}[/]")
        for k in entries:
            b = k.binding
            note = (
                " [$foreground-muted](disabled: read-only)[/]"
                if readonly and b.action in keys.CHANGING
                else ""
            )
            lines.append(f"  [b]{escape(keys.shown_keys(b, keymap)):<14}[/b] {escape(b.tooltip or b.description)}{note}")
        lines.append("")
    lines.append(
        '[$foreground-muted]Keys can be changed per host: keymap = { binding-id = "keys" } in hosts.toml.[/]'
    )
    ids = [k.binding.id or "" for _, entries in groups for k in entries if k.binding.id != keys.PALETTE.id]
    lines.append("[$foreground-muted]Binding ids: " + escape(", ".join(ids)) + "[/]")
    return "\n".join(lines)


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q,question_mark,f1", "close", "Close", id="help-close")]

    def __init__(self, keymap: dict[str, str], readonly: bool, owners: Sequence[type[DOMNode]],
                 hidden: Sequence[str] = ()) -> None:
        super().__init__()
        self.keymap = keymap
        self.readonly = readonly
        self.owners = owners
        self.hidden = hidden

    def compose(self) -> ComposeResult:
        with Vertical(id="help-dialog", classes="dialog"):
            yield Static("[b]eagle3-tui keys[/b]  (esc closes)", id="help-title")
            with VerticalScroll():
                yield Static(help_markup(self.keymap, self.readonly, self.owners, self.hidden), id="help-text")

    def action_close(self) -> None:
        self.dismiss(None)
