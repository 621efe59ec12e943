"""The fleet view's model: many EAGLE-3 servers (SGLang and vLLM) read at once, one row each.

`spec` (the fleet file), `readings` (a `/metrics` answer as numbers), `rows` (the row model: derive,
outliers, sort, filter), `promapi` (the Prometheus HTTP API), `diagnosis` (the doctor's worst finding),
`poller` (the async refresh), `table` (cells and text), `build` (the composition). The UI and the
headless command use only the names below (an import-linter contract).
"""

from __future__ import annotations

from eagle3_tui.fleet.build import make_fleet
from eagle3_tui.fleet.poller import DirectFleet, Fleet, NoTunnels, PrometheusFleet, Tunnels
from eagle3_tui.fleet.promapi import PrometheusError, PrometheusReader
from eagle3_tui.fleet.readings import Reading, read_metrics
from eagle3_tui.fleet.rows import SORT_KEYS, FleetRow, derive, filter_rows, mark_outliers, sort_rows
from eagle3_tui.fleet.spec import (
    FleetEntry,
    FleetSpec,
    entries_from_hosts,
    load_fleet,
    parse_fleet,
    spec_from_cli,
)
from eagle3_tui.fleet.table import COLUMNS, ago, cells, detail, to_json, to_text

__all__ = [
    "COLUMNS",
    "SORT_KEYS",
    "DirectFleet",
    "Fleet",
    "FleetEntry",
    "FleetRow",
    "FleetSpec",
    "NoTunnels",
    "PrometheusError",
    "PrometheusFleet",
    "PrometheusReader",
    "Reading",
    "Tunnels",
    "ago",
    "cells",
    "derive",
    "detail",
    "entries_from_hosts",
    "filter_rows",
    "load_fleet",
    "make_fleet",
    "mark_outliers",
    "parse_fleet",
    "read_metrics",
    "sort_rows",
    "spec_from_cli",
    "to_json",
    "to_text",
]
