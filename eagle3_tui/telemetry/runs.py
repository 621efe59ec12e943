"""A server log split into server runs, each summarised (what `eagle3-tui replay` prints).

A run starts where a server process starts (its `server_args=ServerArgs(...)` line) or, in logs
without that line, at a second readiness line. Lines before the first start belong to a run that
began before the log did. Startup warnings printed just before the `server_args` line go with the
new run.

Memory stays bounded whatever the log's length: values go into `ValueSketch`es (exact while the
printed values take few distinct values, coarser buckets past `max_keys`), warnings and failures
are capped, and only a run's summary is kept once the next run starts.

`RunSplitter` takes events one by one (`event`) and, from the replay fast path, decode lines in
bulk (`decode_bulk`); both paths give the same summary for the same lines.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field

from eagle3_tui.sglang.logline import (
    DecodeStats,
    Failure,
    LogEvent,
    ServerArgs,
    ServerReady,
    ServerWarning,
)
from eagle3_tui.telemetry.metrics import RateGuess, guess_rate_definition, tool_accept_rate

__all__ = ["Dist", "FailureInfo", "RunSplitter", "RunSummary", "ValueSketch"]

MAX_PAIRS = 256  # (accept len, accept rate) samples per run for the definition guess
MAX_WARNINGS = 50  # distinct warning texts kept per run
MAX_FAILURES = 20  # failures kept per run (the newest)
_TPS_KEY = "gen throughput (token/s)"
MAX_TEXTS = 100_000  # distinct printed values counted as text before they are folded into sketches


@dataclass(frozen=True, slots=True)
class Dist:
    """Count, mean and percentiles (nearest rank) of one metric over a run."""

    n: int
    mean: float
    p10: float
    p50: float
    p90: float
    lo: float
    hi: float


class ValueSketch:
    """A bounded multiset of values printed with 2 decimals, binned on a decimal grid.

    Values are kept as integer hundredths floored to bins of 10**level hundredths (level 0:
    exact, 1: 0.1, 2: 1, ...). Past `max_keys` distinct bins the grid coarsens by 10. Means and
    percentiles (nearest rank) are taken at bin midpoints (level 0: the values themselves), so
    the result depends only on the multiset of values added, never on their order or grouping.
    """

    __slots__ = ("_counts", "_level", "_max_keys", "n", "skipped")

    def __init__(self, level: int = 0, max_keys: int = 20_000) -> None:
        self._counts: dict[int, int] = {}
        self._level = level
        self._max_keys = max_keys
        self.n = 0
        self.skipped = 0

    @property
    def resolution(self) -> float:
        """The bin width in value units (0.01 while exact)."""
        return (10**self._level) / 100.0

    def add(self, value: float, k: int = 1) -> None:
        """Add `value` `k` times (non-finite or absurdly large values are counted as skipped)."""
        if not math.isfinite(value) or abs(value) > 1e13:
            self.skipped += k
            return
        key = round(value * 100) // (10**self._level)
        self.n += k
        self._counts[key] = self._counts.get(key, 0) + k
        if len(self._counts) > self._max_keys:
            self._compact()

    def add_texts(self, counts: Mapping[bytes, int] | Mapping[str, int]) -> None:
        """Add printed values with their counts (text that is no number is counted as skipped)."""
        for text, k in counts.items():
            try:
                value = float(text)
            except ValueError:
                self.skipped += k
                continue
            self.add(value, k)

    def _compact(self) -> None:
        while len(self._counts) > self._max_keys:
            self._level += 1
            merged: dict[int, int] = {}
            for key, k in self._counts.items():
                nk = key // 10
                merged[nk] = merged.get(nk, 0) + k
            self._counts = merged

    def dist(self) -> Dist | None:
        """The summary, or None when nothing was added."""
        if self.n == 0:
            return None
        unit = 10**self._level
        half = 0.5 if self._level else 0.0

        def value(key: float) -> float:
            return (key + half) * unit / 100  # divide last: 140 / 100 is exactly the float 1.4

        keys = sorted(self._counts)
        ranks = {p: max(1, math.ceil(p * self.n)) for p in (0.1, 0.5, 0.9)}
        found: dict[float, float] = {}
        cum = 0
        total = 0
        for key in keys:
            k = self._counts[key]
            total += key * k
            cum += k
            for p, r in ranks.items():
                if p not in found and cum >= r:
                    found[p] = value(key)
        return Dist(
            n=self.n,
            mean=value(total / self.n),
            p10=found[0.1],
            p50=found[0.5],
            p90=found[0.9],
            lo=value(keys[0]),
            hi=value(keys[-1]),
        )


@dataclass(frozen=True, slots=True)
class FailureInfo:
    kind: str
    timestamp: float | None
    message: str
    last_line: str


@dataclass(frozen=True, slots=True)
class RunSummary:
    """One server run as replay reports it. Times are the log's printed clock (see logline)."""

    index: int
    started_by: str  # "server-args", "ready" (a second readiness line), or "log-start"
    start: float | None
    end: float | None
    ready_at: float | None
    spec: dict[str, str | int | None] | None  # algorithm, num_steps, topk, num_draft_tokens
    decode_lines: int  # `Decode batch` lines (that report gen throughput, as every SGLang version does)
    accept_len: Dist | None
    gen_tps: Dist | None
    rate_guess: RateGuess | None
    num_steps: int | None  # for the tool's accept rate
    num_steps_source: str | None  # "server-args" or "inferred from accept rate"
    accept_rate_tool: float | None  # (mean accept len - 1) / num_steps
    warnings: list[tuple[str, int]]
    failures: list[FailureInfo]
    failures_total: int

    @property
    def span_s(self) -> float | None:
        if self.start is None or self.end is None:
            return None
        return self.end - self.start

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["span_s"] = self.span_s
        d["warnings"] = [{"message": m, "count": c} for m, c in self.warnings]
        return d


