"""The fleet file: which servers the fleet view reads, as TOML.

```toml
interval_s = 5          # optional: seconds between refreshes
window_s = 60           # optional: the span "over the window" covers
timeout_s = 2           # optional: a server that has not answered by then is marked, not waited for

[[server]]
name = "replica-a"                    # optional; default: the host or the URL's host:port
base_url = "http://10.0.0.5:30000"    # read /metrics directly ...
engine = "sglang"                     # "sglang" or "vllm"
draft = "k2-eagle3-v2"                # optional labels: siblings on the same draft are compared
model = "kimi-k2"

[[server]]
host = "gpu-b"                        # ... or over SSH (an ~/.ssh/config alias), through a port forward
port = 8000                           # the server's port on that host (default: the engine's)
engine = "vllm"                       # or "auto": told by the first /metrics answer
```

Parsing is pure; `load_fleet` reads the file. Every bad input is one `UserError` line naming the file
and the entry.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from eagle3_tui.errors import UserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised only on 3.10
    import tomli as tomllib

ENGINES = ("sglang", "vllm", "auto")
"""`auto`: the engine is told by the first /metrics answer's names (`sglang:*` or `vllm:*`)."""
DEFAULT_PORTS = {"sglang": 30000, "vllm": 8000}
ENTRY_KEYS = frozenset({"name", "base_url", "host", "port", "engine", "draft", "model"})
TOP_KEYS = frozenset({"server", "interval_s", "window_s", "timeout_s"})


@dataclass(frozen=True)
class FleetEntry:
    """One server: reached by `base_url` directly, or on `host` over SSH at `port`."""

    name: str
    engine: str
    base_url: str | None = None
    host: str | None = None
    port: int | None = None
    draft: str | None = None
    model: str | None = None

    @property
    def where(self) -> str:
        """How the operator named its address (a column, and the drill-in's target)."""
        return self.base_url or f"{self.host}:{self.port}"


@dataclass(frozen=True)
class FleetSpec:
    servers: tuple[FleetEntry, ...]
    interval_s: float = 5.0
    window_s: float = 60.0
    timeout_s: float = 2.0


def _bad(source: str, where: str, msg: str) -> UserError:
    return UserError(f"{source}: {where}: {msg}")


def _text(raw: Mapping[str, Any], key: str, source: str, where: str) -> str | None:
    v = raw.get(key)
    if v is None:
        return None
    if not isinstance(v, str) or not v.strip():
        raise _bad(source, where, f"{key} must be a non-empty string")
    return v.strip()


def _url(raw: str, source: str, where: str) -> str:
    parts = urlsplit(raw)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _bad(source, where, f"base_url {raw!r} is not an http(s) URL with a host")
    try:
        parts.port  # noqa: B018 - raises on a port out of range
    except ValueError:
        raise _bad(source, where, f"base_url {raw!r} has a bad port") from None
    return raw.rstrip("/")


def parse_entry(raw: Any, index: int, source: str = "fleet") -> FleetEntry:
    """One `[[server]]` table (index from 1, for the message)."""
    where = f"server {index}"
    if not isinstance(raw, Mapping):
        raise _bad(source, where, "must be a table")
    name = _text(raw, "name", source, where)
    if name:
        where = f"server {index} ({name})"
    unknown = sorted(set(raw) - ENTRY_KEYS)
    if unknown:
        raise _bad(source, where, f"unknown key {unknown[0]!r} (known: {', '.join(sorted(ENTRY_KEYS))})")
    engine = _text(raw, "engine", source, where)
    if engine is None:
        raise _bad(source, where, f"engine is missing (one of {', '.join(ENGINES)})")
    if engine.lower() not in ENGINES:
        raise _bad(source, where, f"unknown engine {engine!r} (one of {', '.join(ENGINES)})")
    engine = engine.lower()
    base_url, host = _text(raw, "base_url", source, where), _text(raw, "host", source, where)
    if (base_url is None) == (host is None):
        raise _bad(source, where, "give exactly one of base_url (read directly) or host (over SSH)")
    port = raw.get("port")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536):
        raise _bad(source, where, "port must be an integer 1..65535")
    if base_url is not None:
        if port is not None:
            raise _bad(source, where, "port goes with host; a base_url carries its own")
        base_url = _url(base_url, source, where)
        parts = urlsplit(base_url)
        default_name = f"{parts.hostname}:{parts.port}" if parts.port else str(parts.hostname)
    else:
        if port is None and engine == "auto":
            raise _bad(source, where, "give the port with engine auto (30000 for SGLang, 8000 for vLLM)")
        port = port or DEFAULT_PORTS[engine]
        default_name = f"{host}:{port}"
    return FleetEntry(
        name=name or default_name, engine=engine, base_url=base_url, host=host, port=port,
        draft=_text(raw, "draft", source, where), model=_text(raw, "model", source, where),
    )


