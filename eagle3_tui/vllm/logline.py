"""vLLM server log lines as typed events.

vLLM 0.32 (`vllm/logger.py`) prints `(PROCESS pid=N) LEVEL MM-DD HH:MM:SS [file.py:line] message`, where
PROCESS is `APIServer`, `EngineCore` (`EngineCore_DP0` with data parallelism), `Worker` (`Worker_TP0`, ...)
or a multiprocessing name; uvicorn's own lines (`INFO:     Application startup complete.`, access lines)
and Python warnings carry no prefix, and argparse refusals are a bare `prog: error: ...` line.

The events the console needs, with the vLLM file that prints each:
- `SpecDecodingStats` (`v1/spec_decode/metrics.py`): mean acceptance length and per-position acceptance
  rates over the last `VLLM_LOG_STATS_INTERVAL` (10 s), printed only while the engine is busy.
- `EngineStats` (`v1/metrics/loggers.py`): `Engine 000: Avg prompt throughput: ...` on the same tick.
- `StartArgs` (`entrypoints/utils.py`): `non-default args: {...}`, a Python dict literal of the flags that
  differ from vLLM's defaults (read with `ast.literal_eval`; a value it cannot read leaves `args` None).
- `Architecture` (`config/model.py`): `Resolved architecture: X`, once for the target and once for the draft.
- `AuxLayers` (`v1/worker/gpu_model_runner.py`): `Using auxiliary layers from speculative config: (0, 2, 6)`,
  only when the draft config names ids (else the target's default is used silently).
- `ServerReady`: uvicorn's `Application startup complete.` (the HTTP server answers from here on).
- `Failure`: tracebacks, `EngineCore failed to start`, argparse errors, `ValueError: ...` lines.

`parse_line` is pure and never raises. The printed clock has no year: `timestamp` counts seconds as if the
year were `year` (1970 unless given), so differences and order are right except across a New Year.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from eagle3_tui.formats.tracebacks import TracebackBuffer

__all__ = [
    "Architecture",
    "AuxLayers",
    "EngineStats",
    "Failure",
    "HttpAccess",
    "LogEvent",
    "LogReader",
    "Other",
    "Prefix",
    "ServerReady",
    "ServerWarning",
    "SpecDecodingStats",
    "StartArgs",
    "parse_line",
    "split_prefix",
]

MAX_LINE = 16_384
MAX_START_LINE = 1 << 20


@dataclass(frozen=True, slots=True)
class Prefix:
    """What vLLM's prefix says: the process name and pid, the level, the clock and the source line."""

    process: str | None
    pid: int | None
    level: str | None
    timestamp: float | None
    source: str | None  # "metrics.py:120"


_NO_PREFIX = Prefix(None, None, None, None, None)


@dataclass(frozen=True, slots=True)
class SpecDecodingStats:
    """`SpecDecoding metrics: ...`: acceptance over the last stats interval (10 s by default).

    `per_position[i]` is the fraction of drafts whose token i was accepted (vLLM: accepted at i / drafts);
    `draft_acceptance_rate` is accepted / drafted as a fraction (vLLM prints it as a percentage).
    """

    prefix: Prefix
    mean_acceptance_length: float | None
    accepted_throughput: float | None
    drafted_throughput: float | None
    accepted: int | None
    drafted: int | None
    per_position: tuple[float, ...]
    draft_acceptance_rate: float | None
    line: str
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def timestamp(self) -> float | None:
        return self.prefix.timestamp


@dataclass(frozen=True, slots=True)
class EngineStats:
    """`Engine 000: Avg prompt throughput: ...`: throughput and load over the last stats interval."""

    prefix: Prefix
    engine: int
    prompt_throughput: float | None
    generation_throughput: float | None
    running: int | None
    waiting: int | None
    kv_cache_usage: float | None  # a fraction (vLLM prints a percentage)
    prefix_cache_hit_rate: float | None  # a fraction
    line: str
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def timestamp(self) -> float | None:
        return self.prefix.timestamp


