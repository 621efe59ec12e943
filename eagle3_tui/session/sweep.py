"""The flag sweep: each (steps, topk, draft tokens) served in turn through the one restart path (the
configuration served at the start is measured as it runs, before any restart), a short benchmark each,
a ledger row each with its prediction, and the starting launch command back at the end, also when a
configuration fails to start, when a step raises, or when the sweep is stopped or cancelled.

The first change goes through `session.presets.apply` (one write-ahead undo record holding the starting
argv); later steps relaunch without records; the end is `session.presets.rollback`, which restores that argv
exactly. A sweep cut off by a crash of this process leaves the record, so a later rollback still
restores the start.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from eagle3_tui.eagle.spec_config import SpecConfig
from eagle3_tui.errors import UserError
from eagle3_tui.profile import Preset
from eagle3_tui.session.actions import refuse_readonly
from eagle3_tui.session.events import RestartFailed
from eagle3_tui.session.presets.catalog import ApplyPlan
from eagle3_tui.session.terms import EngineTerms, terms_for
from eagle3_tui.sglang import launch

if TYPE_CHECKING:
    from eagle3_tui.eagle.accuracy import CheckReport
    from eagle3_tui.engines import Engine



def served_config(argv: Sequence[str] | None, target_arch: str | None = None) -> SpecConfig | None:
    """(steps, topk, draft tokens) SGLang runs for this launch command (its auto-choice and topk-1
    rule applied); None without speculation or a launch command."""
    if not argv:
        return None
    try:
        eff = launch.effective(launch.parse_launch(argv), target_arch=target_arch)
    except (UserError, ValueError):
        return None
    if not eff.speculative or eff.error or None in (eff.steps, eff.topk, eff.draft_tokens):
        return None
    return SpecConfig(int(eff.steps or 0), int(eff.topk or 0), int(eff.draft_tokens or 0))


def prediction_for(report: CheckReport | None, cfg: SpecConfig, boundaries: Sequence[int] | None = None) -> float | None:
    """The check's predicted accept length for `cfg` on the served wiring (`CheckReport.prediction`)."""
    found = report.prediction(cfg, boundaries) if report is not None else None
    return found.accept_len if found is not None else None


def order_configs(grid: Sequence[SpecConfig], predicted: Callable[[SpecConfig], float | None]) -> list[SpecConfig]:
    """Predicted best first; configurations without a prediction after, in the order given."""
    seen: list[SpecConfig] = []
    for c in grid:
        if tuple(c) not in seen:
            seen.append(SpecConfig(int(c[0]), int(c[1]), int(c[2])))
    known = sorted((c for c in seen if predicted(c) is not None), key=lambda c: -(predicted(c) or 0.0))
    return known + [c for c in seen if predicted(c) is None]


def servable(engine: Engine, grid: Sequence[SpecConfig]) -> list[SpecConfig]:
    """The configurations of `grid` the engine can serve: a chain-only engine (vLLM) drafts
    num_speculative_tokens in a chain, so only steps/1/steps+1 are its."""
    return [c for c in grid if engine.serves(c)]


def config_plan(terms: EngineTerms, name: str, cfg: SpecConfig, argv: Sequence[str],
                target_arch: str | None = None) -> ApplyPlan:
    """The launch command serving `cfg`, as an apply plan (the sweep's first step, the one undo record)."""
    preset = Preset(name, "flags", flags=terms.config_flags(cfg), description="flag sweep")
    return terms.plan_flags(preset, argv, target_arch)


async def _whole(restart: Any) -> None:
    """Run a restart to its end even when the sweep is cancelled meanwhile (a restart cut in the middle
    can leave a half-started server holding the port), then let the cancel through."""
    task = asyncio.ensure_future(restart)
    try:
        await asyncio.shield(task)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            await task
        raise


@dataclass(frozen=True)
class SweepStep:
    config: SpecConfig
    predicted: float | None
    accept_len: float | None = None
    tok_s: float | None = None
    error: str | None = None
    seconds: float = 0.0
    prompt_format: str | None = None
    """The benchmark's prompts: "chat" (the served template) or "raw"."""
    concurrency: int | None = None
    """Requests in flight during the benchmark (the cost model's batch)."""

    def to_dict(self) -> dict[str, Any]:
        s, k, d = self.config
        return {"steps": s, "topk": k, "draft_tokens": d, "predicted_accept_len": self.predicted,
                "accept_len": self.accept_len, "tok_s": self.tok_s, "error": self.error,
                "seconds": round(self.seconds, 2), "prompt_format": self.prompt_format,
                "concurrency": self.concurrency}


@dataclass
class SweepResult:
    start_argv: list[str]
    steps: list[SweepStep] = field(default_factory=list)
    restored: bool = False
    stopped: bool = False
    restore_error: str | None = None


Progress = Callable[[int, int, SweepStep | None, float | None], None]  # done, total, last step, eta s


