"""The run ledger: every restart, preset, benchmark and check as one SQLite row, so "90 tok/s
baseline, 56.8 with spec, 46.7 after the steps fix, 54.8 after the wiring fix" is a table.

Each row keeps the full config snapshot and the results as JSON. The renderings read these
keys (others are kept and shown in the CSV's JSON columns):

* config: ``preset``, ``speculative`` (bool), ``algorithm``, ``steps``, ``topk``, ``draft_tokens``
  (effective values), ``layer_ids`` (None = SGLang's default), ``boundaries``, ``baseline_tps``.
* results: ``accept_len``, ``tok_s`` (client-side output tok/s, or the log's gen throughput),
  ``baseline`` (True for a run without speculation), ``predicted_accept_len``; a check row holds the
  whole report (``wirings``), and shows the prediction for the boundaries served.

Speedup is a row's tok/s over the latest baseline run on the same host before it (or the
config's ``baseline_tps`` when no baseline run was recorded).

The file lives in the user data dir (``EAGLE3_TUI_DATA_DIR`` overrides); WAL mode and a busy
timeout let the console and a headless command write at the same time. The schema is versioned
in a ``meta`` table; a corrupt file or a newer schema is a clear UserError, never a traceback.
"""

from __future__ import annotations

import contextlib
import csv
import dataclasses
import io
import json
import math
import os
import re
import sqlite3
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eagle3_tui.eagle.accuracy import CheckReport, predicted_accept_len
from eagle3_tui.eagle.wiring import format_boundaries
from eagle3_tui.errors import UserError

SCHEMA_VERSION = 1
DB_NAME = "ledger.sqlite3"
ENV_DATA_DIR = "EAGLE3_TUI_DATA_DIR"
_KIND = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    ts REAL NOT NULL,
    kind TEXT NOT NULL,
    host TEXT NOT NULL,
    config TEXT NOT NULL,
    results TEXT NOT NULL,
    note TEXT NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS runs_host ON runs (host, id);
"""


def default_path() -> Path:
    """`$EAGLE3_TUI_DATA_DIR/ledger.sqlite3`, else the platform's user data dir."""
    env = os.environ.get(ENV_DATA_DIR)
    if env:
        return Path(env).expanduser() / DB_NAME
    import platformdirs

    return Path(platformdirs.user_data_dir("eagle3-tui", appauthor=False)) / DB_NAME


def _first_number(d: dict[str, Any], *keys: str) -> float | None:
    for k in keys:
        v = d.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
            return float(v)
    return None


@dataclass(frozen=True)
class LedgerRow:
    id: int
    ts: float
    kind: str
    host: str
    config: dict[str, Any] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    speedup: float | None = field(default=None, compare=False)
    """tok/s over the baseline (see `speedups`); filled in by `Ledger.rows`."""

    @property
    def accept_len(self) -> float | None:
        return _first_number(self.results, "accept_len", "accept_length", "spec_accept_length", "avg_spec_accept_length")

    @property
    def tok_s(self) -> float | None:
        return _first_number(self.results, "tok_s", "output_tps", "tokens_per_s", "gen_tps")

    @property
    def predicted_accept_len(self) -> float | None:
        """What a check predicts for the boundaries served when it ran.

        A row holding the whole report asks `eagle.accuracy.predicted_accept_len`, the number the
        doctor and the status bar show too; a row with only a figure (written by hand or by an older
        version) shows that figure.
        """
        if isinstance(self.results.get("wirings"), list):
            try:
                report = CheckReport.from_dict(self.results)
            except (TypeError, ValueError, KeyError, AttributeError):
                report = None
            if report is not None:
                served = self.config.get("boundaries")
                ok = isinstance(served, list) and all(isinstance(h, int) for h in served)
                return predicted_accept_len(report, served if ok else None)
        return _first_number(self.results, "predicted_accept_len")

    @property
    def engine(self) -> str | None:
        """The serving engine and its release (`vllm 0.32.0`, `sglang 0.5.23`; `engine` alone when the
        release was not known). A row written before rows named it: the engine its launch command names,
        else None."""
        return engine_label(self.config)

    @property
    def prompt_format(self) -> str | None:
        """A benchmark's "chat" (the served chat template) or "raw"; None for rows written before the field."""
        v = self.results.get("prompt_format")
        return v if v in ("chat", "raw") else None

    @property
    def is_baseline(self) -> bool:
        return self.kind == "baseline" or self.results.get("baseline") is True or self.config.get("baseline") is True