@dataclass
class _Run:
    index: int
    started_by: str
    start: float | None = None
    end: float | None = None
    ready_at: float | None = None
    args: ServerArgs | None = None
    decode_lines: int = 0
    accept_len: ValueSketch = field(default_factory=ValueSketch)
    gen_tps: ValueSketch = field(default_factory=lambda: ValueSketch(level=1))  # 0.1 tok/s bins
    pairs: list[tuple[float, float]] = field(default_factory=list)
    warnings: dict[str, int] = field(default_factory=dict)
    # warnings since the last other event (counts, and their first and last time): if a new
    # server starts next, they were its startup warnings
    tail_warnings: dict[str, int] = field(default_factory=dict)
    tail_times: list[float] = field(default_factory=list)
    end_before_tail: float | None = None
    failures: list[FailureInfo] = field(default_factory=list)
    failures_total: int = 0
    # printed values from the fast path, counted as text until folded into the sketches
    len_texts: Counter[bytes] = field(default_factory=Counter)
    tps_texts: Counter[bytes] = field(default_factory=Counter)

    def fold(self) -> None:
        self.accept_len.add_texts(self.len_texts)
        self.gen_tps.add_texts(self.tps_texts)
        self.len_texts.clear()
        self.tps_texts.clear()

    def has_content(self) -> bool:
        return bool(self.decode_lines or self.ready_at is not None or self.args or self.failures_total)

    def touch(self, t: float | None) -> None:
        if t is None:
            return
        if self.start is None:
            self.start = t
        self.end = t

    def settle(self) -> None:
        """A non-warning event: the warnings so far are no longer a trailing group."""
        self.tail_warnings.clear()
        self.tail_times.clear()
        self.end_before_tail = self.end

    def warn(self, ev: ServerWarning) -> None:
        """Count a warning, and remember it as trailing: a restart may show it belongs to the next run."""
        if ev.message in self.warnings or len(self.warnings) < MAX_WARNINGS:
            self.warnings[ev.message] = self.warnings.get(ev.message, 0) + 1
            self.tail_warnings[ev.message] = self.tail_warnings.get(ev.message, 0) + 1
            if ev.timestamp is not None:  # only the first and the last time matter
                if len(self.tail_times) < 2:
                    self.tail_times.append(ev.timestamp)
                else:
                    self.tail_times[1] = ev.timestamp
        self.touch(ev.timestamp)


