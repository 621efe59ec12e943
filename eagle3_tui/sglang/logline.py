"""SGLang server log lines as typed events.

One parser for every log the tool reads (live tail, replay, tests). The scheduler's stat lines
changed shape many times (research/sglang.md §1): `Decode batch.` / `Decode batch,` /
`Decode batch [N],`, optional and reordered keys, a trailing `, ` or not, rank tags in the prefix,
and wrappers added by Ray, Kubernetes or a custom Python logging config. So stat lines are found by
their header anywhere in the line and then read as order-agnostic `key: value` pairs split on `, `;
known keys become typed fields and every other key is kept in `extra`.

`parse_line` is pure and never raises: garbage gives `Other`. `LogReader` adds the one piece of
state a single line cannot carry: the traceback printed after a failure line belongs to it.

Timestamps: SGLang prints local wall-clock time without a zone. We convert it as if it were UTC, so
`timestamp` is "seconds since the epoch of the printed clock": differences and ordering are right,
the absolute value is off by the host's UTC offset.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from eagle3_tui.formats.tracebacks import TracebackBuffer

__all__ = [
    "KEY_NEEDLES",
    "DecodeStats",
    "Failure",
    "HttpAccess",
    "LogEvent",
    "LogReader",
    "Other",
    "PrefillStats",
    "ServerArgs",
    "ServerReady",
    "ServerWarning",
    "epoch_of",
    "is_record_start",
    "parse_line",
    "parse_timestamp",
    "split_prefix",
]

# Lines longer than this are not log records we understand; they become `Other` unread, so a
# 1 MB line of garbage costs one length check.
MAX_LINE = 16_384


# The per-line events of a busy log (stat and access lines) are plain, not frozen, dataclasses: a
# frozen one's __init__ sets each field through object.__setattr__, several times slower
# (benchmarks/MEASURED.md), and a live log makes 20,000 of them a second. Treat them as read-only.


@dataclass(slots=True)
class DecodeStats:
    """One `Decode batch` line: stats averaged over the last `decode_log_interval` iterations."""

    timestamp: float | None
    ranks: dict[str, int]
    running_req: int | None
    queue_req: int | None
    token_usage: float | None
    accept_len: float | None
    accept_rate: float | None
    gen_throughput: float | None
    graph: bool | None
    extra: dict[str, str]
    line: str
    num_token: int | None = None  # `#token`
    iteration: int | None = None  # the `[N]` forward counter (0.5.4, or SGLANG_LOG_FORWARD_ITERS)
    graph_backend: str | None = None  # "cuda graph", "npu graph", "cpu graph", "musa graph"


@dataclass(slots=True)
class PrefillStats:
    """One `Prefill batch` line. Prefill lines never carry speculative fields."""

    timestamp: float | None
    ranks: dict[str, int]
    new_seq: int | None
    new_token: int | None
    cached_token: int | None
    token_usage: float | None
    running_req: int | None
    queue_req: int | None
    extra: dict[str, str]
    line: str
    iteration: int | None = None


@dataclass(frozen=True, slots=True)
class ServerReady:
    """"The server is fired up and ready to roll!": warmup passed, requests are served."""

    timestamp: float | None
    line: str


@dataclass(frozen=True, slots=True)
class ServerArgs:
    """The `server_args=ServerArgs(...)` line printed once when a server process starts.

    `args` holds the verbatim `name=value` texts of the speculative fields and a few others
    (strings: the repr SGLang printed, e.g. "3", "None", "'EAGLE3'").
    """

    timestamp: float | None
    args: dict[str, str]
    line: str

    def get_int(self, name: str) -> int | None:
        """An integer argument, or None when absent or `None`."""
        try:
            return int(self.args.get(name, ""))
        except ValueError:
            return None

    def get_str(self, name: str) -> str | None:
        """A string argument without its quotes, or None when absent or `None`."""
        value = self.args.get(name)
        if value is None or value == "None":
            return None
        return value.strip("'\"")


@dataclass(frozen=True, slots=True)
class Failure:
    """A crash or fatal error, with the traceback lines that followed it (when read by LogReader).

    `kind` is one of: scheduler-exception, watchdog-timeout, sigquit, context-length, init-failed,
    health-check, cuda-error, oom, segfault, traceback (a bare traceback with no failure line before it).
    """

    timestamp: float | None
    kind: str
    message: str
    traceback: tuple[str, ...]
    line: str

    @property
    def last_line(self) -> str:
        """The line that says what went wrong: the traceback's last exception line (`XError: ...`),
        else its last non-blank line, else the message."""
        for text in reversed(self.traceback):
            if _EXCEPTION_LINE.match(text):
                return text.strip()
        for text in reversed(self.traceback):
            if text.strip():
                return text.strip()
        return self.message


@dataclass(frozen=True, slots=True)
class ServerWarning:
    """A warning the server printed (SGLang's own warnings carry no level, so known texts count too)."""

    timestamp: float | None
    message: str
    line: str


@dataclass(slots=True)
class HttpAccess:
    """A uvicorn access line: `INFO:     127.0.0.1:40052 - "POST /generate HTTP/1.1" 200 OK`."""

    timestamp: float | None
    client: str
    method: str
    path: str
    status: int
    line: str


@dataclass(frozen=True, slots=True)
class Other:
    """Anything else (kept so a log view can show it)."""

    line: str


LogEvent = DecodeStats | PrefillStats | ServerReady | ServerArgs | Failure | ServerWarning | HttpAccess | Other

_EXCEPTION_LINE = re.compile(r"\s*[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Fault)\b.*")

# --- prefixes and timestamps -------------------------------------------------------------------

# SGLang's own prefix: `[%(asctime)s{.msecs}{ DP0}{ PP0}{ TP0}{ EP0}] `.
_SGLANG_PREFIX = re.compile(
    r"\[(\d{4}-\d\d-\d\d) (\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6}))?((?: [A-Z][A-Z_]*\d+)*)\] ?"
)
# Any other date-time (Python logging `2025-12-04 20:35:53[,659]`, ISO `2025-12-18T16:24:02+08:00`).
_ANY_DATETIME = re.compile(r"(\d{4}-\d\d-\d\d)[ T](\d\d):(\d\d):(\d\d)(?:[.,](\d{1,6}))?")
_RANK = re.compile(r"([A-Z][A-Z_]*?)(\d+)")
# Wrappers other loggers put in front of a line: Ray actors and `kubectl logs --prefix`-style pods.
_WRAPPER = re.compile(r"(?:\([^()]*pid=\d+[^()]*\) |\[\d{4}-\d\d-\d\dT[^\]]*\] \S+ >> )")
_PYLOG_HEAD = re.compile(
    r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?\s*(?:\[?(?:DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)\]?)?\s*"
    r"(?:\d+\s+)?(?:\[[^\]]*\]\s*)?(?:[\w.]+:\s+)?"
)
_UVICORN_LEVEL = re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+")

_day_cache: dict[str, int] = {}


def _days_from_civil(y: int, m: int, d: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm; no imports)."""
    y -= m <= 2
    era = (y if y >= 0 else y - 399) // 400
    yoe = y - era * 400
    doy = (153 * (m + (-3 if m > 2 else 9)) + 2) // 5 + d - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def epoch_of(day: str, hh: str, mm: str, ss: str, frac: str | None) -> float | None:
    """Seconds since the epoch of a printed date and time, read as UTC; None if it is no date."""
    base = _day_cache.get(day)
    if base is None:
        try:
            y, mo, d = int(day[0:4]), int(day[5:7]), int(day[8:10])
            if not (1 <= mo <= 12 and 1 <= d <= 31):
                return None
            base = _days_from_civil(y, mo, d) * 86400
        except ValueError:
            return None
        if len(_day_cache) > 4096:
            _day_cache.clear()
        _day_cache[day] = base
    h, m, s = int(hh), int(mm), int(ss)
    if h > 23 or m > 59 or s > 60:
        return None
    t = float(base + h * 3600 + m * 60 + s)
    if frac:
        t += int(frac) / (10 ** len(frac))
    return t


def parse_timestamp(text: str) -> float | None:
    """The first date-time in `text` (e.g. `2025-07-18T15:32:52.498932`) as epoch seconds, or None."""
    m = _ANY_DATETIME.search(text)
    if m is None:
        return None
    return epoch_of(m.group(1), m.group(2), m.group(3), m.group(4), m.group(5))


_rank_cache: dict[str, dict[str, int]] = {}


def _ranks(tags: str) -> dict[str, int]:
    if not tags:
        return {}
    known = _rank_cache.get(tags)
    if known is None:
        known = {m.group(1): int(m.group(2)) for m in _RANK.finditer(tags)}
        if len(_rank_cache) < 1024:
            _rank_cache[tags] = known
    return dict(known)


_second_cache: dict[str, float | None] = {}


def _prefix_time(m: re.Match[str]) -> float | None:
    """epoch_of for an _SGLANG_PREFIX match; the whole second is cached by its text (the lines of
    a busy log share it), the fraction added as epoch_of adds it."""
    key = m.string[m.start(1) : m.end(4)]
    if key in _second_cache:
        base = _second_cache[key]
    else:
        base = epoch_of(m.group(1), m.group(2), m.group(3), m.group(4), None)
        if len(_second_cache) > 4096:
            _second_cache.clear()
        _second_cache[key] = base
    frac = m.group(5)
    if base is None or not frac:
        return base
    return base + int(frac) / (10 ** len(frac))


def split_prefix(text: str, end: int | None = None) -> tuple[float | None, dict[str, int], int]:
    """Timestamp, rank tags and the offset where the message starts, for `text[:end]`.

    The last SGLang `[date time RANKS]` bracket before `end` wins (wrappers may add their own
    timestamps in front); without one, a Python-logging style date-time at the start is used.
    """
    if end is None:
        end = len(text)
    last = _SGLANG_PREFIX.match(text, 0, end)
    if last is None or text.find("[", last.end(), end) >= 0:  # not alone at the start: find the last
        last = None
        for m in _SGLANG_PREFIX.finditer(text, 0, end):
            last = m
    if last is not None:
        return _prefix_time(last), _ranks(last.group(6)), last.end()
    pos = _strip_wrappers(text)
    m2 = _ANY_DATETIME.match(text, pos)
    if m2 is not None and m2.start() < end:
        ts = epoch_of(m2.group(1), m2.group(2), m2.group(3), m2.group(4), m2.group(5))
        head = _PYLOG_HEAD.match(text, pos)
        start = head.end() if head is not None else m2.end()
        return ts, {}, min(start, end)
    return None, {}, pos


def _strip_wrappers(text: str) -> int:
    pos = 0
    while True:
        m = _WRAPPER.match(text, pos)
        if m is None:
            return pos
        pos = m.end()


# --- stat lines --------------------------------------------------------------------------------

_STATS_HEADER = re.compile(r"(Decode|Prefill) batch(?: \[(\d+)\])?[.,] ?")


def _num(kv: dict[str, str], key: str, conv: type[int] | type[float], bad: dict[str, str]) -> Any:
    """kv[key] converted, or None; a value that does not convert is noted in `bad`."""
    value = kv.get(key)
    if value is None:
        return None
    try:
        return conv(value)
    except ValueError:
        bad[key] = value
        return None


def _pairs(body: str) -> dict[str, str]:
    """`key: value, key: value, ` → dict; a piece without `: ` is split at its first `:`."""
    out: dict[str, str] = {}
    for piece in body.rstrip().rstrip(",").split(", "):
        key, sep, value = piece.partition(": ")
        if not sep:
            if not piece.strip():
                continue
            key, _, value = piece.partition(":")
        out[key.strip()] = value.strip()
    return out


_GRAPH_KEYS = ("cuda graph", "npu graph", "cpu graph", "musa graph")
_DECODE_TYPED = frozenset(
    (
        "#running-req",
        "#queue-req",
        "token usage",
        "accept len",
        "accept rate",
        "gen throughput (token/s)",
        "#token",
        *_GRAPH_KEYS,
    )
)
_PREFILL_TYPED = frozenset(
    ("#new-seq", "#new-token", "#cached-token", "token usage", "#running-req", "#queue-req")
)
# Hybrid models (SWA / Mamba / HiSparse) print no plain `token usage`; the full-attention pool's
# usage stands in for it (the raw keys stay in `extra`).
_USAGE_FALLBACKS = ("full token usage", "gpu token usage")


# The stat lines as SGLang prints them (0.4.6-0.5.x, every value a plain number): one match reads
# them, as _stats_by_pairs would, about twice as fast; any other shape is read by pairs.
_PLAIN_DECODE = re.compile(
    r"#running-req: (\d+), #token: (\d+), token usage: (\d+\.\d+), "
    r"(?:accept len: (\d+\.\d+), (?:accept rate: (\d+\.\d+), )?)?"
    r"(cuda|npu|cpu|musa) graph: (True|False), gen throughput \(token/s\): (\d+\.\d+), #queue-req: (\d+)(?:, ?)?\s*"
)
_PLAIN_PREFILL = re.compile(
    r"#new-seq: (\d+), #new-token: (\d+), #cached-token: (\d+), token usage: (\d+\.\d+), "
    r"#running-req: (\d+), #queue-req: (\d+)(?:, ?)?\s*"
)


def _stat_head(text: str, m: re.Match[str]) -> tuple[float | None, dict[str, int], int | None]:
    """A stat line's prefix clock, rank tags and `[N]` forward counter (m: _STATS_HEADER's match)."""
    ts, ranks, _ = split_prefix(text, m.start())
    it = m.group(2)
    return ts, ranks, int(it) if it else None


def _stats(text: str, m: re.Match[str]) -> DecodeStats | PrefillStats:
    plain = (_PLAIN_DECODE if m.group(1) == "Decode" else _PLAIN_PREFILL).fullmatch(text, m.end())
    if plain is None:
        return _stats_by_pairs(text, m)
    ts, ranks, iteration = _stat_head(text, m)
    g = plain.groups()
    if m.group(1) == "Prefill":
        return PrefillStats(
            timestamp=ts, ranks=ranks, new_seq=int(g[0]), new_token=int(g[1]), cached_token=int(g[2]),
            token_usage=float(g[3]), running_req=int(g[4]), queue_req=int(g[5]), extra={}, line=text,
            iteration=iteration,
        )
    return DecodeStats(
        timestamp=ts, ranks=ranks, running_req=int(g[0]), queue_req=int(g[8]), token_usage=float(g[2]),
        accept_len=float(g[3]) if g[3] is not None else None,
        accept_rate=float(g[4]) if g[4] is not None else None,
        gen_throughput=float(g[7]), graph=g[6] == "True", extra={}, line=text, num_token=int(g[1]),
        iteration=iteration, graph_backend=f"{g[5]} graph",
    )


def _stats_by_pairs(text: str, m: re.Match[str]) -> DecodeStats | PrefillStats:
    ts, ranks, iteration = _stat_head(text, m)
    kv = _pairs(text[m.end() :])
    if ts is None and "timestamp" in kv:
        ts = parse_timestamp(kv["timestamp"])
    bad: dict[str, str] = {}  # known keys whose value did not parse: kept in `extra`
    usage = _num(kv, "token usage", float, bad)
    if usage is None:
        for key in _USAGE_FALLBACKS:
            if key in kv:
                usage = _num(kv, key, float, {})
                if usage is not None:
                    break
    if m.group(1) == "Decode":
        extra = {k: v for k, v in kv.items() if k not in _DECODE_TYPED}
        backend = graph = None
        for key in _GRAPH_KEYS:
            if key in kv:
                backend = key
                value = kv[key]
                graph = True if value == "True" else False if value == "False" else None
                if graph is None:
                    bad[key] = value
                break
        ev: DecodeStats | PrefillStats = DecodeStats(
            timestamp=ts,
            ranks=ranks,
            running_req=_num(kv, "#running-req", int, bad),
            queue_req=_num(kv, "#queue-req", int, bad),
            token_usage=usage,
            accept_len=_num(kv, "accept len", float, bad),
            accept_rate=_num(kv, "accept rate", float, bad),
            gen_throughput=_num(kv, "gen throughput (token/s)", float, bad),
            graph=graph,
            extra=extra,
            line=text,
            num_token=_num(kv, "#token", int, bad),
            iteration=iteration,
            graph_backend=backend,
        )
    else:
        extra = {k: v for k, v in kv.items() if k not in _PREFILL_TYPED}
        ev = PrefillStats(
            timestamp=ts,
            ranks=ranks,
            new_seq=_num(kv, "#new-seq", int, bad),
            new_token=_num(kv, "#new-token", int, bad),
            cached_token=_num(kv, "#cached-token", int, bad),
            token_usage=usage,
            running_req=_num(kv, "#running-req", int, bad),
            queue_req=_num(kv, "#queue-req", int, bad),
            extra=extra,
            line=text,
            iteration=iteration,
        )
    if bad:
        extra.update(bad)
    return ev


# --- other events ------------------------------------------------------------------------------

_READY = "The server is fired up and ready to roll!"
# (needle, kind), first match wins: the specific SGLang failure lines before the generic ones.
_FAILURES: tuple[tuple[str, str], ...] = (
    ("Scheduler hit an exception", "scheduler-exception"),
    # 0.5.6 scheduler_runtime_checker_mixin.py: "Watchdog timeout (self.watchdog_timeout=300)";
    # 0.5.23 utils/watchdog.py: "Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)".
    # It SIGQUITs the parent 5 s later, so it comes before the sigquit line that follows it.
    ("atchdog timeout (self.watchdog_timeout=", "watchdog-timeout"),
    ("Received sigquit from a child process", "sigquit"),
    # 0.5.23 srt/utils (the parent's child watcher) when a child dies, e.g. a SIGKILLed scheduler:
    # "Subprocess scheduler_0 (pid=N) crashed with exit code -9. Triggering SIGQUIT for cleanup...", then
    # "SIGQUIT received. signum=None, frame=None. It usually means one child failed."
    (") crashed with exit code ", "sigquit"),
    ("It usually means one child failed.", "sigquit"),
    # model_config.py `_derive_context_length` raising (0.5.6, 0.5.23): the refusal, not a CUDA error
    ("To allow overriding this maximum, set the env var SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "context-length"),
    ("Initialization failed", "init-failed"),
    ("Health check failed", "health-check"),
    ("illegal memory access", "cuda-error"),
    ("CUDA error", "cuda-error"),
    ("out of memory", "oom"),
    ("OutOfMemoryError", "oom"),
    ("Segmentation fault", "segfault"),
    ("SIGSEGV", "segfault"),
    ("Fatal Python error", "segfault"),
    ("Traceback (most recent call last)", "traceback"),
)
# The same model_config.py text logged as a warning when SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is
# set, as it is on most EAGLE-3 starts (the draft takes the target's context length): it names
# "CUDA errors" but is no failure.
_CONTEXT_LEN_WARNING = "This may lead to incorrect model outputs or CUDA errors"
# SGLang's `logger.warning(...)` lines carry no level in its default format, so the speculative
# decoding warnings of research/sglang.md §1.9 are recognised by their text.
_WARNING_TEXTS: tuple[str, ...] = (
    "is adjusted to",
    "is reset to",
    "is disabled because",
    "Beta spec is enabled",
    "Speculative token map specified",
    "has been removed",
    "spec v2 is used",
    "deprecated",
)
_WARNING_LEVEL = re.compile(r"\bWARN(?:ING)?\b")
# Every line that parse_line turns into DecodeStats, ServerReady, ServerArgs, Failure or
# ServerWarning contains one of these byte strings: a scanner may skip lines that hold none of them
# (and are not stat lines) without changing what a replay reports.
KEY_NEEDLES: tuple[bytes, ...] = (
    b"Decode batch",
    b"accept len",
    b"gen throughput",
    _READY.encode(),
    b"server_args=",  # the ServerArgs(...) repr, and the dict SGLang >= 0.5.20 prints
    *(needle.encode() for needle, _ in _FAILURES),
    b"WARN",
    b"Warning:",
    *(text.encode() for text in _WARNING_TEXTS),
)
# `--log-requests` lines: `Receive: obj=GenerateReqInput(...)`, `Finish: obj=..., out=...`.
# uvicorn: `client - "METHOD path HTTP/1.1" status`; matched after the ` - "` is found.
_ACCESS_TAIL = re.compile(r"([A-Z]+) (\S+) HTTP/[\d.]+\" (\d{3})")
# `server_args=ServerArgs(a=1, ...)` until 0.5.19; from 0.5.20 `server_args={'a': 1, ...}`
# (sglang 0.5.20 srt/entrypoints/engine.py logs the dict). Either can run past MAX_LINE.
_SERVER_ARGS = re.compile(r"server_args=(?:ServerArgs\(|\{)")
_ARG = re.compile(r"(?<!\w)(\w+)=('[^']*'|\"[^\"]*\"|[^,()\[\]{}]*)")
_DICT_ARG = re.compile(r"'(\w+)': ('[^']*'|\"[^\"]*\"|[^,()\[\]{}]*)")
MAX_START_LINE = 1 << 20
"""A start line is read up to this length (1 MiB); other lines longer than MAX_LINE are kept as text."""


def _message(text: str, end: int | None = None) -> tuple[float | None, str]:
    ts, _, start = split_prefix(text, end)
    msg = text[start:]
    lvl = _UVICORN_LEVEL.match(msg)
    if lvl is not None:
        msg = msg[lvl.end() :]
    return ts, msg.strip()


def _server_args(text: str, m: re.Match[str]) -> ServerArgs:
    ts, _, _ = split_prefix(text, m.start())
    args: dict[str, str] = {}
    pattern = _DICT_ARG if text[m.end() - 1] == "{" else _ARG
    for a in pattern.finditer(text, m.end()):
        if a.group(1) not in args:
            args[a.group(1)] = a.group(2).strip()
    return ServerArgs(timestamp=ts, args=args, line=text)


def parse_line(text: str) -> LogEvent:
    """One log line (with or without its newline) → an event. Never raises."""
    try:
        return _parse(text)
    except Exception:  # a parser bug must not stop a tail; the line is still shown
        return Other(line=text if isinstance(text, str) else repr(text))


def _is_request_log(text: str, end: int) -> bool:
    """A `Receive: ` / `Finish: ` request-log message starting before `end`."""
    for marker in ("Receive: ", "Finish: "):
        i = text.find(marker, 0, end)
        if i == 0 or (i > 1 and text[i - 2 : i] == "] "):
            return True
    return False


def _access(text: str) -> HttpAccess | None:
    i = text.find(' - "')
    if i <= 0:
        return None
    a = _ACCESS_TAIL.match(text, i + 4)
    if a is None:
        return None
    c = max(text.rfind(" ", 0, i), text.rfind("\t", 0, i)) + 1
    if c >= i:
        return None
    ts, _, _ = split_prefix(text, c)
    return HttpAccess(
        timestamp=ts, client=text[c:i], method=a.group(1), path=a.group(2), status=int(a.group(3)), line=text
    )


def _parse(text: str) -> LogEvent:
    text = text.rstrip("\r\n")
    if len(text) > MAX_LINE:
        sa = _SERVER_ARGS.search(text, 0, 512) if len(text) <= MAX_START_LINE else None
        return _server_args(text, sa) if sa is not None else Other(line=text)
    m = _STATS_HEADER.search(text) if " batch" in text else None
    if ("Receive: " in text or "Finish: " in text) and _is_request_log(
        text, m.start() if m is not None else len(text)
    ):
        return Other(line=text)  # --log-requests payloads are user data, not server status
    if m is not None:
        return _stats(text, m)
    if " HTTP/" in text:
        acc = _access(text)
        if acc is not None:
            return acc
    if _READY in text:
        ts, _ = _message(text)
        return ServerReady(timestamp=ts, line=text)
    sa = _SERVER_ARGS.search(text) if "server_args=" in text else None
    if sa is not None:
        return _server_args(text, sa)
    for needle, kind in _FAILURES:
        if needle in text and (kind != "cuda-error" or _CONTEXT_LEN_WARNING not in text):
            ts, msg = _message(text)
            return Failure(timestamp=ts, kind=kind, message=msg, traceback=(), line=text)
    if (
        "Warning:" in text
        or ("WARN" in text and _WARNING_LEVEL.search(text))
        or any(w in text for w in _WARNING_TEXTS)
    ):
        ts, msg = _message(text)
        return ServerWarning(timestamp=ts, message=msg, line=text)
    return Other(line=text)


# --- the stateful reader -----------------------------------------------------------------------

_RECORD_START = re.compile(
    r"(?:\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d|\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):)"
)


def is_record_start(text: str) -> bool:
    """Does this line begin a new log record (as opposed to continuing a traceback)?"""
    return _RECORD_START.match(text, _strip_wrappers(text)) is not None


class LogReader:
    """Reads a log line by line and groups the traceback after a failure line into that `Failure`.

    A failure is held back until the next line that starts a new record (a timestamped line), so
    `feed` may return nothing for a failure line and the failure later. Call `flush()` at the end
    of input, or when a live stream goes quiet, to get a pending failure. Continuation lines (the
    traceback) are absorbed into the failure and not returned on their own.
    """

    def __init__(self) -> None:
        self._pending: Failure | None = None
        self._traceback = TracebackBuffer(MAX_LINE)

    @property
    def pending(self) -> Failure | None:
        """The failure whose traceback is still being read, if any."""
        return self._pending

    def feed(self, line: str) -> list[LogEvent]:
        """One line (with or without its newline) → the events it completes (possibly none)."""
        text = line.rstrip("\r\n")
        if self._pending is not None:
            if len(text) > MAX_LINE or not is_record_start(text):
                self._absorb(text)
                return []
            out = self.flush()
        else:
            out = []
        event = parse_line(text)
        if isinstance(event, Failure):
            self._pending = event
            return out
        out.append(event)
        return out

    def flush(self) -> list[LogEvent]:
        """The pending failure, with its traceback, if any."""
        if self._pending is None:
            return []
        lines = self._traceback.take()
        p = self._pending
        message = p.message
        if p.kind == "traceback":
            message = next((t.strip() for t in reversed(lines) if t.strip()), p.message)
        event = Failure(timestamp=p.timestamp, kind=p.kind, message=message, traceback=lines, line=p.line)
        self._pending = None
        return [event]

    def _absorb(self, text: str) -> None:
        self._traceback.add(text[_strip_wrappers(text) :])