class Ledger:
    """The SQLite ledger. Cheap to construct: the file is opened on first use, per operation."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path).expanduser() if path is not None else default_path()

    # --- connection ---------------------------------------------------------------------------

    def _fail(self, err: Exception) -> UserError:
        return UserError(
            f"the ledger {self.path} is not a usable SQLite database ({err}); "
            "move it aside and a new one will be started"
        )

    @contextlib.contextmanager
    def _connect(self, *, create: bool) -> Iterator[sqlite3.Connection | None]:
        if not self.path.exists():
            if not create:
                yield None
                return
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise UserError(f"cannot create the ledger's folder {self.path.parent}: {err.strerror or err}") from None
        elif self.path.is_dir():
            raise UserError(f"the ledger path {self.path} is a folder, not a file")
        try:
            conn = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None)
        except sqlite3.Error as err:
            raise UserError(f"cannot open the ledger {self.path}: {err}") from None
        try:
            conn.execute("PRAGMA busy_timeout = 30000")
            self._ensure_schema(conn)
            yield conn
        except sqlite3.OperationalError as err:
            if "locked" in str(err) or "busy" in str(err):
                raise UserError(f"the ledger {self.path} stayed locked by another writer for 30 s; try again") from None
            raise self._fail(err) from None
        except sqlite3.DatabaseError as err:
            raise self._fail(err) from None
        finally:
            conn.close()

    def _check_version(self, value: object) -> None:
        try:
            version = int(str(value))
        except ValueError:
            raise UserError(f"the ledger {self.path} has an unreadable schema version {value!r}") from None
        if version > SCHEMA_VERSION:
            raise UserError(
                f"the ledger {self.path} was written by a newer eagle3-tui (schema {version}; "
                f"this one reads up to {SCHEMA_VERSION}): upgrade eagle3-tui or use --db with another file"
            )

    def _ensure_schema(self, conn: sqlite3.Connection) -> None:
        try:  # the common case, read-only: the schema is there already
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
        except sqlite3.OperationalError as err:
            if "no such table" not in str(err):
                raise
            row = None
        if row is not None:
            self._check_version(row[0])
            return
        with contextlib.suppress(sqlite3.OperationalError):
            conn.execute("PRAGMA journal_mode = WAL")  # not on every filesystem; rollback journal then
        conn.execute("BEGIN IMMEDIATE")
        try:
            # one statement at a time: executescript() would COMMIT the IMMEDIATE transaction
            for stmt in (s.strip() for s in _SCHEMA.split(";")):
                if stmt:
                    conn.execute(stmt)
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if row is None:
                conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            else:
                self._check_version(row[0])
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def close(self) -> None:
        """Nothing to release: each operation opens and closes its own connection."""

    # --- API ----------------------------------------------------------------------------------

    def record(
        self,
        kind: str,
        host: str,
        config: dict[str, Any],
        results: dict[str, Any],
        note: str = "",
        *,
        ts: float | None = None,
    ) -> int:
        """Append one run; returns its id."""
        if not _KIND.match(kind):
            raise UserError(f"ledger kind {kind!r} is not a short lowercase word (e.g. benchmark, restart, check)")
        try:
            cfg = json.dumps(config, default=_jsonable, sort_keys=False)
            res = json.dumps(results, default=_jsonable, sort_keys=False)
        except (TypeError, ValueError) as err:
            raise UserError(f"cannot record a ledger row: {err}") from None
        with self._connect(create=True) as conn:
            assert conn is not None
            cur = conn.execute(
                "INSERT INTO runs (ts, kind, host, config, results, note) VALUES (?, ?, ?, ?, ?, ?)",
                (time.time() if ts is None else float(ts), kind, str(host), cfg, res, str(note)),
            )
            return int(cur.lastrowid or 0)

    def rows(self, host: str | None = None, *, kind: str | None = None) -> list[LedgerRow]:
        """All runs (of one host / kind), oldest first. A missing file is an empty ledger."""
        sql = "SELECT id, ts, kind, host, config, results, note FROM runs"
        args: list[str] = []
        if host is not None:
            sql += " WHERE host = ?"
            args.append(host)
        sql += " ORDER BY id"
        with self._connect(create=False) as conn:
            if conn is None:
                return []
            raw = conn.execute(sql, args).fetchall()
        rows = [LedgerRow(r[0], r[1], r[2], r[3], _loads(r[4]), _loads(r[5]), r[6]) for r in raw]
        sp = speedups(rows)  # over all kinds: a benchmark's baseline is another row
        return [dataclasses.replace(r, speedup=sp.get(r.id)) for r in rows if kind is None or r.kind == kind]


def _jsonable(v: Any) -> Any:
    if isinstance(v, (set, frozenset)):
        return sorted(v)
    if hasattr(v, "to_dict"):
        return v.to_dict()
    return str(v)


def _loads(text: str) -> dict[str, Any]:
    try:
        v = json.loads(text)
    except (TypeError, json.JSONDecodeError):
        return {"unreadable": str(text)}
    return v if isinstance(v, dict) else {"value": v}


# --- renderings -------------------------------------------------------------------------------------

COLUMNS = ("#", "time (UTC)", "kind", "host", "config", "accept len", "tok/s", "speedup", "note")


def engine_label(config: dict[str, Any]) -> str | None:
    """`config`'s engine and release as one cell (see `LedgerRow.engine`)."""
    name = config.get("engine")
    if not isinstance(name, str) or not name:
        argv = config.get("argv")
        if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
            return None
        from eagle3_tui.engines import engine_for_launch

        try:
            name = engine_for_launch(argv).name
        except UserError:
            return None
    release = config.get("engine_release")
    return f"{name} {release}" if isinstance(release, str) and release else name