@dataclass(frozen=True, slots=True)
class StartArgs:
    """`non-default args: {...}`: the flags the server was started with that differ from vLLM's defaults."""

    prefix: Prefix
    args: dict[str, Any] | None
    """The dict, or None when the literal could not be read (`error` says why)."""
    error: str | None
    line: str

    @property
    def timestamp(self) -> float | None:
        return self.prefix.timestamp

    @property
    def speculative_config(self) -> dict[str, Any] | None:
        spec = (self.args or {}).get("speculative_config")
        return spec if isinstance(spec, dict) else None


@dataclass(frozen=True, slots=True)
class Architecture:
    """`Resolved architecture: X` (the target's first, the draft's second)."""

    prefix: Prefix
    architecture: str
    line: str


@dataclass(frozen=True, slots=True)
class AuxLayers:
    """`Using auxiliary layers from speculative config: (0, 2, 6)`: the draft config's ids, as vLLM read them."""

    prefix: Prefix
    layer_ids: tuple[int, ...]
    line: str


@dataclass(frozen=True, slots=True)
class ServerReady:
    """The HTTP server is up (`Application startup complete.`)."""

    prefix: Prefix
    line: str


@dataclass(frozen=True, slots=True)
class Failure:
    """A fatal error, with the traceback lines that followed it (when read by `LogReader`).

    `kind`: usage (argparse refused the command line), worker-start (`WorkerProc failed to start`: the root
    cause of an engine that does not start), engine-start (`EngineCore failed to start`), engine-dead, oom,
    traceback (a bare traceback, e.g. a config vLLM refuses before any engine starts), error (an ERROR line).
    """

    prefix: Prefix
    kind: str
    message: str
    traceback: tuple[str, ...]
    line: str

    @property
    def last_line(self) -> str:
        """The traceback's last exception line (`XError: ...`), else the message."""
        for text in reversed(self.traceback):
            if _EXCEPTION_LINE.match(text):
                return text.strip()
        return self.message

    @property
    def sentence(self) -> str:
        """vLLM's own error in one line: the last exception, with a pydantic ValidationError's first reason
        (`Value error, Model architectures [...] are not supported for now.`) cut before its long tail."""
        lines = self.traceback
        for i in range(len(lines) - 1, -1, -1):
            if not _EXCEPTION_LINE.match(lines[i]):
                continue
            head = lines[i].strip()
            if "ValidationError" in head and i + 1 < len(lines):
                reason = lines[i + 1].strip()
                reason = reason.removeprefix("Value error, ")
                cut = reason.find(". ")
                reason = reason[: cut + 1] if cut >= 0 else reason
                return _clip(f"{head.rsplit('.', 1)[-1] if head.startswith('pydantic') else head}: {reason}")
            return _clip(head)
        return _clip(self.message)


def _clip(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True, slots=True)
class ServerWarning:
    prefix: Prefix
    message: str
    line: str


@dataclass(frozen=True, slots=True)
class HttpAccess:
    """A uvicorn access line: `INFO:     127.0.0.1:37562 - "POST /v1/completions HTTP/1.1" 200 OK`."""

    client: str
    method: str
    path: str
    status: int
    line: str


@dataclass(frozen=True, slots=True)
class Other:
    line: str


