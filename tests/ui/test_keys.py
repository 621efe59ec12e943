"""The keys live on their owners (app, main screen, panes); help and the palette list every one of
them, each id once, so a profile's keymap can rebind any key by its id."""

from __future__ import annotations

from textual.binding import Binding

from eagle3_tui.ui import keys
from eagle3_tui.ui.app import Eagle3App
from eagle3_tui.ui.screens.fleet import FleetScreen

# the one-server console's owners and the Fleet screen's (`--fleet`): every key of either mode
OWNERS = [*Eagle3App().key_owners(), FleetScreen]


def test_every_owned_binding_is_listed_once_in_help():
    ids: list[str] = []
    for owner in OWNERS:
        for b in owner.BINDINGS:
            assert isinstance(b, Binding) and b.id, f"{owner.__name__}: a binding without an id: {b}"
            ids.append(b.id)
    assert len(ids) == len(set(ids)), "a binding id used twice"
    listed = [i for _, group in keys.HELP_ORDER for i in group]
    assert sorted(listed) == sorted([*ids, "palette"])


def test_the_binding_ids_profiles_use_are_still_there():
    # ids a keymap in hosts.toml may name (README); renaming one breaks a user's keymap
    for binding_id in ("log-filter", "log-pause", "log-top", "log-bottom", "log-wrap", "window-narrow",
                       "window-widen", "preset-next", "preset-prev", "preset-apply", "rollback", "restart",
                       "check", "cancel", "bench", "bench-baseline", "tab-live", "tab-findings", "tab-config",
                       "tab-accuracy", "tab-ledger", "help", "theme-next", "screenshot", "quit"):  # fmt: skip
        assert binding_id in keys.all_keys(OWNERS), binding_id


def test_the_keys_that_change_the_host_are_the_session_actions_by_name():
    """One list (eagle3_tui/actions.py): the console's host-changing keys run actions named as the
    session's methods and subcommands, so --readonly hides every one of them."""
    from eagle3_tui.actions import CHANGES_HOST

    bound = {b.action for owner in OWNERS for b in owner.BINDINGS if isinstance(b, Binding)}
    assert {"apply", "rollback", "restart", "sweep"} <= bound & CHANGES_HOST
    assert keys.CHANGING is CHANGES_HOST