def _fmt_ids(ids: Any) -> str:
    if ids is None:
        return "default"
    if isinstance(ids, (list, tuple)):
        return "[" + ", ".join(str(i) for i in ids) + "]"
    return str(ids)


def config_summary(config: dict[str, Any]) -> str:
    """One short cell: engine; preset; effective steps/topk/draft tokens; layer ids -> boundaries."""
    parts: list[str] = []
    if isinstance(config.get("engine"), str):  # rows written before rows named it show none
        parts.append(engine_label(config) or "")
    if config.get("preset"):
        parts.append(str(config["preset"]))
    if config.get("speculative") is False:
        parts.append("no speculation")
    else:
        spec = [f"{label} {config[k]}" for k, label in (("steps", "steps"), ("topk", "topk"), ("draft_tokens", "draft"))
                if config.get(k) is not None]
        asked = config.get("requested_draft_tokens")
        if spec and asked is not None and config.get("draft_tokens") is not None and asked != config["draft_tokens"]:
            spec[-1] += f" (asked {asked})"
        if spec:
            parts.append(" ".join(spec))
        if "layer_ids" in config or config.get("boundaries"):
            ids = _fmt_ids(config.get("layer_ids"))
            b = config.get("boundaries")
            if isinstance(b, (list, tuple)) and b:
                ids += " = " + format_boundaries(b)
            parts.append("ids " + ids)
    return "; ".join(parts) if parts else "-"


def speedups(rows: Sequence[LedgerRow]) -> dict[int, float | None]:
    """Row id -> tok/s over the latest earlier baseline of the same host (or config's baseline_tps)."""
    out: dict[int, float | None] = {}
    last_base: dict[str, float] = {}
    for r in sorted(rows, key=lambda r: r.id):
        tps = r.tok_s
        if r.is_baseline:
            if tps is not None and tps > 0:
                last_base[r.host] = tps
            out[r.id] = 1.0 if tps is not None else None
            continue
        base = last_base.get(r.host) or _first_number(r.config, "baseline_tps")
        out[r.id] = tps / base if (tps is not None and base) else None
    return out


def _cells(rows: Sequence[LedgerRow]) -> list[list[str]]:
    sp = speedups(rows)
    table = []
    for r in rows:
        acc, tps = r.accept_len, r.tok_s
        s = r.speedup if r.speedup is not None else sp.get(r.id)
        pred = r.predicted_accept_len
        table.append([
            str(r.id),
            time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r.ts)),
            r.kind + (" (baseline)" if r.is_baseline and r.kind != "baseline" else "")
            + (f" ({r.prompt_format})" if r.prompt_format else ""),
            r.host,
            config_summary(r.config),
            f"{acc:.2f}" if acc is not None else (f"{pred:.2f} predicted" if pred is not None else ""),
            f"{tps:.1f}" if tps is not None else "",
            f"{s:.2f}x" if s is not None else "",
            r.note,
        ])
    return table


def to_markdown(rows: Sequence[LedgerRow]) -> str:
    """A GitHub-flavoured markdown table to paste in a report."""

    def esc(s: str) -> str:
        return s.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join(["---:", "---", "---", "---", "---", "---:", "---:", "---:", "---"]) + "|"]
    lines += ["| " + " | ".join(esc(c) for c in row) + " |" for row in _cells(rows)]
    return "\n".join(lines) + "\n"


def to_csv(rows: Sequence[LedgerRow]) -> str:
    """CSV with the same columns plus the full config and results as JSON."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["id", "time_utc", "kind", "host", "config", "accept_len", "tok_s", "speedup", "note",
                "config_json", "results_json"])
    for r, cells in zip(rows, _cells(rows), strict=True):
        w.writerow([*cells, json.dumps(r.config, sort_keys=True), json.dumps(r.results, sort_keys=True)])
    return buf.getvalue()


def to_text(rows: Sequence[LedgerRow]) -> str:
    """Aligned columns for a terminal."""
    table = [list(COLUMNS), *_cells(rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(COLUMNS))]
    right = {0, 5, 6, 7}
    return "\n".join(
        "  ".join(c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(row)).rstrip()
        for row in table
    ) + "\n"
