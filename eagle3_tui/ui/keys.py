"""Where the console's keys are listed: each binding lives on the widget, screen or app whose action it
runs (its `BINDINGS`, with an id a profile's keymap rebinds); this module only says in which group
and order `?` help and the palette list them, and which actions change the host. The owners are given
by the app (`Eagle3App.key_owners`), so this module imports none of them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from textual.app import App
from textual.binding import Binding, BindingType
from textual.dom import DOMNode

from eagle3_tui.actions import CHANGES_HOST

# (group title, binding ids) in the order help lists them.
HELP_ORDER: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "Live: log and charts",
        ("log-filter", "log-pause", "log-top", "log-bottom", "log-wrap", "log-polls", "log-filter-close", "window-narrow", "window-widen"),
    ),
    ("Config: presets and restart", ("preset-next", "preset-prev", "preset-apply", "rollback", "restart")),
    ("Accuracy check and benchmarks", ("check", "check-data", "cancel", "bench", "bench-baseline", "sweep")),
    ("Fleet", ("fleet-drill", "fleet-sort", "fleet-sort-reverse", "fleet-filter", "fleet-filter-close",
               "fleet-refresh", "fleet-back")),
    ("Panes", ("tab-live", "tab-findings", "tab-config", "tab-accuracy", "tab-ledger")),
    ("General", ("help", "theme-next", "screenshot", "report", "quit", "palette")),
)

# Actions that change the host (the session's one list, by the same names): hidden and refused in --readonly.
CHANGING = CHANGES_HOST

_DISPLAY = {
    "slash": "/",
    "space": "space",
    "question_mark": "?",
    "minus": "-",
    "plus": "+",
    "equals_sign": "=",
    "escape": "esc",
    "enter": "enter",
}

# The palette's own key: Textual's App binds it; listed so help shows it.
PALETTE = Binding("ctrl+p", "command_palette", "Command palette (every action, themes)", id="palette")


@dataclass(frozen=True)
class Key:
    """One binding and the class that owns it (whose instance runs the action)."""

    binding: Binding
    owner: type[DOMNode]


def all_keys(owners: Sequence[type[DOMNode]]) -> dict[str, Key]:
    """Binding id → key, over the owners' BINDINGS (and the palette's own key, which the App holds)."""
    out: dict[str, Key] = {}
    for owner in owners:
        for b in owner.BINDINGS:
            if isinstance(b, Binding) and b.id:
                out[b.id] = Key(b, owner)
    out[PALETTE.id or "palette"] = Key(PALETTE, App)
    return out


def groups(owners: Sequence[type[DOMNode]], hidden: Iterable[str] = ()) -> list[tuple[str, list[Key]]]:
    """The owners' keys by group, in help's order; `hidden` ids (keys that mean nothing here) and empty
    groups left out."""
    keys = all_keys(owners)
    gone = set(hidden)
    out = [(title, [keys[i] for i in ids if i in keys and i not in gone]) for title, ids in HELP_ORDER]
    return [(title, entries) for title, entries in out if entries]


def bound_keys(binding: Binding, keymap: Mapping[str, str]) -> list[str]:
    """The keys that run a binding, after the profile's keymap (Textual's own spelling: "R", "escape")."""
    return [k.strip() for k in keymap.get(binding.id or "", binding.key).split(",")]


def owner_of_key(key: str, bindings: Iterable[BindingType], keymap: Mapping[str, str]) -> Binding | None:
    """Which of `bindings` a key press runs, after the keymap (from the declared BINDINGS, so a disabled
    binding is found too: Textual's public `active_bindings` leaves those out)."""
    return next((b for b in Binding.make_bindings(bindings) if key in bound_keys(b, keymap)), None)


def shown_keys(binding: Binding, keymap: Mapping[str, str]) -> str:
    """The keys of a binding as help shows them, after the profile's keymap."""
    return ", ".join(display(k) for k in bound_keys(binding, keymap))


def display(key: str) -> str:
    key = key.strip()
    return _DISPLAY.get(key, key)
