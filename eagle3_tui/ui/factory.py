"""The one way a console app is built, used by the CLI (ui/launch.py) and by the tests alike.

`make_app` takes the session (or the lifecycle that boots one) and the display options by keyword;
a profile supplies its theme and keymap unless given explicitly.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle3_tui.ui.app import Eagle3App
from eagle3_tui.ui.options import ConsoleOptions, FleetHome, Lifecycle

if TYPE_CHECKING:
    from eagle3_tui.profile import Profile
    from eagle3_tui.session import Session


def make_app(
    session: Session | None = None,
    *,
    lifecycle: Lifecycle | None = None,
    profile: Profile | None = None,
    theme: str | None = None,
    keymap: Mapping[str, str] | None = None,
    theme_dirs: Iterable[Path] | None = None,
    screenshot_dir: str | Path | None = None,
    fleet: FleetHome | None = None,
    **options: Any,
) -> Eagle3App:
    """A console over `session` (or over the one `lifecycle.boot` builds, or on a `fleet` whose rows open
    sessions). `options` are the other
    fields of `ConsoleOptions` (hint, clock, chart_hz, boot_screen, bench_opts, check_opts,
    sweep_opts)."""
    if profile is None and session is not None:
        profile = session.profile
    opts = ConsoleOptions(
        theme=theme if theme is not None else (profile.theme if profile is not None else None),
        keymap=dict(keymap if keymap is not None else (profile.keymap or {}) if profile is not None else {}),
        theme_dirs=tuple(theme_dirs) if theme_dirs is not None else None,
        screenshot_dir=Path(screenshot_dir) if screenshot_dir is not None else None,
        **options,
    )
    return Eagle3App(session, options=opts, lifecycle=lifecycle, fleet=fleet)