LogEvent = (
    SpecDecodingStats
    | EngineStats
    | StartArgs
    | Architecture
    | AuxLayers
    | ServerReady
    | Failure
    | ServerWarning
    | HttpAccess
    | Other
)

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_PREFIX = re.compile(
    r"(?:\((?P<proc>[\w.:-]+) pid=(?P<pid>\d+)\) )?"
    r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL) "
    r"(?P<mo>\d\d)-(?P<d>\d\d) (?P<h>\d\d):(?P<mi>\d\d):(?P<s>\d\d)(?:[.,](?P<frac>\d{1,6}))? "
    r"\[(?P<src>[^\]]*)\] ?"
)
_PROC_ONLY = re.compile(r"\((?P<proc>[\w.:-]+) pid=(?P<pid>\d+)\) ")
_UVICORN = re.compile(r"(?P<level>DEBUG|INFO|WARNING|ERROR|CRITICAL):\s+")
_EXCEPTION_LINE = re.compile(r"\s*[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Fault)\b.*")
_ACCESS = re.compile(r"(?P<client>\S+) - \"(?P<method>[A-Z]+) (?P<path>\S+) HTTP/[\d.]+\" (?P<status>\d{3})")
_USAGE = re.compile(r"[\w.-]+\.py: error: .+|usage: \S+ .*")
_CUMULATIVE_DAYS = (0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334)


def _clock(m: re.Match[str], year: int) -> float | None:
    mo, d, h, mi, s = (int(m.group(k)) for k in ("mo", "d", "h", "mi", "s"))
    if not (1 <= mo <= 12 and 1 <= d <= 31 and h <= 23 and mi <= 59 and s <= 60):
        return None
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    y = year - 1
    days_before_year = y * 365 + y // 4 - y // 100 + y // 400 - 719162  # days from 1970-01-01
    day = days_before_year + _CUMULATIVE_DAYS[mo - 1] + (1 if leap and mo > 2 else 0) + d - 1
    t = float(day * 86400 + h * 3600 + mi * 60 + s)
    frac = m.group("frac")
    if frac:
        t += int(frac) / 10 ** len(frac)
    return t


def split_prefix(text: str, year: int = 1970) -> tuple[Prefix, int]:
    """vLLM's prefix of `text` and the offset where the message starts (0 and an empty prefix if none)."""
    m = _PREFIX.match(text)
    if m is not None:
        pid = m.group("pid")
        prefix = Prefix(m.group("proc"), int(pid) if pid else None, m.group("level"), _clock(m, year), m.group("src"))
        return prefix, m.end()
    p = _PROC_ONLY.match(text)
    if p is not None:  # a child's stray print under its process tag
        return Prefix(p.group("proc"), int(p.group("pid")), None, None, None), p.end()
    u = _UVICORN.match(text)
    if u is not None:
        return Prefix(None, None, u.group("level"), None, "uvicorn"), u.end()
    return _NO_PREFIX, 0


def _pairs(body: str) -> dict[str, str]:
    """`Key: value, Key: value` -> dict (keys as printed)."""
    out: dict[str, str] = {}
    for piece in body.strip().rstrip(",").split(", "):
        key, sep, value = piece.partition(": ")
        if sep:
            out[key.strip()] = value.strip()
    return out


def _number(text: str | None, unit: str = "") -> float | None:
    if text is None:
        return None
    text = text.strip()
    if unit and text.endswith(unit):
        text = text[: -len(unit)].strip()
    try:
        return float(text)
    except ValueError:
        return None


def _count(text: str | None, unit: str) -> int | None:
    value = _number(text, unit)
    return int(value) if value is not None and value.is_integer() else None


def _percent(text: str | None) -> float | None:
    value = _number(text, "%")
    return value / 100.0 if value is not None else None


_SPEC_HEAD = "SpecDecoding metrics: "
_SPEC_KEYS = frozenset(
    {"Mean acceptance length", "Accepted throughput", "Drafted throughput", "Accepted", "Drafted",
     "Avg Draft acceptance rate"}
)
_PER_POSITION = re.compile(r"Per-position acceptance rate: ((?:-?[\d.]+|nan)(?:, (?:-?[\d.]+|nan))*)")


