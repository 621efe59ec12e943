"""The fleet's rows: one plain dataclass per server and the pure functions that make, mark, sort and
filter them.

A row is derived from the server's recent reads, `(t, Reading)` pairs, whichever source they came from
(its own `/metrics`, or a Prometheus server's range query). Accept length "now" is the last interval's,
"over the window" the whole span's: for vLLM's counters a difference of cumulative counts, for SGLang's
gauge the mean of the reads. A counter that goes backwards is a restart: the window starts over there.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from eagle3_tui.fleet.readings import Reading

OUTLIER_SHARE = 0.75
"""A row is an outlier when the tokens it accepts beyond the first (accept length - 1, over the window) are
below this share of its siblings' median: 1.25 among siblings at 1.42 accepts 0.25 tokens against 0.42."""
OUTLIER_MIN_GAP = 0.1
"""... and it is at least this many tokens below them (two healthy replicas differ by noise)."""

Point = tuple[float, Reading]


@dataclass(frozen=True)
class Derived:
    """What a server's reads say over the window."""

    accept_now: float | None = None
    accept_window: float | None = None
    per_position: tuple[float, ...] = ()
    tok_s: float | None = None
    running: float | None = None
    last_restart: float | None = None


@dataclass(frozen=True)
class FleetRow:
    """One server as the table shows it. `status` is "ok", "down", "garbage" or "waiting"; `reason` says why
    in one line when it is not ok (the row keeps the last values it had)."""

    name: str
    engine: str
    where: str
    status: str = "waiting"
    reason: str = ""
    release: str | None = None
    draft: str | None = None
    model: str | None = None
    steps: int | None = None
    topk: int | None = None
    draft_tokens: int | None = None
    accept_now: float | None = None
    accept_window: float | None = None
    per_position: tuple[float, ...] = ()
    tok_s: float | None = None
    running: float | None = None
    last_restart: float | None = None
    finding: str | None = None
    outlier: str = ""
    """Why the row is an outlier among its siblings ("" when it is not)."""
    updated: float | None = None
    """When the server last answered with metrics (the reader's clock)."""
    speculative: bool = True
    """False when its metrics have no speculative-decoding family (a baseline replica, or spec turned off)."""

    @property
    def siblings_key(self) -> str:
        """Rows compared with each other: the same draft (else the same model) on the same engine."""
        return f"{self.engine}|{self.draft or self.model or ''}"


def _reset(old: Reading, new: Reading) -> bool:
    """A cumulative counter went backwards, or the process start time moved: the server restarted."""
    if old.start_time is not None and new.start_time is not None and new.start_time > old.start_time + 0.5:
        return True
    for a, b in ((old.drafts, new.drafts), (old.accepted, new.accepted),
                 (old.generation_tokens, new.generation_tokens)):
        if a is not None and b is not None and b < a:
            return True
    return False


def since_restart(points: Sequence[Point]) -> tuple[Sequence[Point], float | None]:
    """The points after the last restart among them, and when it was seen (None: none seen)."""
    start, seen = 0, None
    for i in range(1, len(points)):
        if _reset(points[i - 1][1], points[i][1]):
            start, seen = i, points[i][0]
    return points[start:], seen


def _counter_accept(a: Reading, b: Reading) -> tuple[float | None, tuple[float, ...]]:
    if a.drafts is None or b.drafts is None or a.accepted is None or b.accepted is None:
        return None, ()
    drafts = b.drafts - a.drafts
    if drafts <= 0:
        return None, ()
    pos_a = a.accepted_per_position + (0.0,) * max(0, len(b.accepted_per_position) - len(a.accepted_per_position))
    per_pos = tuple((n - o) / drafts for n, o in zip(b.accepted_per_position, pos_a, strict=False))
    return 1.0 + (b.accepted - a.accepted) / drafts, per_pos


def _tok_s(a: Point, b: Point) -> float | None:
    (ta, ra), (tb, rb) = a, b
    if ra.generation_tokens is None or rb.generation_tokens is None or tb <= ta:
        return None
    return max(0.0, (rb.generation_tokens - ra.generation_tokens) / (tb - ta))


def _rate_base(live: Sequence[Point], rate_s: float) -> Point | None:
    """The read "now" is measured from: the previous one, or (rate_s > 0) the newest at least rate_s old."""
    if len(live) < 2:
        return None
    if rate_s <= 0:
        return live[-2]
    now = live[-1][0]
    older = [p for p in live[:-1] if p[0] <= now - rate_s]
    return older[-1] if older else live[0]


