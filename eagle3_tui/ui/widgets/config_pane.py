"""Presets with the boundaries they mean; the highlighted one is what `enter` asks to apply.

The pane changes nothing itself: applying posts `ConfigPane.ApplyRequested`, and the screen (which
owns the restart job) plans, confirms and runs it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.markup import escape
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Label, OptionList, ProgressBar, Static
from textual.widgets.option_list import Option

from eagle3_tui.eagle.wiring import format_boundaries
from eagle3_tui.ui.format import fmt_flags, fmt_ids
from eagle3_tui.ui.viewmodel import flags_text

if TYPE_CHECKING:
    from eagle3_tui.profile import Preset
    from eagle3_tui.session import ServerView


def preset_label(p: Preset, active: str | None) -> str:
    mark = "[$success]▶[/] " if p.name == active else "  "
    if p.kind == "layers":
        what = f"ids {escape(fmt_ids(p.layer_ids))} → {escape(format_boundaries(p.boundaries))}"
    else:
        what = "flags " + escape(fmt_flags(dict(p.flags)))
    tag = " [$foreground-muted](built-in)[/]" if p.builtin else ""
    desc = f"\n    [$foreground-muted]{escape(p.description)}[/]" if p.description else ""
    return f"{mark}[b]{escape(p.name)}[/b]  {what}{tag}{desc}"


def served_text(server: ServerView, readonly: bool) -> str:
    text = (
        f"Served now: layer ids {escape(fmt_ids(server.layer_ids))} → boundaries "
        f"{escape(format_boundaries(server.boundaries))}  (embed = the embedding output, hN = input of layer N)\n"
        f"Flags: {flags_text(server)} · preset {escape(server.active_preset or '–')}"
    )
    if readonly:
        text += "\n[$warning]read-only: presets cannot be applied[/]"
    return text


class ConfigPane(Vertical):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "apply", "Apply preset (diff first)", show=False, id="preset-apply"),
    ]

    DEFAULT_CSS = """
    ConfigPane > #served { height: auto; padding: 0 1; }
    ConfigPane > OptionList { height: 1fr; }
    ConfigPane > #restart-row { height: 2; padding: 0 1; display: none; }
    ConfigPane.restarting > #restart-row { display: block; }
    ConfigPane > #config-keys { height: 1; color: $foreground-muted; padding: 0 1; }
    """

    class ApplyRequested(Message):
        """The operator asked to apply this preset (the screen shows the diff and confirms first)."""

        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

    presets: reactive[tuple[Preset, ...]] = reactive((), init=False)
    """The presets listed, in order."""
    active: reactive[str | None] = reactive(None, init=False)
    """The preset the server runs now (marked ▶)."""
    served: reactive[ServerView | None] = reactive(None, init=False)
    """What the server is served with now."""
    readonly: reactive[bool] = reactive(False, init=False)
    """Nothing may be applied."""
    restart_note: reactive[str] = reactive("", init=False)
    """A restart's progress; empty when none runs."""

    def compose(self) -> ComposeResult:
        yield Static("", id="served")
        yield OptionList(id="preset-list")
        with Vertical(id="restart-row"):
            yield Label("", id="restart-label")
            yield ProgressBar(total=None, show_eta=False, id="restart-bar")
        yield Label("p/P select · enter apply (diff first) · u roll back · R restart", id="config-keys")

    def _name_at(self, presets: tuple[Preset, ...]) -> str | None:
        i = self.query_one(OptionList).highlighted
        return presets[i].name if i is not None and i < len(presets) else None

    def _list_presets(self, keep: str | None) -> None:
        ol = self.query_one(OptionList)
        ol.clear_options()
        ol.add_options([Option(preset_label(p, self.active), id=f"{i}") for i, p in enumerate(self.presets)])
        if self.presets:
            names = [p.name for p in self.presets]
            ol.highlighted = names.index(keep) if keep in names else 0

    def watch_presets(self, old: tuple[Preset, ...], new: tuple[Preset, ...]) -> None:
        self._list_presets(keep=self._name_at(old))

    def watch_active(self) -> None:
        self._list_presets(keep=self._name_at(self.presets))

    def _show_served(self) -> None:
        if self.served is not None:
            self.query_one("#served", Static).update(served_text(self.served, self.readonly))

    def watch_served(self) -> None:
        self._show_served()

    def watch_readonly(self) -> None:
        self._show_served()

    def watch_restart_note(self, note: str) -> None:
        self.set_class(bool(note), "restarting")
        self.query_one("#restart-label", Label).update(escape(note))

    @property
    def selected(self) -> Preset | None:
        i = self.query_one(OptionList).highlighted
        return self.presets[i] if i is not None and i < len(self.presets) else None

    def cycle(self, step: int) -> Preset | None:
        if not self.presets:
            return None
        ol = self.query_one(OptionList)
        current = ol.highlighted if ol.highlighted is not None else -step
        ol.highlighted = (current + step) % len(self.presets)
        ol.focus()
        return self.selected

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "apply":
            return not self.readonly
        return True

    def action_apply(self) -> None:
        preset = self.selected
        if preset is None:
            self.notify("no preset selected", severity="warning")
            return
        self.post_message(self.ApplyRequested(preset.name))

    @on(OptionList.OptionSelected, "#preset-list")
    def _apply_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        if not self.readonly:
            self.action_apply()
