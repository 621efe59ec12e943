"""The fleet refreshed: every server read concurrently, each with its own deadline.

`DirectFleet` reads each server's own `/metrics` (and, now and then, SGLang's `/server_info` or vLLM's
`/version` for the release and flags); `PrometheusFleet` reads them all from a Prometheus server. Both
hand back the same rows, diagnosed and with outliers marked. A server that does not answer, answers an
error or answers garbage marks its own row with a one-line reason and keeps its last values; the others
refresh as usual. The HTTP client and the SSH tunnels are given to the constructors (the composition
root owns them); the only state is each server's recent reads.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol
from urllib.parse import urlsplit

from eagle3_tui.errors import UserError
from eagle3_tui.fleet.diagnosis import finding_label, worst_finding
from eagle3_tui.fleet.promapi import InstanceRead, PrometheusReader
from eagle3_tui.fleet.readings import read_metrics
from eagle3_tui.fleet.rows import FleetRow, Point, failed, mark_outliers, with_reading
from eagle3_tui.fleet.spec import FleetEntry, FleetSpec
from eagle3_tui.formats.promtext import MetricsUnreadable

INFO_EVERY_S = 30.0
"""How often the release and flags are read again (and at once after a restart)."""
TUNNEL_S = 15.0
"""What opening an SSH port forward may add to a server's first deadline."""
MAX_POINTS = 512


class Http(Protocol):
    """What the fleet needs of an HTTP client (httpx.AsyncClient has it)."""

    async def get(self, url: str, *, timeout: float) -> Any: ...


class Tunnels(Protocol):
    """The base URL of a server given by `host` (an SSH port forward to its port)."""

    async def base_url(self, entry: FleetEntry) -> str: ...

    async def aclose(self) -> None: ...


class NoTunnels:
    """Base URLs only: a `host` entry is refused with a sentence (headless uses without SSH)."""

    async def base_url(self, entry: FleetEntry) -> str:
        if entry.base_url is None:
            raise UserError(f"{entry.name} is on host {entry.host} over SSH, which this fleet cannot reach")
        return entry.base_url

    async def aclose(self) -> None:
        return None


def one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


@dataclass
class _Server:
    entry: FleetEntry
    row: FleetRow
    points: deque[Point] = field(default_factory=lambda: deque(maxlen=MAX_POINTS))
    info: dict[str, Any] | None = None
    info_t: float = float("-inf")


def _base(path: str | None) -> str | None:
    return os.path.basename(path.rstrip("/")) or path if path else None


def row_from_sglang_info(row: FleetRow, entry: FleetEntry, info: Mapping[str, Any]) -> FleetRow:
    """Release, draft and flags from SGLang's `/server_info` (the effective values the server runs with)."""

    def num(key: str) -> int | None:
        v = info.get(key)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    version, draft = info.get("version"), info.get("speculative_draft_model_path")
    model = info.get("served_model_name") or _base(info.get("model_path") if isinstance(info.get("model_path"), str) else None)
    return replace(
        row, release=version if isinstance(version, str) else row.release,
        draft=entry.draft or (_base(draft) if isinstance(draft, str) else None) or row.draft,
        model=entry.model or (model if isinstance(model, str) else None) or row.model,
        steps=num("speculative_num_steps"), topk=num("speculative_eagle_topk"),
        draft_tokens=num("speculative_num_draft_tokens"),
    )


def vllm_flags(row: FleetRow) -> FleetRow:
    """vLLM drafts chains: k speculative tokens (its per-position counters) are steps k, topk 1, k + 1 tokens."""
    return row if row.steps is None else replace(row, topk=1, draft_tokens=row.steps + 1)


def finish(rows: list[FleetRow], infos: Mapping[str, Mapping[str, Any] | None]) -> list[FleetRow]:
    """Each row's worst finding, then the outliers among siblings."""
    done = []
    for r in rows:
        if r.status == "ok":
            r = replace(r, finding=finding_label(worst_finding(r, infos.get(r.name))))
        done.append(r)
    return mark_outliers(done)


