"""The fleet table as cells and text (pure): the screen and `eagle3-tui fleet` show the same columns."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict

from eagle3_tui.fleet.rows import FleetRow

# (column key, title, sort key of rows.SORT_KEYS)
COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("name", "server", "name"),
    ("status", "status", "status"),
    ("engine", "engine", "engine"),
    ("draft", "draft", "draft"),
    ("flags", "steps/topk/tok", "steps"),
    ("accept", "accept now", "accept"),
    ("window", "accept window", "window"),
    ("pos", "per position", "window"),
    ("tok_s", "tok/s", "tok_s"),
    ("running", "running", "running"),
    ("restart", "restarted", "restart"),
    ("finding", "worst finding", "finding"),
)
NONE = "-"


def _num(v: float | None, fmt: str = "{:.2f}") -> str:
    return NONE if v is None else fmt.format(v)


def ago(t: float | None, now: float) -> str:
    """A time as its age: `42s ago`, `3m ago`, `5h ago`, `2d ago`."""
    if t is None:
        return NONE
    s = max(0.0, now - t)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{int(s // size)}{unit} ago"
    return f"{int(s)}s ago"


def status_text(row: FleetRow) -> str:
    """A word (the reason is the detail line's, and the notes under the headless table)."""
    if row.status != "ok":
        return row.status.upper() if row.status in ("down", "garbage") else row.status
    if row.outlier:
        return "OUTLIER"
    return "ok" if row.speculative else "no spec"


def cells(row: FleetRow, now: float) -> tuple[str, ...]:
    """The row's cells, in COLUMNS order."""
    flags = NONE if row.steps is None and row.draft_tokens is None else (
        f"{_num(row.steps, '{}')}/{_num(row.topk, '{}')}/{_num(row.draft_tokens, '{}')}")
    engine = f"{row.engine} {row.release}" if row.release else row.engine
    return (
        row.name, status_text(row), engine, row.draft or row.model or NONE, flags,
        _num(row.accept_now), _num(row.accept_window),
        " ".join(f"{p:.2f}" for p in row.per_position) or NONE,
        _num(row.tok_s, "{:.1f}"), _num(row.running, "{:g}"), ago(row.last_restart, now),
        row.finding or NONE,
    )


def detail(row: FleetRow, now: float) -> str:
    """One line under the table for the selected row: where it is, why it is marked, how fresh."""
    parts = [f"{row.name} ({row.engine}) at {row.where}"]
    if row.status != "ok" and row.reason:
        parts.append(f"{row.status}: {row.reason}")
    if row.status != "ok" and row.updated is not None:
        parts.append(f"last read {ago(row.updated, now)}")
    if row.status == "ok" and not row.speculative:
        parts.append("serves without speculation (no speculative-decoding metrics)")
    if row.outlier:
        parts.append(f"outlier: {row.outlier}")
    if row.finding:
        parts.append(f"doctor: {row.finding}")
    return " · ".join(parts)


def to_text(rows: Sequence[FleetRow], now: float) -> str:
    """A plain fixed-width table (the headless command's)."""
    table = [tuple(t for _, t, _ in COLUMNS), *(cells(r, now) for r in rows)]
    widths = [max(len(line[i]) for line in table) for i in range(len(COLUMNS))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in table]
    notes = [f"{r.name}: {r.status}: {r.reason}" for r in rows if r.status != "ok" and r.reason]
    notes += [f"{r.name}: outlier: {r.outlier}" for r in rows if r.outlier]
    return "\n".join(lines + (["", *notes] if notes else [])) + "\n"


def to_json(rows: Sequence[FleetRow]) -> str:
    out = []
    for r in rows:
        d = asdict(r)
        d["per_position"] = list(r.per_position)
        out.append(d)
    return json.dumps(out, indent=2) + "\n"
