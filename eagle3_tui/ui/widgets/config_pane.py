"""Presets with the boundaries they mean; the selection is what `enter` applies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.markup import escape
from textual.widgets import Label, OptionList, ProgressBar, Static
from textual.widgets.option_list import Option

from eagle3_tui.ui.format import fmt_boundaries, fmt_flags, fmt_ids


def preset_label(p: Any, active: str | None) -> str:
    mark = "[$success]▶[/] " if p.name == active else "  "
    if p.kind == "layers":
        what = f"ids {escape(fmt_ids(p.layer_ids))} → {escape(fmt_boundaries(p.boundaries))}"
    else:
        what = "flags " + escape(fmt_flags(dict(p.flags)))
    tag = " [$foreground-muted](built-in)[/]" if p.builtin else ""
    desc = f"\n    [$foreground-muted]{escape(p.description)}[/]" if p.description else ""
    return f"{mark}[b]{escape(p.name)}[/b]  {what}{tag}{desc}"


class ConfigPane(Vertical):
    DEFAULT_CSS = """
    ConfigPane > #served { height: auto; padding: 0 1; }
    ConfigPane > OptionList { height: 1fr; }
    ConfigPane > #restart-row { height: 2; padding: 0 1; display: none; }
    ConfigPane.restarting > #restart-row { display: block; }
    ConfigPane > #config-keys { height: 1; color: $foreground-muted; padding: 0 1; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.presets: list[Any] = []

    def compose(self) -> ComposeResult:
        yield Static("", id="served")
        yield OptionList(id="preset-list")
        with Vertical(id="restart-row"):
            yield Label("", id="restart-label")
            yield ProgressBar(total=None, show_eta=False, id="restart-bar")
        yield Label("p/P select · enter apply (diff first) · u roll back · R restart", id="config-keys")

    def set_presets(self, presets: Sequence[Any], active: str | None) -> None:
        keep = self.selected.name if self.selected is not None else None
        self.presets = list(presets)
        ol = self.query_one(OptionList)
        ol.clear_options()
        ol.add_options([Option(preset_label(p, active), id=f"{i}") for i, p in enumerate(self.presets)])
        if self.presets:
            names = [p.name for p in self.presets]
            ol.highlighted = names.index(keep) if keep in names else 0

    def set_served(self, server: Any, readonly: bool) -> None:
        ids = getattr(server, "layer_ids", None)
        bounds = getattr(server, "boundaries", None)
        text = (
            f"Served now: layer ids {escape(fmt_ids(ids))} → boundaries {escape(fmt_boundaries(bounds))}"
            f"  (h0 = embedding, hN = input of layer N)\n"
            f"Flags: steps {getattr(server, 'steps', '?')} · topk {getattr(server, 'topk', '?')}"
            f" · draft tokens {getattr(server, 'draft_tokens', '?')} · preset {escape(getattr(server, 'active_preset', None) or '–')}"
        )
        if readonly:
            text += "\n[$warning]read-only: presets cannot be applied[/]"
        self.query_one("#served", Static).update(text)

    @property
    def selected(self) -> Any:
        try:
            ol = self.query_one(OptionList)
        except Exception:
            return None
        if ol.highlighted is None or ol.highlighted >= len(self.presets):
            return None
        return self.presets[ol.highlighted]

    def cycle(self, step: int) -> Any:
        if not self.presets:
            return None
        ol = self.query_one(OptionList)
        current = ol.highlighted if ol.highlighted is not None else -step
        ol.highlighted = (current + step) % len(self.presets)
        return self.selected

    def show_restart(self, message: str | None) -> None:
        if message is None:
            self.remove_class("restarting")
            return
        self.add_class("restarting")
        self.query_one("#restart-label", Label).update(escape(message))
