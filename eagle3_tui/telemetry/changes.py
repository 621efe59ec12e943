"""Before and after each applied change, from the run ledger: what "56.8 tok/s, 46.7 after the steps fix,
54.8 after the wiring fix" means, as rows.

A change is a ledger row of kind `preset` or `rollback` (what the console and `apply` / `rollback` write
before the restart they cause). Its *before* is the newest measured row between the change before it
and itself; its *after* is the first measured row between it and the next change. A measured row is a
benchmark or a sweep step that is not a baseline and says an accept length or tok/s. A row measured
before an earlier change ran another configuration, so it is never taken as a later change's before:
an unmeasured side stays None, and the report says so instead of comparing the wrong runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from eagle3_tui.telemetry.ledger import LedgerRow

__all__ = ["CHANGE_KINDS", "ChangeEffect", "change_effects", "is_measured"]

CHANGE_KINDS = ("preset", "rollback")
_MEASURED_KINDS = ("benchmark", "sweep")


def is_measured(row: LedgerRow) -> bool:
    """A benchmark or sweep step with speculation's numbers (accept length or tok/s): a before or an after."""
    return (row.kind in _MEASURED_KINDS and not row.is_baseline
            and (row.accept_len is not None or row.tok_s is not None))


@dataclass(frozen=True)
class ChangeEffect:
    """One applied change and the measured rows on either side of it (None: not measured there)."""

    change: LedgerRow
    before: LedgerRow | None
    after: LedgerRow | None

    @property
    def label(self) -> str:
        """The change as the ledger notes it ("applied train-[:-1]", "rolled back steps=15"), with its row id."""
        return f"#{self.change.id} {self.change.note or self.change.kind}"


def change_effects(rows: Sequence[LedgerRow]) -> list[ChangeEffect]:
    """Each change in `rows` (one host's ledger, any order) with its before and after, oldest first."""
    ordered = sorted(rows, key=lambda r: r.id)
    cuts = [i for i, r in enumerate(ordered) if r.kind in CHANGE_KINDS]
    out: list[ChangeEffect] = []
    for n, i in enumerate(cuts):
        start = cuts[n - 1] + 1 if n else 0
        stop = cuts[n + 1] if n + 1 < len(cuts) else len(ordered)
        before = next((r for r in reversed(ordered[start:i]) if is_measured(r)), None)
        after = next((r for r in ordered[i + 1:stop] if is_measured(r)), None)
        out.append(ChangeEffect(ordered[i], before, after))
    return out
