"""The run ledger as the session writes it: one row per benchmark, check, preset, restart, rollback.

The ledger (telemetry/ledger.py, SQLite) is opened on first use. A row that cannot be written is a
warning, never a failure of what it records.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from typing import TYPE_CHECKING, Any

from eagle3_tui.errors import UserError
from eagle3_tui.session.events import LedgerChanged, ServerView
from eagle3_tui.session.launch import LaunchSpec, redact_env

if TYPE_CHECKING:
    from eagle3_tui.session.views import Views
    from eagle3_tui.sglang.client import BenchResult
    from eagle3_tui.telemetry.ledger import Ledger, LedgerRow


def config_snapshot(spec: LaunchSpec | None, server: ServerView, baseline_tps: float | None) -> dict[str, Any]:
    """The configuration a ledger row is filed under (secrets redacted)."""
    s = server
    return {
        "argv": list(spec.argv) if spec else list(s.argv),
        "env": redact_env(spec.env) if spec else {},
        "speculative": s.speculative,
        "algorithm": s.algorithm,
        "steps": s.steps,
        "topk": s.topk,
        "draft_tokens": s.draft_tokens,
        "requested_draft_tokens": s.requested_draft_tokens,
        "layer_ids": list(s.layer_ids) if s.layer_ids is not None else None,
        "boundaries": list(s.boundaries) if s.boundaries is not None else None,
        "preset": s.active_preset,
        "baseline_tps": baseline_tps,
        "engine": s.engine,
        "engine_release": s.version,
    }


def jsonable(obj: object) -> dict[str, Any]:
    """A report as a JSON object for the ledger (its own `to_dict`, else its dataclass fields)."""
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        return dict(to_dict())
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dict(json.loads(json.dumps(dataclasses.asdict(obj), default=str)))
    return {"value": str(obj)}


class Records:
    """Rows of one host (the profile's name) in the user's ledger."""

    def __init__(self, host_name: str, views: Views) -> None:
        self._host_name = host_name
        self._views = views
        self._ledger: Ledger | None = None
        self.problem: str | None = None
        """Why the last row could not be written (None: every row was)."""

    def ledger(self) -> Ledger:
        if self._ledger is None:
            from eagle3_tui.telemetry.ledger import Ledger

            self._ledger = Ledger()
        return self._ledger

    def rows(self) -> list[LedgerRow]:
        return list(self.ledger().rows(host=self._host_name))

    def readable_rows(self) -> list[LedgerRow]:
        """The rows, or none when the ledger cannot be read: the doctor goes on without them, and the
        problem is said where a row is written (`record`) or the ledger is shown."""
        try:
            return self.rows()
        except UserError:
            return []

    def record(self, kind: str, config: dict[str, Any], results: dict[str, Any], note: str = "") -> None:
        try:
            self.ledger().record(kind, self._host_name, config, results, note)
        except Exception as err:  # the ledger must never break a restart, but a lost row is said
            where = getattr(self._ledger, "path", None)
            self.problem = (f"the ledger{' ' + str(where) if where else ''} could not be written "
                            f"({type(err).__name__}: {err}): this {kind} run is not recorded")
            self._views.notice(self.problem, "warning")
            return
        self._views.emit(LedgerChanged())

    def last_baseline_tps(self) -> float | None:
        """The newest baseline run's tok/s, when the ledger has one."""
        with contextlib.suppress(Exception):
            for row in reversed(self.rows()):
                if row.kind == "baseline":
                    tps = row.results.get("tok_s") or row.results.get("output_tps")
                    if tps:
                        return float(tps)
        return None

    def close(self) -> None:
        if self._ledger is not None:
            with contextlib.suppress(Exception):
                self._ledger.close()


def bench_results(r: BenchResult, baseline_tps: float | None) -> dict[str, Any]:
    """A benchmark's ledger results: its fields, tok/s and the speedup over the baseline."""
    from eagle3_tui.telemetry.metrics import speedup

    d = r.as_dict()
    d["tok_s"] = r.output_tps
    d["speedup"] = None if r.baseline else speedup(r.output_tps, baseline_tps)
    d["baseline_tps"] = baseline_tps
    return d