def derive(points: Sequence[Point], window_s: float, rate_s: float = 0.0) -> Derived:
    """The row's live numbers from reads in time order (the newest last). "Now" is the last interval
    (`rate_s` > 0: the last rate_s seconds, for reads resampled by a Prometheus range query)."""
    if not points:
        return Derived()
    now, last = points[-1]
    live, restart_seen = since_restart([p for p in points if p[0] >= now - window_s])
    first = live[0]
    base = _rate_base(live, rate_s)
    restart = last.start_time if last.start_time is not None else restart_seen
    tok_s = _tok_s(base, live[-1]) if base is not None else None
    if tok_s is None:
        tok_s = last.gen_throughput
    if last.engine == "vllm" or last.drafts is not None:
        now_acc, _ = _counter_accept(base[1], last) if base is not None else (None, ())
        win_acc, per_pos = _counter_accept(first[1], last) if len(live) >= 2 else (None, ())
        if len(live) < 2 and last.drafts:  # one read: the server's whole life so far
            win_acc, per_pos = _counter_accept(replace(last, drafts=0.0, accepted=0.0,
                                                       accepted_per_position=()), last)
        return Derived(now_acc, win_acc, per_pos, tok_s, last.running, restart)
    gauges = [r.accept_gauge for _, r in live if r.accept_gauge is not None and math.isfinite(r.accept_gauge)]
    # SGLang's gauge holds its last batch's value; a zero is "no batch yet", not an accept length
    gauges = [g for g in gauges if g > 0]
    return Derived(
        last.accept_gauge if last.accept_gauge else None,
        statistics.fmean(gauges) if gauges else None,
        (), tok_s, last.running, restart,
    )


def with_reading(row: FleetRow, points: Sequence[Point], window_s: float, rate_s: float = 0.0) -> FleetRow:
    """The row after a successful read: live numbers derived, status ok, the steps the metrics name."""
    d = derive(points, window_s, rate_s)
    last = points[-1][1]
    return replace(
        row, status="ok", reason="", **asdict(d),  # the row's live fields are named as Derived's
        steps=row.steps if row.steps is not None else last.num_steps,
        draft_tokens=row.draft_tokens if row.draft_tokens is not None else last.num_draft_tokens,
        model=row.model or last.model, updated=points[-1][0], speculative=last.speculative,
    )


def failed(row: FleetRow, status: str, reason: str) -> FleetRow:
    """The row of a server that did not answer, or answered garbage: marked, last values kept."""
    return replace(row, status=status, reason=reason)


def mark_outliers(rows: Iterable[FleetRow], share: float = OUTLIER_SHARE,
                  min_gap: float = OUTLIER_MIN_GAP) -> list[FleetRow]:
    """Mark each row whose accept length over the window is well below the median of its siblings (the
    other rows serving the same draft): the usual sign of a wrong flag or release on one node."""
    rows = list(rows)
    groups: dict[str, list[FleetRow]] = {}
    for r in rows:
        if r.status == "ok" and r.accept_window is not None:
            groups.setdefault(r.siblings_key, []).append(r)
    out = []
    for r in rows:
        mark = ""
        peers = [p.accept_window for p in groups.get(r.siblings_key, []) if p.name != r.name]
        if r.status == "ok" and r.accept_window is not None and peers:
            med = statistics.median(x for x in peers if x is not None)
            if r.accept_window - 1.0 < share * (med - 1.0) and med - r.accept_window >= min_gap:
                mark = f"accept {r.accept_window:.2f} vs {med:.2f}, the median of {len(peers)} sibling(s)"
        out.append(replace(r, outlier=mark) if mark != r.outlier else r)
    return out


# --- sorting and filtering ----------------------------------------------------------------------------

STATUS_ORDER = {"down": 0, "garbage": 1, "waiting": 2, "ok": 3}
SORT_KEYS: dict[str, Callable[[FleetRow], Any]] = {
    "name": lambda r: r.name.lower(),
    "engine": lambda r: (r.engine, r.release or ""),
    "draft": lambda r: (r.draft or "").lower(),
    "steps": lambda r: r.draft_tokens if r.draft_tokens is not None else r.steps,
    "accept": lambda r: r.accept_now,
    "window": lambda r: r.accept_window,
    "tok_s": lambda r: r.tok_s,
    "running": lambda r: r.running,
    "restart": lambda r: r.last_restart,
    "finding": lambda r: r.finding or "",
    "status": lambda r: (STATUS_ORDER.get(r.status, 9), 0 if r.outlier else 1),
}


def sort_rows(rows: Iterable[FleetRow], key: str, descending: bool = False) -> list[FleetRow]:
    """Rows by `key` (a SORT_KEYS name); rows without a value go last either way, ties by name."""
    get = SORT_KEYS[key]
    rows = sorted(rows, key=lambda r: r.name.lower())
    have = [r for r in rows if get(r) is not None]
    missing = [r for r in rows if get(r) is None]
    return sorted(have, key=get, reverse=descending) + missing


def row_words(row: FleetRow) -> str:
    """What a filter matches against: names, labels, status words (`down`, `outlier`, the finding's id)."""
    words = [row.name, row.engine, row.where, row.release or "", row.draft or "", row.model or "",
             row.status, row.reason, row.finding or "", "outlier" if row.outlier else ""]
    return " ".join(words).lower()


def filter_rows(rows: Iterable[FleetRow], query: str) -> list[FleetRow]:
    """Rows matching every word of `query` (case-insensitive substrings; `!word` excludes)."""
    terms = query.lower().split()
    out = []
    for r in rows:
        text = row_words(r)
        if all((t[1:] not in text) if t.startswith("!") and len(t) > 1 else (t in text) for t in terms):
            out.append(r)
    return out
