"""Modal screens: the apply diff with the restart warning, and a yes/no confirmation."""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.content import Content
from textual.markup import escape
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static

from eagle3_tui.eagle.wiring import format_boundaries
from eagle3_tui.ui.format import fmt_duration, fmt_flags, fmt_ids

if TYPE_CHECKING:
    from eagle3_tui.session import ApplyPlan

def diff_content(diff: str) -> Content:
    """Colour a unified diff: additions good, removals bad, hunk headers muted (no markup parsing:
    JSON brackets are data)."""
    parts: list[tuple[str, str] | str] = []
    for i, line in enumerate(diff.splitlines()):
        if i < 2 and line.startswith(("+++ ", "--- ")):
            parts.append((line, "bold"))
        elif line.startswith("+"):
            parts.append((line, "$accept-good"))
        elif line.startswith("-"):
            parts.append((line, "$accept-bad"))
        elif line.startswith("@@"):
            parts.append((line, "$foreground-muted"))
        else:
            parts.append(line)
        parts.append("\n")
    if not parts:
        return Content.from_markup("[$foreground-muted](no change to the file)[/]")
    return Content.assemble(*parts[:-1])


class DiffModal(ModalScreen[bool]):
    """Shows what applying a preset changes and that the server restarts; dismisses True to apply."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "confirm", "Apply and restart", id="diff-confirm"),
        Binding("n,escape", "cancel", "Cancel", id="diff-cancel"),
    ]

    def __init__(self, plan: ApplyPlan, *, deadline_s: float | None = None) -> None:
        super().__init__()
        self.plan = plan
        self.deadline_s = deadline_s

    def compose(self) -> ComposeResult:
        plan = self.plan
        preset = plan.preset
        with Vertical(id="diff-dialog", classes="dialog"):
            yield Label(f"[b]Apply preset {escape(preset.name)}[/b]", id="diff-title")
            bounds = (
                f" → boundaries {escape(format_boundaries(preset.boundaries))}"
                if preset.boundaries is not None
                else ""
            )
            what = (
                f"layer ids {escape(fmt_ids(preset.layer_ids))}{bounds}"
                if preset.kind == "layers"
                else "launch flags " + escape(fmt_flags(dict(preset.flags)))
            )
            yield Static(f"{what}\nfile: {escape(str(plan.path))}", id="diff-what")
            with VerticalScroll(id="diff-body"):
                yield Static(diff_content(plan.diff or ""), id="diff-text")
            notes: list[str] = [f"[$accept-bad]✖ {escape(p)}[/]" for p in plan.problems or []]
            notes += [f"[$accept-warn]▲ {escape(w)}[/]" for w in plan.warnings or []]
            deadline = f" (deadline {fmt_duration(self.deadline_s)})" if self.deadline_s else ""
            if plan.problems:
                notes.append("[b]Cannot apply:[/b] fix the problems above first.")
            else:
                notes.append(
                    f"[b $warning]Applying restarts the server{deadline}:[/] requests in flight fail, "
                    "a timestamped backup is kept, u rolls back."
                )
            yield Static("\n".join(notes), id="diff-notes")
            with Horizontal(classes="buttons"):
                yield Button(
                    "Apply and restart (y)", variant="warning", id="apply", disabled=bool(plan.problems)
                )
                yield Button("Cancel (n)", id="cancel")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "apply":
            self.action_confirm()
        else:
            self.action_cancel()

    def action_confirm(self) -> None:
        if self.plan.problems:
            self.app.bell()
            return
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)


class ConfirmModal(ModalScreen[bool]):
    """A yes/no question for destructive or interrupting actions."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "yes", "Yes", id="confirm-yes"),
        Binding("n,escape", "no", "No", id="confirm-no"),
    ]

    def __init__(self, question: str, *, yes: str = "Yes") -> None:
        super().__init__()
        self.question = question
        self.yes_label = yes

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-dialog", classes="dialog"):
            yield Static(escape(self.question), id="confirm-question")
            with Horizontal(classes="buttons"):
                yield Button(f"{self.yes_label} (y)", variant="error", id="yes")
                yield Button("No (n)", id="no")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_yes(self) -> None:
        self.dismiss(True)

    def action_no(self) -> None:
        self.dismiss(False)