def _seconds(doc: Mapping[str, Any], key: str, default: float, source: str) -> float:
    v = doc.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
        raise UserError(f"{source}: {key} must be a positive number of seconds")
    return float(v)


def parse_fleet(doc: Mapping[str, Any], source: str = "fleet") -> FleetSpec:
    """A parsed TOML document as a FleetSpec; names must be unique (they key the rows)."""
    unknown = sorted(set(doc) - TOP_KEYS)
    if unknown:
        raise UserError(f"{source}: unknown key {unknown[0]!r} (known: {', '.join(sorted(TOP_KEYS))})")
    raw = doc.get("server")
    if not isinstance(raw, list) or not raw:
        raise UserError(f"{source}: no servers (add [[server]] tables with base_url or host, and engine)")
    entries = [parse_entry(r, i, source) for i, r in enumerate(raw, 1)]
    seen: set[str] = set()
    for i, e in enumerate(entries, 1):
        if e.name in seen:
            raise _bad(source, f"server {i} ({e.name})", "the name is used twice (names key the rows)")
        seen.add(e.name)
    return FleetSpec(
        tuple(entries),
        interval_s=_seconds(doc, "interval_s", 5.0, source),
        window_s=_seconds(doc, "window_s", 60.0, source),
        timeout_s=_seconds(doc, "timeout_s", 2.0, source),
    )


def load_fleet(path: str | Path) -> FleetSpec:
    """Read and parse a fleet file (one line for a missing file or bad TOML)."""
    p = Path(path).expanduser()
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{p}: no such fleet file") from None
    except (OSError, UnicodeDecodeError) as err:
        raise UserError(f"{p}: cannot read the fleet file ({err})") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise UserError(f"{p}: not valid TOML ({err})") from None
    return parse_fleet(doc, str(p))


def entries_from_hosts(hosts: Sequence[str], engine: str) -> FleetSpec:
    """`--host` given several times: each an ssh alias or address (`host[:port]`), or a base URL."""
    if engine not in ENGINES:
        raise UserError(f"--fleet-engine: unknown engine {engine!r} (one of {', '.join(ENGINES)})")
    raw: list[dict[str, Any]] = []
    for h in hosts:
        if "://" in h:
            raw.append({"base_url": h, "engine": engine})
        elif h.count(":") == 1 and h.rsplit(":", 1)[1].isdigit():
            name, port = h.rsplit(":", 1)
            raw.append({"host": name, "port": int(port), "engine": engine})
        else:
            raw.append({"host": h, "engine": engine})
    return parse_fleet({"server": raw}, "--host")


def spec_from_cli(file: str | None, hosts: Sequence[str], engine: str, prometheus: str | None) -> FleetSpec | None:
    """What `--fleet FILE`, several `--host` and `--prometheus URL` ask for (the console's and the
    command's one reading); None only with `--prometheus` alone (its instances are the rows)."""
    if file is not None and len(hosts) > 1:
        raise UserError("give the servers either in a fleet file or as several --host, not both")
    if file is not None:
        return load_fleet(file)
    if hosts:
        return entries_from_hosts(hosts, engine)
    if prometheus is None:
        raise UserError("no servers: give a fleet file, several --host, or --prometheus URL")
    return None
