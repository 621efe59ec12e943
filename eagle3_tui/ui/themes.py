"""Theme files: TOML in the package's themes/ dir and in the user's config dir.

A theme file holds the fields of `textual.theme.Theme` at the top level and the app's semantic
colours (`accept-good`, `accept-warn`, `accept-bad`, chart colours) under `[variables]`; the
widgets read those variables, so a theme decides what "good accept length" looks like.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from textual.theme import Theme

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

DEFAULT_THEME = "eagle3-dark"

# Variables every theme has; a user theme that leaves one out gets these.
SEMANTIC_DEFAULTS: dict[str, str] = {
    "accept-good": "#5fd38d",
    "accept-warn": "#ffcc66",
    "accept-bad": "#ff6b6b",
    "chart-accept": "#4ea1ff",
    "chart-tps": "#c792ea",
    "chart-reference": "#8b95a7",
    "chart-marker": "#ffb454",
}

_THEME_FIELDS = {
    "primary",
    "secondary",
    "warning",
    "error",
    "success",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
    "dark",
    "luminosity_spread",
    "text_alpha",
}


@dataclass(frozen=True, slots=True)
class ThemeLoadError:
    """A theme file that could not be used, and why (shown as a toast, never raised)."""

    path: Path
    reason: str


def builtin_theme_dir() -> Path:
    """The themes shipped in the wheel (eagle3_tui/themes)."""
    return Path(__file__).resolve().parent.parent / "themes"


def user_theme_dir() -> Path:
    """Where users drop their own theme files: <config dir>/themes (the config dir hosts.toml lives in,
    `EAGLE3_TUI_CONFIG_DIR` overriding it as it does for profiles)."""
    env = os.environ.get("EAGLE3_TUI_CONFIG_DIR")
    if env:
        return Path(env) / "themes"
    from platformdirs import user_config_dir

    return Path(user_config_dir("eagle3-tui")) / "themes"


def parse_theme(text: str, *, source: str = "<theme>", validate: bool = True) -> Theme:
    """Build a Theme from TOML text; raises ValueError with one clear sentence."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"{source} is not valid TOML: {err}") from None
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{source} has no `name`")
    if not isinstance(data.get("primary"), str):
        raise ValueError(f"{source} has no `primary` colour")
    unknown = set(data) - _THEME_FIELDS - {"name", "variables"}
    if unknown:
        raise ValueError(f"{source} has unknown keys: {', '.join(sorted(unknown))}")
    variables = data.get("variables", {})
    if not isinstance(variables, dict) or not all(isinstance(v, str) for v in variables.values()):
        raise ValueError(f"{source}: [variables] must map names to colour strings")
    fields = {k: v for k, v in data.items() if k in _THEME_FIELDS}
    theme = Theme(name=name.strip(), variables={**SEMANTIC_DEFAULTS, **variables}, **fields)
    if not validate:  # the shipped themes are checked by the tests, not at every start
        return theme
    try:  # resolve colours now so a typo is reported here, not as a crash when applied
        theme.to_color_system().generate()
        from textual.color import Color

        for value in theme.variables.values():
            Color.parse(value)
    except Exception as err:
        raise ValueError(f"{source} has a bad colour: {err}") from None
    return theme


def load_themes(dirs: list[Path]) -> tuple[list[Theme], list[ThemeLoadError]]:
    """Every *.toml theme in `dirs` (later dirs override earlier ones by name)."""
    themes: dict[str, Theme] = {}
    errors: list[ThemeLoadError] = []
    builtin = builtin_theme_dir()
    for folder in dirs:
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.toml")):
            try:
                theme = parse_theme(
                    path.read_text(encoding="utf-8"), source=path.name, validate=folder != builtin
                )
            except (OSError, UnicodeDecodeError) as err:
                errors.append(ThemeLoadError(path, f"cannot read {path.name}: {err}"))
                continue
            except ValueError as err:
                errors.append(ThemeLoadError(path, str(err)))
                continue
            themes[theme.name] = theme
    return list(themes.values()), errors