class RunSplitter:
    """Feeds on log events (and bulk decode stats) and yields one `RunSummary` per server run."""

    def __init__(self) -> None:
        self._done: list[RunSummary] = []
        self._run = _Run(index=1, started_by="log-start")

    @property
    def pairs_wanted(self) -> int:
        """How many more (accept len, accept rate) samples the current run takes."""
        return MAX_PAIRS - len(self._run.pairs)

    def _new_run(self, started_by: str) -> None:
        old = self._run
        new = _Run(index=old.index + 1, started_by=started_by)
        # Warnings printed after the old run's last real event are the new server's startup warnings.
        for message, k in old.tail_warnings.items():
            left = old.warnings.get(message, 0) - k
            if left > 0:
                old.warnings[message] = left
            else:
                old.warnings.pop(message, None)
            new.warnings[message] = new.warnings.get(message, 0) + k
        for t in old.tail_times:
            new.touch(t)
        if old.tail_warnings:
            old.end = old.end_before_tail
        old.tail_warnings = {}
        old.tail_times = []
        self._done.append(_summarise(old))
        self._run = new

    def event(self, ev: LogEvent) -> None:
        """One event from `LogReader` (stat lines other than decode, access and other lines are ignored)."""
        run = self._run
        if isinstance(ev, DecodeStats):
            if ev.gen_throughput is None and _TPS_KEY not in ev.extra:
                return  # not a stat line SGLang writes (every version prints gen throughput)
            run.decode_lines += 1
            if ev.accept_len is not None:
                run.accept_len.add(ev.accept_len)
                if ev.accept_rate is not None and len(run.pairs) < MAX_PAIRS:
                    run.pairs.append((ev.accept_len, ev.accept_rate))
            if ev.gen_throughput is not None:
                run.gen_tps.add(ev.gen_throughput)
            run.touch(ev.timestamp)
            run.settle()
        elif isinstance(ev, ServerArgs):
            if run.has_content():
                self._new_run("server-args")
                run = self._run
            else:
                run.started_by = "server-args"
            run.args = ev
            run.touch(ev.timestamp)
            run.settle()
        elif isinstance(ev, ServerReady):
            if run.ready_at is not None:
                self._new_run("ready")
                run = self._run
            run.ready_at = ev.timestamp
            run.touch(ev.timestamp)
            run.settle()
        elif isinstance(ev, Failure):
            run.failures_total += 1
            run.failures.append(FailureInfo(ev.kind, ev.timestamp, ev.message, ev.last_line))
            if len(run.failures) > MAX_FAILURES:
                del run.failures[0]
            run.touch(ev.timestamp)
            run.settle()
        elif isinstance(ev, ServerWarning):
            run.warn(ev)

    def decode_bulk(
        self,
        lines: int,
        accept_lens: Iterable[bytes],
        gen_tps: Iterable[bytes],
        pairs: Iterable[tuple[bytes, bytes]],
        t_first: float | None,
        t_last: float | None,
    ) -> None:
        """Many decode lines at once, as printed texts (the replay fast path)."""
        if not lines:
            return
        run = self._run
        run.decode_lines += lines
        run.len_texts.update(accept_lens)
        run.tps_texts.update(gen_tps)
        if len(run.len_texts) + len(run.tps_texts) > MAX_TEXTS:
            run.fold()
        for a, r in pairs:
            if len(run.pairs) >= MAX_PAIRS:
                break
            try:
                run.pairs.append((float(a), float(r)))
            except ValueError:
                continue
        run.touch(t_first)
        run.touch(t_last)
        run.settle()

    def finish(self) -> list[RunSummary]:
        """All runs, the current one included; the splitter starts afresh afterwards."""
        run = self._run
        done = self._done
        if run.has_content() or run.warnings or not done:
            done.append(_summarise(run))
        self._done = []
        self._run = _Run(index=1, started_by="log-start")
        return done


def _summarise(run: _Run) -> RunSummary:
    run.fold()
    spec: dict[str, str | int | None] | None = None
    steps: int | None = None
    steps_source: str | None = None
    draft: int | None = None
    if run.args is not None:
        a = run.args
        spec = {
            "algorithm": a.get_str("speculative_algorithm"),
            "num_steps": a.get_int("speculative_num_steps"),
            "topk": a.get_int("speculative_eagle_topk"),
            "num_draft_tokens": a.get_int("speculative_num_draft_tokens"),
        }
        steps = a.get_int("speculative_num_steps")
        draft = a.get_int("speculative_num_draft_tokens")
        if steps:
            steps_source = "server-args"
    guess = guess_rate_definition(run.pairs, num_draft_tokens=draft) if run.pairs else None
    if steps is None and guess is not None and guess.num_draft_tokens and guess.num_draft_tokens > 1:
        # With topk 1 a chain drafts num_draft_tokens - 1 = num_steps tokens per verify step.
        topk = spec.get("topk") if spec else None
        if topk in (None, 1):
            steps = guess.num_draft_tokens - 1
            steps_source = "inferred from accept rate"
    al = run.accept_len.dist()
    return RunSummary(
        index=run.index,
        started_by=run.started_by,
        start=run.start,
        end=run.end,
        ready_at=run.ready_at,
        spec=spec,
        decode_lines=run.decode_lines,
        accept_len=al,
        gen_tps=run.gen_tps.dist(),
        rate_guess=guess,
        num_steps=steps,
        num_steps_source=steps_source,
        accept_rate_tool=tool_accept_rate(al.mean, steps) if al is not None else None,
        warnings=sorted(run.warnings.items(), key=lambda kv: -kv[1]),
        failures=list(run.failures),
        failures_total=run.failures_total,
    )
