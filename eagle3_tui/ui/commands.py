"""`ctrl+p`: every action of the console, every theme, and each preset, as palette commands."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from textual.command import DiscoveryHit, Hit, Hits, Provider

from eagle3_tui.ui import keys


class ConsoleCommands(Provider):
    def _commands(self) -> list[tuple[str, Callable[[], Any], str]]:
        app: Any = self.app
        out: list[tuple[str, Callable[[], Any], str]] = []
        readonly = bool(getattr(app, "readonly", False))
        keymap = getattr(app, "keymap", {})
        for group, bindings in keys.groups():
            for b in bindings:
                if b.action == "command_palette":
                    continue
                if readonly and b.action in keys.CHANGING:
                    continue
                key = keymap.get(b.id or "", b.key)
                shown = ", ".join(keys.display(k) for k in key.split(","))
                out.append(
                    (b.tooltip or b.description, partial(app.run_action, b.action), f"{group} · key {shown}")
                )
        for name in sorted(app.available_themes):
            if name.startswith("eagle3-") or name in getattr(app, "user_theme_names", set()):
                out.append(
                    (f"Theme: {name}", partial(setattr, app, "theme", name), "switch the colour theme")
                )
        for seconds, label in ((60, "1 minute"), (300, "5 minutes"), (900, "15 minutes"), (3600, "1 hour")):
            out.append(
                (f"Chart window: {label}", partial(app.set_window, seconds), "time span of the charts")
            )
        if not readonly:
            for preset in getattr(app, "preset_list", list)():
                out.append(
                    (
                        f"Apply preset: {preset.name}",
                        partial(app.apply_preset_named, preset.name),
                        preset.description or "",
                    )
                )
        return out

    async def discover(self) -> Hits:
        for text, command, help_text in self._commands():
            yield DiscoveryHit(text, command, help=help_text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, command, help_text in self._commands():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, matcher.highlight(text), command, help=help_text)
