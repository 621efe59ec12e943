"""A run recorded in the ledger with the configuration it ran under (the known launch, the server view,
the baseline)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from eagle3_tui.session.store.records import config_snapshot

if TYPE_CHECKING:
    from eagle3_tui.session.attached.known import Known
    from eagle3_tui.session.store.records import Records
    from eagle3_tui.session.views import Views
    from eagle3_tui.telemetry.metrics import Telemetry


class Recorder:
    """Ledger rows for this session's runs, each with the configuration it ran under."""

    def __init__(self, known: Known, views: Views, telemetry: Telemetry, records: Records) -> None:
        self._known = known
        self._views = views
        self._telemetry = telemetry
        self._records = records

    def config_snapshot(self) -> dict[str, Any]:
        return config_snapshot(self._known.spec, self._views.server, self._telemetry.baseline_tps)

    def record(self, kind: str, results: dict[str, Any], note: str = "") -> None:
        self._records.record(kind, self.config_snapshot(), results, note)
