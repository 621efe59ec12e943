"""`ctrl+p`: every action of the console, every theme, and each preset, as palette commands.

A key's action runs on the node that owns its binding (the app, the main screen, or a pane, whose tab
is shown first), so the palette and the key do the same thing."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import Any, Protocol, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider
from textual.dom import DOMNode

from eagle3_tui.ui import keys
from eagle3_tui.ui.screens.main import MainScreen


class ConsoleApp(Protocol):
    """What the palette reads from the app (the app imports this module, not the other way round)."""

    main: MainScreen
    keymap: dict[str, str]
    user_theme_names: set[str]
    theme: str

    @property
    def available_themes(self) -> Iterable[str]: ...

    def key_owners(self) -> list[type[DOMNode]]: ...

    def hidden_keys(self) -> tuple[str, ...]: ...


class ConsoleCommands(Provider):
    def _commands(self) -> list[tuple[str, Callable[[], Any], str]]:
        app = cast(ConsoleApp, self.app)
        main = app.main
        readonly = main.readonly
        out: list[tuple[str, Callable[[], Any], str]] = []
        screen = self.app.screen_stack[0] if self.app.screen_stack else None  # under the palette
        for group, entries in keys.groups(app.key_owners(), app.hidden_keys()):
            for k in entries:
                b = k.binding
                if b.action == "command_palette" or (readonly and b.action in keys.CHANGING):
                    continue
                shown = keys.shown_keys(b, app.keymap)
                # the Fleet screen's own keys run on it; the others through the one-server console
                run = (partial(self.app.call_later, self.app.run_action, b.action, screen)
                       if screen is not None and screen is not main and isinstance(screen, k.owner)
                       else partial(main.run_key, k))
                out.append((b.tooltip or b.description, run, f"{group} · key {shown}"))
        if main.session is None and getattr(app, "fleet", None) is not None:
            return out  # on the Fleet screen: no chart or preset of a server
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
