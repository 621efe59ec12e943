"""`ctrl+p`: every action of the console, every theme, and each preset, as palette commands.

A key's action runs on the node that owns its binding (the app, the main screen, or a pane, whose tab
is shown first), so the palette and the key do the same thing."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from textual.command import DiscoveryHit, Hit, Hits, Provider

from eagle3_tui.ui import keys

if TYPE_CHECKING:
    from eagle3_tui.ui.app import Eagle3App


class ConsoleCommands(Provider):
    def _commands(self) -> list[tuple[str, Callable[[], Any], str]]:
        app: Eagle3App = self.app  # type: ignore[assignment]
        main = app.main
        readonly = main.readonly
        out: list[tuple[str, Callable[[], Any], str]] = []
        for group, entries in keys.groups():
            for k in entries:
                b = k.binding
                if b.action == "command_palette" or (readonly and b.action in keys.CHANGING):
                    continue
                shown = keys.shown_keys(b, app.keymap)
                out.append((b.tooltip or b.description, partial(main.run_key, k), f"{group} · key {shown}"))
        for name in sorted(app.available_themes):
            if name.startswith("eagle3-") or name in app.user_theme_names:
                out.append((f"Theme: {name}", partial(setattr, app, "theme", name), "switch the colour theme"))
        for seconds, label in ((60, "1 minute"), (300, "5 minutes"), (900, "15 minutes"), (3600, "1 hour")):
            out.append((f"Chart window: {label}", partial(main.set_window, seconds), "time span of the charts"))
        if not readonly:
            for preset in main.preset_list():
                out.append(
                    (
                        f"Apply preset: {preset.name}",
                        partial(main.apply_preset_named, preset.name),
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