class DirectFleet:
    """Each server's own `/metrics`, read directly (a base URL) or through an SSH port forward (a host)."""

    def __init__(self, spec: FleetSpec, http: Http, *, tunnels: Tunnels | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self.spec = spec
        self._http = http
        self._tunnels = tunnels or NoTunnels()
        self._clock = clock
        self._servers = [_Server(e, FleetRow(e.name, e.engine, e.where, draft=e.draft, model=e.model))
                         for e in spec.servers]
        self.rows: list[FleetRow] = [s.row for s in self._servers]
        self.problem: str | None = None
        """A fleet-wide problem (the Prometheus path's); None here."""

    def entry_for(self, name: str) -> FleetEntry | None:
        return next((s.entry for s in self._servers if s.entry.name == name), None)

    async def refresh(self) -> list[FleetRow]:
        """Read every server at once; each failure stays on its row."""
        await asyncio.gather(*(self._poll(s) for s in self._servers))
        self.rows = finish([s.row for s in self._servers], {s.entry.name: s.info for s in self._servers})
        for s, r in zip(self._servers, self.rows, strict=True):
            s.row = r
        return self.rows

    async def _poll(self, s: _Server) -> None:
        limit = self.spec.timeout_s + (TUNNEL_S if s.entry.host is not None and s.info is None else 0.0)
        try:
            await asyncio.wait_for(self._read(s), limit)
        except asyncio.TimeoutError:
            s.row = failed(s.row, "down", f"no answer in {limit:g} s")
        except MetricsUnreadable as err:
            s.row = failed(s.row, "garbage", str(err))
        except UserError as err:
            s.row = failed(s.row, "down", str(err))
        except Exception as err:  # httpx's transport errors, OSError: this server only
            s.row = failed(s.row, "down", f"not reachable ({one_line(err)})")

    async def _read(self, s: _Server) -> None:
        base = await self._tunnels.base_url(s.entry)
        resp = await self._http.get(f"{base}/metrics", timeout=self.spec.timeout_s)
        if resp.status_code != 200:
            metrics_off = resp.status_code == 404 and s.entry.engine != "vllm"
            hint = " (SGLang serves it with --enable-metrics)" if metrics_off else ""
            raise UserError(f"/metrics answered HTTP {resp.status_code}{hint}")
        reading = read_metrics(s.entry.engine, resp.text)
        if s.entry.engine != reading.engine:  # "auto", now told
            s.entry = replace(s.entry, engine=reading.engine)
            s.row = replace(s.row, engine=reading.engine)
        t = self._clock()
        s.points.append((t, reading))
        while s.points and s.points[0][0] < t - self.spec.window_s:
            s.points.popleft()
        before = s.row.last_restart
        row = with_reading(s.row, list(s.points), self.spec.window_s)
        if s.info is None or t - s.info_t >= INFO_EVERY_S or row.last_restart != before:
            await self._read_info(s, base, t)
        if s.info is not None and s.entry.engine == "sglang":
            row = row_from_sglang_info(row, s.entry, s.info)
        elif s.entry.engine == "vllm":
            version = (s.info or {}).get("version")
            row = vllm_flags(replace(row, release=version if isinstance(version, str) else row.release))
        s.row = row

    async def _read_info(self, s: _Server, base: str, t: float) -> None:
        """The release and flags; a failure here leaves the last ones (the metrics were read)."""
        paths = ("/server_info", "/get_server_info") if s.entry.engine == "sglang" else ("/version",)
        s.info_t = t
        for path in paths:
            with contextlib.suppress(Exception):
                resp = await self._http.get(f"{base}{path}", timeout=self.spec.timeout_s)
                body = resp.json() if resp.status_code == 200 else None
                if isinstance(body, dict):
                    decode = body.get("decode")  # a PD router wraps it: {"decode": [{...}]}
                    s.info = decode[0] if isinstance(decode, list) and decode and isinstance(decode[0], dict) else body
                    return

    async def aclose(self) -> None:
        await self._tunnels.aclose()


def entry_for_instance(instance: str, engine: str, spec: FleetSpec | None) -> FleetEntry:
    """The fleet file's entry whose base URL is this instance (its name and labels), else one made up."""
    for e in spec.servers if spec is not None else ():
        if e.base_url is not None and urlsplit(e.base_url).netloc == instance:
            return e
        if e.host is not None and f"{e.host}:{e.port}" == instance:
            return e
    return FleetEntry(instance, engine, base_url=f"http://{instance}")


class PrometheusFleet:
    """The fleet as a Prometheus server scrapes it: one row per `instance` label."""

    def __init__(self, reader: PrometheusReader, *, labels: FleetSpec | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self._reader = reader
        self._labels = labels
        self._clock = clock
        self._entries: dict[str, FleetEntry] = {}
        self.rows: list[FleetRow] = []
        self.problem: str | None = None

    def entry_for(self, name: str) -> FleetEntry | None:
        return self._entries.get(name)

    def _row(self, got: InstanceRead) -> FleetRow:
        e = entry_for_instance(got.instance, got.engine, self._labels)
        self._entries[e.name] = e
        old = next((r for r in self.rows if r.name == e.name), None)
        row = old or FleetRow(e.name, got.engine, got.instance, draft=e.draft, model=e.model)
        if got.points:
            row = with_reading(row, list(got.points), self._reader.window_s, self._reader.rate_s)
            row = vllm_flags(row) if got.engine == "vllm" else row
        if got.up is False:
            return failed(row, "down", "Prometheus could not scrape it (up == 0)")
        return row if got.points else failed(row, "waiting", "no samples in the window yet")

    async def refresh(self) -> list[FleetRow]:
        """One read of the whole fleet; a Prometheus failure is `problem`, the rows keep their values."""
        try:
            got = await self._reader.read(self._clock())
        except UserError as err:
            self.problem = str(err)
            self.rows = [failed(r, "down", "Prometheus did not answer") for r in self.rows]
            return self.rows
        self.problem = None
        self.rows = finish([self._row(g) for g in got], {})
        return self.rows

    async def aclose(self) -> None:
        return None


Fleet = DirectFleet | PrometheusFleet