class Sweep:
    """One sweep over `grid` on an attached session (construct, then `await run()`; `stop()` ends it
    after the current step)."""

    def __init__(self, session: Any, grid: Sequence[SpecConfig], *, bench: dict[str, Any] | None = None,
                 report: Any = None, limit: int | None = None, on_progress: Progress | None = None) -> None:
        self.session = session
        self.report = report if report is not None else getattr(session, "check", None)
        served = getattr(session.server, "boundaries", None)
        self.boundaries = list(served) if served else None
        self.configs = order_configs(servable(session.engine, grid),
                                     lambda c: prediction_for(self.report, c, self.boundaries))
        if limit is not None:
            self.configs = self.configs[: max(0, limit)]
        self.bench = dict(bench or {"num_prompts": 8, "concurrency": 4, "max_tokens": 64})
        self.on_progress = on_progress or (lambda *a: None)
        self._stop = False
        self._applied: str | None = None  # the preset name of the sweep's one undo record
        self._served: SpecConfig | None = None  # the configuration the start argv serves

    def stop(self) -> None:
        self._stop = True

    async def run(self) -> SweepResult:
        spec = self.session.spec
        if spec is None:
            raise UserError("no launch command known: attach to a running server or set launch_command in the profile")
        if getattr(self.session, "readonly", False):
            raise refuse_readonly("sweep", how="the session was started with --readonly")
        if self.session.restarting:
            raise UserError("a restart is already running; wait for it to finish")
        result = SweepResult(list(spec.argv))
        self._served = served_config(spec.argv, getattr(self.session.target, "arch", None))
        recorded = False  # the one undo record (holding the start argv) exists
        t0 = time.monotonic()
        try:
            for i, cfg in enumerate(self.configs):
                if self._stop:
                    result.stopped = True
                    break
                step, made = await self._one(cfg, result.start_argv, first=not recorded)
                recorded = recorded or made
                result.steps.append(step)
                self._record(step, i)
                done = i + 1
                eta = (time.monotonic() - t0) / done * (len(self.configs) - done)
                self.on_progress(done, len(self.configs), step, eta)
        finally:
            await asyncio.shield(self._restore(result, recorded))
        return result

    async def _one(self, cfg: SpecConfig, start: list[str], *, first: bool) -> tuple[SweepStep, bool]:
        """Serve `cfg` and benchmark it. Returns (the step, whether the sweep's undo record now exists)."""
        s, k, d = cfg
        predicted = prediction_for(self.report, cfg, self.boundaries)
        t0 = time.monotonic()
        name = f"sweep {s}/{k}/{d}"
        terms = terms_for(self.session.engine)
        try:
            if first and cfg == self._served:  # served now: measured as it runs, no restart
                bench = await self.session.bench.run(**self.bench)
                return SweepStep(cfg, predicted, bench.accept_len, bench.output_tps, seconds=time.monotonic() - t0,
                                 prompt_format=bench.prompt_format, concurrency=bench.concurrency), False
            if first:
                plan = config_plan(terms, name, cfg, start, getattr(self.session.target, "arch", None))
                if plan.problems:
                    return SweepStep(cfg, predicted, error=plan.problems[0]), False
                self._applied = name
                await _whole(self.session.presets.apply(plan))
            else:
                await _whole(self.session.control.relaunch(terms.sweep_argv(cfg, start), reason=name))
            bench = await self.session.bench.run(**self.bench)
        except (RestartFailed, UserError) as err:
            # apply writes its record before it restarts: a failed start still leaves it
            made = not first or self.session.presets.can_rollback() == name
            return SweepStep(cfg, predicted, error=str(err), seconds=time.monotonic() - t0), made
        return SweepStep(cfg, predicted, bench.accept_len, bench.output_tps,
                         seconds=time.monotonic() - t0, prompt_format=bench.prompt_format,
                         concurrency=bench.concurrency), True

    def _record(self, step: SweepStep, index: int) -> None:
        s, k, d = step.config
        note = f"sweep {index + 1}/{len(self.configs)}: steps {s}, topk {k}, draft {d}"
        if step.error:
            note += " (failed)"
        with contextlib.suppress(Exception):
            self.session.records.record("sweep", self.session.recorder.config_snapshot(), step.to_dict(), note)

    async def _restore(self, result: SweepResult, recorded: bool) -> None:
        """Back to the start argv: the rollback pops the sweep's record and relaunches it."""
        try:
            # a cancel inside apply leaves the record without `_one` returning
            if recorded or (self._applied is not None and self.session.presets.can_rollback() == self._applied):
                await self.session.presets.rollback()
            result.restored = list(self.session.spec.argv) == result.start_argv
            if not result.restored:
                await self.session.control.relaunch(result.start_argv, reason="sweep: restore")
                result.restored = list(self.session.spec.argv) == result.start_argv
        except (RestartFailed, UserError) as err:
            result.restore_error = str(err)