def _spec(prefix: Prefix, body: str, line: str) -> SpecDecodingStats:
    per_position: tuple[float, ...] = ()
    pp = _PER_POSITION.search(body)
    rest = body
    if pp is not None:  # its values are comma-separated too: cut them out before splitting the pairs
        values = [_number(v) for v in pp.group(1).split(", ")]
        per_position = tuple(v for v in values if v is not None)
        rest = body[: pp.start()] + body[pp.end() :]
    kv = _pairs(rest)
    return SpecDecodingStats(
        prefix=prefix,
        mean_acceptance_length=_number(kv.get("Mean acceptance length")),
        accepted_throughput=_number(kv.get("Accepted throughput"), "tokens/s"),
        drafted_throughput=_number(kv.get("Drafted throughput"), "tokens/s"),
        accepted=_count(kv.get("Accepted"), "tokens"),
        drafted=_count(kv.get("Drafted"), "tokens"),
        per_position=per_position,
        draft_acceptance_rate=_percent(kv.get("Avg Draft acceptance rate")),
        line=line,
        extra={k: v for k, v in kv.items() if k not in _SPEC_KEYS},
    )


_ENGINE_HEAD = re.compile(r"Engine (\d+): ")
_ENGINE_KEYS = frozenset(
    {"Avg prompt throughput", "Avg generation throughput", "Running", "Waiting", "Prefix cache hit rate"}
)


def _engine(prefix: Prefix, engine: int, body: str, line: str) -> EngineStats:
    kv = _pairs(body)
    usage_key = next((k for k in kv if k.endswith("KV cache usage")), None)  # "CPU KV cache usage", "GPU ..."
    return EngineStats(
        prefix=prefix,
        engine=engine,
        prompt_throughput=_number(kv.get("Avg prompt throughput"), "tokens/s"),
        generation_throughput=_number(kv.get("Avg generation throughput"), "tokens/s"),
        running=_count(kv.get("Running"), "reqs"),
        waiting=_count(kv.get("Waiting"), "reqs"),
        kv_cache_usage=_percent(kv.get(usage_key)) if usage_key else None,
        prefix_cache_hit_rate=_percent(kv.get("Prefix cache hit rate")),
        line=line,
        extra={k: v for k, v in kv.items() if k not in _ENGINE_KEYS and k != usage_key},
    )


_START_ARGS = "non-default args: "
_ENUM_REPR = re.compile(r"<([\w.]+): ('[^']*'|-?\d+)>")


def _start_args(prefix: Prefix, body: str, line: str) -> StartArgs:
    text = _ENUM_REPR.sub(r"\2", body.strip())  # `<CompilationMode.NONE: 0>` reprs are not literals
    try:
        value = ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as err:
        return StartArgs(prefix, None, f"the non-default args are not a Python literal ({type(err).__name__})", line)
    if not isinstance(value, dict):
        return StartArgs(prefix, None, f"the non-default args are a {type(value).__name__}, not a dict", line)
    return StartArgs(prefix, {str(k): v for k, v in value.items()}, None, line)


_AUX = "Using auxiliary layers from speculative config: "
_ARCH = "Resolved architecture: "
_READY = ("Application startup complete.",)
# (needle, kind): the first that matches wins.
_FAILURES: tuple[tuple[str, str], ...] = (
    ("WorkerProc failed to start", "worker-start"),
    ("EngineCore failed to start", "engine-start"),
    ("Engine core initialization failed", "engine-start"),
    ("EngineCore encountered a fatal error", "engine-dead"),
    ("EngineDeadError", "engine-dead"),
    ("out of memory", "oom"),
    ("OutOfMemoryError", "oom"),
    ("Traceback (most recent call last)", "traceback"),
)


def parse_line(text: str, year: int = 1970) -> LogEvent:
    """One log line (with or without its newline) -> an event. Never raises."""
    try:
        return _parse(text, year)
    except Exception:  # a parser bug must not stop a tail; the line is still shown
        return Other(line=text if isinstance(text, str) else repr(text))


