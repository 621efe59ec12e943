"""The benchmark through the server's HTTP API, recorded in the ledger (a baseline sets the reference
tok/s), and the concurrency the server runs at now."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any

from eagle3_tui.errors import UserError
from eagle3_tui.session.events import BenchFinished, BenchProgress
from eagle3_tui.session.host.discovery import wanted_port
from eagle3_tui.session.host.facts import LIVE_WINDOW_S
from eagle3_tui.session.presets.catalog import NO_SPEC_PRESET
from eagle3_tui.session.store.records import bench_results

if TYPE_CHECKING:
    from eagle3_tui.eagle.published import Published
    from eagle3_tui.profile import Profile
    from eagle3_tui.session.attached.known import Known
    from eagle3_tui.session.attached.recorder import Recorder
    from eagle3_tui.session.connection import ClientFactory
    from eagle3_tui.session.control.server import ServerControl
    from eagle3_tui.session.views import Views
    from eagle3_tui.sglang.client import BenchResult
    from eagle3_tui.telemetry.metrics import Telemetry

BENCH_LOG_GRACE_S = 1.0


class Bench:
    """Benchmarks of the attached server (see the module docstring)."""

    def __init__(self, profile: Profile, views: Views, known: Known, telemetry: Telemetry, recorder: Recorder,
                 control: ServerControl, client: ClientFactory, *, readonly: bool) -> None:
        self._profile = profile
        self._views = views
        self._known = known
        self._telemetry = telemetry
        self._recorder = recorder
        self._control = control
        self._client = client
        self._readonly = readonly

    async def run(self, *, baseline: bool = False, raw: bool = False, **opts: Any) -> BenchResult:
        """Benchmark through the HTTP API; record it in the ledger (a baseline sets the reference tok/s).
        Prompts go as chat in the served model's template unless `raw` (the ledger row says which), through
        the serving engine's API (`senders.bench_sender`)."""
        from eagle3_tui.session.measure.chat import NO_TEMPLATE, chat_mode
        from eagle3_tui.session.measure.senders import bench_sender
        from eagle3_tui.sglang.client import run_benchmark

        server = self._views.server
        if server.state not in ("ready", "unknown"):
            raise UserError(f"the server is {server.state}; start it before benchmarking")
        if wanted_port(self._profile) is None:
            await self._control.check_target(None, "benchmark")  # several servers, none named: which one is unknown
        if baseline and self._views.server.speculative:
            raise UserError("a baseline run needs the server without speculation: apply the "
                            f"{NO_SPEC_PRESET!r} preset first (and roll back after)")
        c = await self._client()
        opts.setdefault("flush", not self._readonly)
        try:
            t_start = time.time()
            target = self._known.target
            chat = None if raw else chat_mode(target.chat_template, tokenizer_read=target.tokenizer_read)
            result = await run_benchmark(c, baseline=baseline, sender=bench_sender(self._known.engine, chat),
                                         on_progress=lambda d, t: self._views.emit(BenchProgress(d, t)), **opts)
            if chat is None and not raw:
                result.chat_template = NO_TEMPLATE
            published = self._published()
            if published is not None:
                result.published_accept_len, result.published_source = published.accept_len, published.source
            await asyncio.sleep(BENCH_LOG_GRACE_S)  # the follower delivers the window's last lines
            result.accept_len_log = self._log_accept_len(t_start, time.time())
        except UserError as err:
            self._views.emit(BenchFinished(None, str(err)))
            raise
        if baseline:
            self._telemetry.baseline_tps = result.output_tps
        self._known.last_bench = result
        self._recorder.record("baseline" if baseline else "benchmark", self.results(result))
        self._telemetry.mark(time.time(), "baseline" if baseline else "benchmark")
        self._views.emit(BenchFinished(result, None))
        return result

    async def served_concurrency(self) -> tuple[int, str]:
        """The requests the server runs at once now: its decode lines' #running-req (mean over the live window),
        else the engine's /metrics gauge of running requests; and what said it. UserError when neither shows any."""
        mean = self._telemetry.summary(LIVE_WINDOW_S).means.get("running_req")
        if mean is not None and mean >= 0.5:
            return max(1, round(mean)), f"the server log's #running-req, mean {mean:.1f} over {LIVE_WINDOW_S:.0f} s"
        gauge = self._known.engine.running_metric
        with contextlib.suppress(UserError):
            running = (await (await self._client()).metrics()).total(gauge)
            if running is not None and running >= 1:
                return round(running), f"/metrics {gauge} {running:.0f}"
        raise UserError("no running requests seen (no decode line with #running-req in the last "
                        f"{LIVE_WINDOW_S:.0f} s, none in /metrics): give the concurrency with -c N")

    def _published(self) -> Published | None:
        """The draft's published accept length (its config.json, else its README.md), when it says one."""
        import json

        from eagle3_tui.eagle.published import published_accept_length

        t = self._known.target
        try:
            cfg = json.loads(t.draft_text) if t.draft_text else None
        except ValueError:
            cfg = None
        return published_accept_length(cfg if isinstance(cfg, dict) else None, t.draft_card,
                                       config_name=t.draft_config_path or "config.json",
                                       card_name=t.draft_card_path or "README.md")

    def _log_accept_len(self, t0: float, t1: float) -> float | None:
        vals = [v for _, v in self._telemetry.series["accept_len"].window(t0, t1)]
        return sum(vals) / len(vals) if vals else None

    def results(self, r: BenchResult) -> dict[str, Any]:
        """A benchmark as its ledger row's results (with the speedup over the current baseline)."""
        return bench_results(r, self._telemetry.baseline_tps)
