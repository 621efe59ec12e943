"""The training data's path and slots, asked where the operator is (the Accuracy pane's d).

The doctor cannot know the trained wiring without the training data. The modal asks for the data glob
and the boundaries its slots hold, checks the slots' text here, and hands both to `submit` (the session:
it reads the data's first file on the host, checks the slots against it and saves both to the host's
profile). A refusal is shown in the modal, which stays open with what was typed; success dismisses it
with the session's one-line summary.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import ClassVar

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Static

Submit = Callable[[str, "tuple[int, ...] | None"], Awaitable[str]]


class DataModal(ModalScreen["str | None"]):
    """Data glob and slot boundaries; dismisses with the summary of what was learnt, None when cancelled."""

    DEFAULT_CSS = """
    DataModal #data-error { color: $error; height: auto; }
    DataModal Input { margin-bottom: 1; }
    """

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="data-cancel"),
    ]

    def __init__(self, submit: Submit, *, glob: str = "", slots: tuple[int, ...] | None = None,
                 where: str = "") -> None:
        super().__init__()
        self.submit = submit
        self.glob = glob
        self.slots = slots
        self.where = where

    def compose(self) -> ComposeResult:
        with Vertical(id="data-dialog", classes="dialog"):
            yield Label("[b]Training data[/b]", id="data-title")
            yield Static(
                "The doctor sees the trained wiring only in the training data: give the hidden-state files "
                "(a glob or a folder, on the host) and the boundaries their slots hold (0 = embedding output, "
                "h = input of layer h; empty: inferred where the layout says)."
                + (f"\nSaved to {escape(self.where)}." if self.where else ""),
                id="data-help",
            )
            yield Input(self.glob, placeholder="/data/hs/*.pt", id="data-glob")
            yield Input(",".join(map(str, self.slots or ())), placeholder="0,3,31,59", id="data-slots")
            yield Static("", id="data-error")
            with Horizontal(classes="buttons"):
                yield Button("Save (enter)", variant="primary", id="save")
                yield Button("Cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#data-glob", Input).focus()

    @on(Input.Submitted)
    @on(Button.Pressed, "#save")
    def _save(self) -> None:
        from eagle3_tui.errors import UserError
        from eagle3_tui.session import parse_slots

        glob = self.query_one("#data-glob", Input).value.strip()
        if not glob:
            self._error("give the data's path or glob")
            return
        try:
            slots = parse_slots(self.query_one("#data-slots", Input).value, "slots")
        except UserError as err:
            self._error(str(err))
            return
        self._error("reading the data's first file on the host…")
        self._run(glob, slots)

    @work(group="data", exclusive=True, exit_on_error=False)
    async def _run(self, glob: str, slots: tuple[int, ...] | None) -> None:
        from eagle3_tui.ui.jobs import err_text

        try:
            summary = await self.submit(glob, slots)
        except Exception as err:
            self._error(err_text(err))
            return
        self.dismiss(summary)

    def _error(self, text: str) -> None:
        self.query_one("#data-error", Static).update(escape(text))

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