def _parse(text: str, year: int) -> LogEvent:
    line = text.rstrip("\r\n")
    if "\x1b[" in line:
        line = _ANSI.sub("", line)
    if len(line) > MAX_LINE and not (len(line) <= MAX_START_LINE and _START_ARGS in line[:512]):
        return Other(line=line)
    prefix, start = split_prefix(line, year)
    body = line[start:]
    if body.startswith(_SPEC_HEAD):
        return _spec(prefix, body[len(_SPEC_HEAD) :], line)
    em = _ENGINE_HEAD.match(body)
    if em is not None and "throughput" in body:
        return _engine(prefix, int(em.group(1)), body[em.end() :], line)
    if body.startswith(_START_ARGS):
        return _start_args(prefix, body[len(_START_ARGS) :], line)
    if body.startswith(_ARCH):
        return Architecture(prefix, body[len(_ARCH) :].strip(), line)
    if body.startswith(_AUX):
        ids = _int_tuple(body[len(_AUX) :])
        if ids is not None:
            return AuxLayers(prefix, ids, line)
    if prefix.source == "uvicorn":
        if body.strip() in _READY:
            return ServerReady(prefix, line)
        acc = _ACCESS.match(body)
        if acc is not None:
            return HttpAccess(acc.group("client"), acc.group("method"), acc.group("path"), int(acc.group("status")), line)
    return _failure_or_warning(prefix, body, line)


def _failure_or_warning(prefix: Prefix, body: str, line: str) -> LogEvent:
    message = body.strip()
    if prefix.level is None and _USAGE.fullmatch(message) and ": error: " in message:
        return Failure(prefix, "usage", message.split(": error: ", 1)[1], (), line)
    for needle, kind in _FAILURES:
        if needle in message:
            return Failure(prefix, kind, message, (), line)
    if prefix.level in ("ERROR", "CRITICAL"):
        return Failure(prefix, "error", message, (), line)
    if prefix.level == "WARNING":
        return ServerWarning(prefix, message, line)
    return Other(line=line)


def _int_tuple(text: str) -> tuple[int, ...] | None:
    try:
        value = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None
    if isinstance(value, (list, tuple)) and all(isinstance(x, int) and not isinstance(x, bool) for x in value):
        return tuple(value)
    return None


def _is_record_start(line: str) -> bool:
    """A line that begins a new record (vs a traceback's continuation)."""
    return _PREFIX.match(line) is not None or _UVICORN.match(line) is not None


class LogReader:
    """Reads a log line by line and groups the traceback that follows a failure line into that `Failure`.

    vLLM prints an engine's traceback as prefixed `ERROR` lines (`(EngineCore pid=N) ERROR ... Traceback ...`)
    or, from a dying child, as bare lines; both are absorbed until a line of another kind arrives. A failure is
    held back until then: call `flush()` at the end of input or when a live stream goes quiet.
    """

    def __init__(self, year: int = 1970) -> None:
        self._year = year
        self._pending: Failure | None = None
        self._traceback = TracebackBuffer(MAX_LINE)

    @property
    def pending(self) -> Failure | None:
        return self._pending

    def feed(self, line: str) -> list[LogEvent]:
        text = line.rstrip("\r\n")
        event = parse_line(text, self._year)
        if self._pending is not None:
            # a continuation: a bare line, or the same process's next ERROR line (its traceback, prefixed)
            continues = not _is_record_start(text) or (
                isinstance(event, Failure)
                and event.kind in ("error", "traceback")
                and event.prefix.pid == self._pending.prefix.pid
            )
            if continues:
                _, start = split_prefix(text, self._year)
                self._traceback.add(text[start:])
                return []
            out = self.flush()
        else:
            out = []
        if isinstance(event, Failure):
            self._pending = event
            return out
        out.append(event)
        return out

    def flush(self) -> list[LogEvent]:
        if self._pending is None:
            return []
        lines = self._traceback.take()
        p = self._pending
        message = p.message
        if p.kind in ("traceback", "error", "engine-start"):
            last = next((t.strip() for t in reversed(lines) if _EXCEPTION_LINE.match(t)), None)
            if last is not None and p.kind == "traceback":
                message = last
        event = Failure(p.prefix, p.kind, message, lines, p.line)
        self._pending = None
        return [event]
