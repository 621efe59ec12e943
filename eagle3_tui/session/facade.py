"""One attached host: the only thing the UI (and the headless commands) talk to.

A `Session` is the composition root: it builds its parts and wires them, each given what it needs in
its constructor (no part calls back into the session or reaches into another's private members):

- `views.Views`: the `conn` and `server` snapshots (replaced through `ServerView`'s typed updates) and
  the listeners; `tasks.TaskSet`: every background task; `claim.RestartClaim`: the one restart;
- `live/`: `LogFeed` (follow -> LogReader off the event loop -> run state and telemetry -> `LogBatch`),
  `RunTracker` (which run the log belongs to), `ServerMonitor` (/server_info polled, a loading server
  seen ready, a dead one seen failed);
- `deploy.part.DeploymentPart`: where the server runs and what that decides (log decoder, who restarts
  it, the journal, what is refused); `restart.restarter.Restarter`: the one restart path;
- `store/`: `LocalStore` (last launch, undo records), `Changes` (presets written and undone), `Records`
  (the ledger); `host/`: what the host says about the draft, target and data, and the doctor's facts.

Every entry point that changes what runs begins with `_changing`: read-only refused (`ReadOnlyError`),
the deployment asked, the restart claimed (`UserError` for a second one while one runs).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle3_tui.doctor.advice import batch_of, measured_configs
from eagle3_tui.engines import Engine, Failed, get_engine
from eagle3_tui.errors import EXIT_CONNECTION_LOST, UserError
from eagle3_tui.profile import Preset, Profile
from eagle3_tui.remote.errors import ConnectionLost
from eagle3_tui.remote.procgroup import pid_alive
from eagle3_tui.session.actions import refuse_readonly
from eagle3_tui.session.check.job import CheckDefaults, CheckEvent, EventHandler, check_request
from eagle3_tui.session.check.job import run_check as run_check_job
from eagle3_tui.session.claim import RestartClaim
from eagle3_tui.session.connection import conn_view, make_host
from eagle3_tui.session.deploy.part import DeploymentPart
from eagle3_tui.session.events import (
    BenchFinished,
    BenchProgress,
    CheckFinished,
    CheckProgress,
    ConnView,
    FindingsChanged,
    RestartFailed,
    ServerView,
    SessionEvent,
)
from eagle3_tui.session.host.deployment import Deployment
from eagle3_tui.session.host.discovery import (
    ServerProcess,
    discover,
    pick_server,
    spec_from_profile,
    wanted_port,
    with_log_path,
)
from eagle3_tui.session.host.facts import LIVE_WINDOW_S, FactsSnapshot, base_installed, build_facts
from eagle3_tui.session.host.inputs import draft_config_problem, input_findings
from eagle3_tui.session.host.probe import TargetInfo, client_options, read_target
from eagle3_tui.session.host.served import parse_argv
from eagle3_tui.session.host.training_data import TrainingData, read_head, read_trained_template, resolve
from eagle3_tui.session.launch import LaunchSpec
from eagle3_tui.session.live.logfeed import LOG_TAIL_LINES, LogFeed
from eagle3_tui.session.live.monitor import GroupGone, ServerMonitor
from eagle3_tui.session.live.runstate import RunTracker
from eagle3_tui.session.presets.catalog import (
    NO_SPEC_PRESET,
    ApplyPlan,
    find_preset,
)
from eagle3_tui.session.restart.restarter import Restarter
from eagle3_tui.session.store.changes import Changed, Changes
from eagle3_tui.session.store.local import LocalStore
from eagle3_tui.session.store.records import Records, bench_results, config_snapshot, jsonable
from eagle3_tui.session.tasks import TaskSet
from eagle3_tui.session.terms import EngineTerms, PresetInputs, terms_for
from eagle3_tui.session.views import Listener, Views
from eagle3_tui.sglang.logline import Failure
from eagle3_tui.telemetry.metrics import Telemetry

if TYPE_CHECKING:
    from eagle3_tui.doctor import Facts, Finding
    from eagle3_tui.eagle.accuracy import CheckReport
    from eagle3_tui.eagle.published import Published
    from eagle3_tui.remote.host import ConnState, Host
    from eagle3_tui.sglang.client import BenchResult, SGLangClient
    from eagle3_tui.sglang.installed import Answer
    from eagle3_tui.telemetry.ledger import Ledger, LedgerRow

BENCH_LOG_GRACE_S = 1.0
ATTACH_LAST_LINES = 200


def _other_process_alive(pid: object) -> bool:
    if not isinstance(pid, int) or pid == os.getpid():
        return False
    return pid_alive(pid)


class Session:
    """One attached host. See the module docstring."""

    def __init__(self, profile: Profile, *, readonly: bool = False, host: Host | None = None) -> None:
        self.profile = profile
        self.readonly = readonly
        self._own_host = host is None
        self.host: Host = host if host is not None else make_host(profile)
        self.views = Views(ConnView("local" if profile.local else "connecting"),
                           ServerView(port=profile.port, log_path=profile.log_path))
        self.telemetry = Telemetry()
        self.telemetry.baseline_tps = profile.baseline_tps
        self.findings: list[Finding] = []
        self._input_problems: list[Finding] = []
        """Findings about inputs that could not be read (session/host/inputs.py), shown before the doctor's."""
        self.check: CheckReport | None = None
        self.training: TrainingData | None = None
        """The training data read for the doctor's trained wiring (use_training_data); None: the profile's slots."""
        self.facts: Facts | None = None
        self._servers: list[ServerProcess] = []
        self._last_bench: BenchResult | None = None
        self.target = TargetInfo()
        self._tracker = RunTracker()
        self._feed = LogFeed(self.host, self._tracker, self.views, self.telemetry, on_failure=self._on_failure_line)
        # uvicorn's access lines when stdout is their own file (`> access.log 2> server.log`): shown in the
        # log pane with the log's lines, never part of the run state (a tracker of their own)
        self._access_feed = LogFeed(self.host, RunTracker(), self.views, self.telemetry)
        self.access_log: str | None = None
        self.store = LocalStore(profile)
        self._changes = Changes(self.host, self.store)
        self.records = Records(profile.name, self.views)
        self._tasks = TaskSet()
        self._claim = RestartClaim()
        self.deploy = DeploymentPart(self.host, profile, self.views, self._feed, self._tracker, self.client, self._tasks)
        self.restarter = Restarter(self.host, profile, self.views, self._tracker, self._feed, self.client,
                                   self._claim, self.deploy, self._on_launched)
        self._monitor = ServerMonitor(self.host, self.views, self._feed, self._tracker, self._claim, self.telemetry,
                                      self.client, self.deploy)
        self._spec: LaunchSpec | None = None
        self._client: SGLangClient | None = None
        self._client_port: int | None = None
        self._poll_task: asyncio.Task[None] | None = None
        self._remove_state_listener: Callable[[], None] | None = None
        self._connected = False
        self._attached = False
        self._closed = False
        self.recovered: str | None = None
        """What attaching found of an interrupted change (store/changes.py), in one sentence; None: nothing."""

    # ------------------------------------------------------------ views and listeners

    @property
    def conn(self) -> ConnView:
        return self.views.conn

    @property
    def server(self) -> ServerView:
        return self.views.server

    @property
    def spec(self) -> LaunchSpec | None:
        """The launch a restart runs: the attached server's, else the remembered or profile's one."""
        return self._spec

    @property
    def engine(self) -> Engine:
        """The engine serving (the launch command's: `engines.engine_for_launch`); SGLang when none is known."""
        if self._spec is not None:
            with contextlib.suppress(UserError):
                return self._spec.engine
        return get_engine("sglang")

    @property
    def terms(self) -> EngineTerms:
        """The serving engine's presets, plans and served fields (`session/terms`)."""
        return terms_for(self.engine)

    def _preset_inputs(self) -> PresetInputs:
        t = self.target
        return PresetInputs(target_arch=t.arch, num_layers=t.num_layers, draft_text=t.draft_text,
                            embed_capture=t.embed_capture, fc_num_aux=t.fc_num_aux,
                            data_slots=self.profile.data_slots, user_presets=self.profile.presets,
                            installed=self._installed(), findings=tuple(self.findings))

    @property
    def restarting(self) -> bool:
        return self._claim.busy

    @property
    def deployment(self) -> Deployment:
        """Where the attached server runs (host/deployment.py): what a restart goes through and what it refuses."""
        return self.deploy.current

    def add_listener(self, fn: Listener) -> None:
        self.views.add_listener(fn)

    def remove_listener(self, fn: Listener) -> None:
        self.views.remove_listener(fn)

    def _emit(self, event: SessionEvent) -> None:
        self.views.emit(event)

    def _check_writable(self, action: str, detail: str = "") -> None:
        if self.readonly and not (self.profile.demo and action in ("start", "stop")):  # the demo's own sim server
            raise refuse_readonly(action, detail, how="the session was started with --readonly")

    @contextlib.asynccontextmanager
    async def _changing(self, action: str, needs: str | None, *, detail: str = "",
                        into_log: bool = False) -> AsyncIterator[None]:
        """What every entry point that changes what runs does first: refuse when read-only, ask the
        deployment (`needs`: what it must allow), and hold the one restart for the block."""
        self._check_writable(action, detail)
        if needs is not None:
            self.deploy.check(needs, into_log=into_log)
        async with self._claim:
            yield

    def recent_log(self, n: int = LOG_TAIL_LINES) -> list[str]:
        return self._feed.recent(n)

    def ingest_log(self, lines: list[str], *, log_time: bool = False) -> None:
        """Feed log lines through the real reader and run state (a recorded log; no host needed)."""
        self._feed.ingest_now(lines, log_time=log_time)

    # ------------------------------------------------------------ connection and attach

    def _on_conn_state(self, state: ConnState) -> None:
        self.views.set_conn(conn_view(state, local=self.profile.local))

    async def connect(self) -> None:
        """Connect to the host only (no discovery, no follow): what a one-shot job needs."""
        if self._connected:
            return
        self._remove_state_listener = self.host.add_state_listener(self._on_conn_state)
        try:
            await self.host.connect()
        except UserError as err:
            self.views.set_conn(ConnView("failed", reason=str(err)), always=True)
            raise
        self._connected = True
        self._on_conn_state(self.host.state)

    async def attach(self) -> None:
        """Connect, discover the server, follow its log, poll /server_info, gather the doctor's facts."""
        if self._attached:
            return
        await self.connect()
        self._attached = True
        await self._recover_changes()
        await self.refresh_servers()
        self._recover_restart()
        if self._spec is None:
            self._spec = self._remembered_spec()
            if self._spec is not None:
                self.views.set_server(self.server.with_launch(self._spec.port, self._spec.log_path, self._spec.argv)
                                      .with_state("stopped", "no server running; start one with the launch command"))
        await self.read_launch_facts()  # the profile's draft/target paths serve when nothing runs
        if self.server.state == "ready" and self.server.pgid:
            with contextlib.suppress(UserError):
                if not await (await self.client()).health(timeout=5):
                    self.views.set_state("starting", "attached while the server loads")
        if self.server.log_path:
            self._feed.start(self.server.log_path, start="end", last_lines=ATTACH_LAST_LINES)
        if self.access_log:
            self._access_feed.start(self.access_log, start="end", last_lines=ATTACH_LAST_LINES)
        if self._poll_task is None or self._poll_task.done():
            self._poll_task = self._tasks.spawn(self._watch())
        await self.refresh_findings()
        if self.telemetry.baseline_tps is None:
            self.telemetry.baseline_tps = self.records.last_baseline_tps()

    async def _recover_changes(self) -> str | None:
        """Settle an undo record a killed or cut-off change left unfinished, and say how (a warning)."""
        try:
            self.recovered = await self._changes.recover()
        except UserError as err:
            self.recovered = f"an unfinished change could not be checked on the host: {err}"
        if self.recovered:
            self.views.notice(self.recovered, "warning")
        return self.recovered

    def _recover_restart(self) -> str | None:
        """A restart cut off (connection lost, command killed) between its stop and its outcome: say where it stands."""
        rec = self.store.unfinished_restart()
        if rec is None or _other_process_alive(rec.get("pid")):
            return None  # none, or still running in another process of this machine (its lock refuses a second)
        when = time.strftime("%H:%M:%S", time.localtime(float(rec.get("since") or 0)))
        what = f"a restart ({rec.get('reason')}) begun at {when} was cut off before it ended"
        if self.server.state == "ready" and self.server.pgid:
            self.store.end_restart()
            note = f"{what}; a server runs now (pid {self.server.pid}), watched as found"
        else:
            note = (f"{what}: no server runs now; `restart` finishes it"
                    + (", `rollback` undoes the last preset and restarts" if self.store.rollback_preset() else ""))
        self.recovered = f"{self.recovered}; {note}" if self.recovered else note
        self.views.notice(note, "warning")
        return note

    async def _restart_cut_off(self) -> None:
        """A restart lost its connection midway: when the host is back, look again and say where the
        server stands (a server found is watched; none: `restart` finishes it)."""
        with contextlib.suppress(UserError):  # the session closed first: the next attach says it
            await self.host.wait_connected()
            if self._claim.busy:
                return  # a new restart already runs; it states its own outcome
            await self.refresh_servers()
            note = self._recover_restart()
            if note and self.server.state == "failed":  # failed by the lost connection; nothing runs now
                self.views.set_server(self.server.without_process().with_state("stopped", note))

    def _remembered_spec(self) -> LaunchSpec | None:
        remembered = self.store.load_launch()
        if remembered is not None:
            return remembered.with_env(self.profile.launch_env)
        return spec_from_profile(self.profile)

    async def refresh_servers(self) -> list[ServerProcess]:
        """Look at the process table again; pick the profile's port, or the only server."""
        found = await discover(self.host, log_path=self.profile.log_path, launch_command=self.profile.launch_command)
        self._servers = found.servers
        for note in found.notes:  # SGLang runs, but its launch args cannot be read (see `discovery.titled_groups`)
            self.views.notice(note, "warning")
        want = wanted_port(self.profile)
        chosen = pick_server(self._servers, want)
        if chosen is not None and chosen.note:
            self.views.notice(chosen.note, "warning")
        if chosen is None and want is None and len(self._servers) > 1:
            self.views.notice("several servers (SGLang or vLLM) run here (" + "; ".join(s.label for s in self._servers)
                              + "): pick one (or set the port in the profile)", "warning")
        if chosen is not None:
            self._adopt(chosen)
        elif self.server.state in ("unknown", "ready"):
            gone = not self._servers or want is not None
            self.views.set_server(self.server.without_process().with_state("stopped" if gone else "unknown",
                                                                           self.server.message))
        return self._servers

    def _adopt(self, proc: ServerProcess) -> None:
        spec = proc.spec().with_env(self.profile.launch_env)  # the profile's launch_env over what it ran with
        if spec.log_path is None:
            spec = dataclasses.replace(spec, log_path=self.profile.log_path)
        self._spec = spec
        self.access_log = proc.access_log
        self.deploy.fit(proc.deployment, proc.argv)
        self.store.save_launch(spec)
        self.views.set_server(self.server.with_process(proc.pid, proc.pgid, proc.start_time)
                              .with_launch(spec.port, spec.log_path, spec.argv).with_kind(proc.kind)
                              .with_state("ready"))
        self._update_served()

    def _update_served(self) -> None:
        """The server view's speculative fields from the launch command and the draft config."""
        terms = self.terms
        self._feed.use_reader(terms.engine.name, terms.log_reader)
        if self._spec is None:
            return
        inputs = self._preset_inputs()  # one reading of the installed release's answer for both
        view = terms.served(self._spec.argv, inputs, terms.presets(self._spec.argv, inputs))
        if view is None:
            return
        self.telemetry.num_steps = view.steps
        self.views.set_server(self.server.with_served(view))

    async def read_launch_facts(self) -> None:
        """Draft config, target config, checkpoint header, embed-capture support (all best effort)."""
        try:
            files = self.deploy.files()  # a container's paths: through its root
            self.target = await read_target(files, self._spec, self.profile)
            self._input_problems = await input_findings(files, self.target, self.profile,
                                                       self.target.checkpoint_path)
        except UserError as err:
            self.views.notice(str(err), "warning")
        if any(f.rule_id == "draft-config-malformed" for f in self._input_problems):
            self.target.draft_text = None  # said by its finding; no rule or preset reads it as a config
        self._update_served()

    # ------------------------------------------------------------ HTTP and polling

    async def client(self) -> SGLangClient:
        """An SGLang client through the host's port forward (LocalHost: the port itself)."""
        from eagle3_tui.sglang.client import SGLangClient

        port = self.server.port or (self._spec.port if self._spec else None)
        if port is None:
            raise UserError("the server's port is unknown (no server found and no launch command in the profile)")
        if self._client is None or self._client_port != port:
            if self._client is not None:
                await self._client.aclose()
            local = await self.host.forward(port)
            self._client = SGLangClient(**client_options(self._spec, local, api_key=self.profile.api_key),
                                        timeout=120.0)
            self._client_port = port
        return self._client

    async def poll_server_info(self) -> dict[str, Any]:
        """One /server_info read: effective values as the server reports them, accept length."""
        return await self._monitor.poll_server_info()

    async def _watch(self) -> None:
        """What the monitor sees, acted on: the doctor on new numbers; a process group gone looked at
        again, and a server restarted by someone else followed, else stated as exited."""
        async for seen in self._monitor.watch():
            if isinstance(seen, GroupGone):
                await self._server_gone(seen.pgid)
            else:
                with contextlib.suppress(Exception):
                    await self.refresh_findings(quiet=True)

    async def _server_gone(self, pgid: int) -> None:
        with contextlib.suppress(UserError):
            await self.refresh_servers()
            if self.server.pgid not in (None, pgid):  # restarted by someone else: follow the new one
                self.views.notice(f"the server was restarted outside this session (now pid {self.server.pid})")
                if not await (await self.client()).health(timeout=5):
                    self.views.set_state("starting", "restarted outside this session: loading")
                await self.read_launch_facts()
                return
            await self._monitor.mark_exited(pgid, self._log_path())

    def _log_path(self) -> str | None:
        return self._spec.log_path if self._spec else self.server.log_path

    def _on_failure_line(self, failure: Failure | Failed) -> None:
        if not self._claim.busy and self.server.state == "ready":
            self.views.notice(f"server log: {failure.kind}: {failure.last_line}", "error")

    # ------------------------------------------------------------ doctor

    def facts_snapshot(self) -> FactsSnapshot:
        """What the doctor reads, at this instant."""
        return FactsSnapshot(
            server=self.server, target=self.target,
            launch_argv=self._spec.argv if self._spec is not None else None,
            server_info=self._monitor.server_info, data_slots=self.profile.data_slots, data_glob=self.profile.data_glob,
            data_convention=self.training.convention if self.training is not None else None,
            live=self.telemetry.summary(LIVE_WINDOW_S), accept_points=len(self.telemetry.series["accept_len"]),
            last_bench=self._last_bench, check=self.check, log_warnings=tuple(self._feed.warnings),
            measured=tuple(measured_configs(self.records.readable_rows(), self.server.boundaries)),
            launch_env=dict(self._spec.env) if self._spec is not None else None,
            per_position=tuple(r for r in self.telemetry.last_positions() if r is not None),
            trained_template=self.training.template if self.training is not None else None,
            bench_format=self._bench_format(), baseline_batch=self._baseline_batch(),
            accept_history=self.telemetry.drift.slices(),
        )

    def _baseline_batch(self) -> int | None:
        """The concurrency of the newest baseline benchmark (this session's, else the ledger's)."""
        if self._last_bench is not None and self._last_bench.baseline:
            return self._last_bench.concurrency
        for row in reversed(self.records.readable_rows()):
            if row.kind == "baseline":
                return batch_of(row.results)
        return None

    def _bench_format(self) -> tuple[str, str] | None:
        """The latest benchmark's prompt format: this session's, else the ledger's newest row that says it."""
        if self._last_bench is not None:
            return self._last_bench.prompt_format, "this session's benchmark"
        for row in reversed(self.records.readable_rows()):
            if row.kind in ("benchmark", "sweep") and row.prompt_format is not None:
                return row.prompt_format, f"ledger row {row.id} ({row.kind})"
        return None

    async def use_training_data(self, data_glob: str, slots: Sequence[int] | None = None, *,
                                save: bool = False) -> TrainingData:
        """Learn the trained wiring from the data: its first file read on the host, `slots` (the boundaries
        its slots hold) checked against it, else inferred where the layout tells. The profile's data_glob
        and data_slots from now on (the check uses them too); `save`: also in the host's hosts.toml."""
        import json

        from eagle3_tui.eagle.wiring import config_layer_ids

        head = await read_head(self.host, self.profile.remote_python or self.host.python, data_glob)
        ids = None
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            ids = config_layer_ids(json.loads(self.target.draft_text or "{}"))[0]
        got = resolve(head, slots, num_layers=self.target.num_layers, config_ids=ids)
        got = dataclasses.replace(got, template=await read_trained_template(self.host, head.first))
        if save:
            self._save_data_settings(got)
        self.training = got
        self.profile.data_glob, self.profile.data_slots = got.glob, got.slots
        return got

    def _save_data_settings(self, got: TrainingData) -> None:
        from eagle3_tui.profile.write import Value, save_profile_values

        if not self.profile.source:
            raise UserError(f"the {self.profile.name} profile is not read from a file: nothing to save it to")
        values: dict[str, Value] = {"data_glob": got.glob}
        if got.slots is not None:
            values["data_slots"] = got.slots
        save_profile_values(self.profile.source, self.profile.name, values)

    async def refresh_findings(self, *, quiet: bool = False) -> list[Finding]:
        """Gather the facts and run the doctor's rules (`quiet`: tell listeners only when they changed)."""
        from eagle3_tui.doctor import diagnose

        self.facts = build_facts(self.facts_snapshot())
        findings = [*self._input_problems, *diagnose(self.facts)]
        changed = findings != self.findings
        self.findings = findings
        if changed or not quiet:
            self._emit(FindingsChanged(list(findings)))
        return self.findings

    # ------------------------------------------------------------ presets, changes, restarts

    def presets(self) -> list[Preset]:
        return self.terms.presets(self._spec.argv if self._spec is not None else None, self._preset_inputs())

    def _installed(self) -> Answer | None:
        """The installed SGLang's answer for the target (no id key): its source, else /server_info's version."""
        return base_installed(self.target, self.server.version, self._monitor.server_info)

    async def plan_apply(self, preset_name: str) -> ApplyPlan:
        """What applying the preset would change, validated. Changes nothing."""
        preset = find_preset(self.presets(), preset_name)
        if preset.kind == "flags":
            if self._spec is None:
                raise UserError("no launch command known: attach to a running server or set launch_command in the profile")
            return self.terms.plan_flags(preset, self._spec.argv, self.target.arch)
        path = self.target.draft_config_path
        if path is None:
            raise UserError("the draft config path is unknown (no --speculative-draft-model-path and no draft_path in the profile)")
        path = self.deployment.editable_path(path)
        raw = await self.host.read_bytes(path)
        why = draft_config_problem(path, raw)
        if why is not None:
            raise UserError(f"preset {preset.name!r} cannot be applied: {why}")
        before = raw.decode("utf-8")
        self.target.draft_text = before
        return self.terms.plan_layers(preset, path=path, before=before, inputs=self._preset_inputs())

    async def apply(self, plan: ApplyPlan) -> None:
        """Validate, write atomically with a backup (or change the launch command), ledger row, restart."""
        async with self._changing("apply", "flags" if plan.kind == "flags" else "restart", detail=plan.preset.name):
            if plan.problems:
                raise UserError(f"preset {plan.preset.name!r} cannot be applied: {plan.problems[0]}")
            await self._check_target(self._spec, f"apply preset {plan.preset.name!r}")
            if self._spec is None:
                raise UserError("no server to restart after the change: none was found and the profile has no "
                                "launch command")
            done = await self._changes.apply(plan, self._spec)
            self._changed(done, "preset", {"diff": plan.diff, "warnings": plan.warnings},
                          f"applied {plan.preset.name}", f"preset {plan.preset.name}")
            await self._restart(reason=f"preset {plan.preset.name}")

    async def rollback(self) -> None:
        """Undo the last applied preset (the config backup byte for byte, or the previous argv) and restart."""
        async with self._changing("rollback", "restart"):
            undo = self._changes.next_undo()
            await self._check_target(self._spec or self._remembered_spec(), "roll back")
            done = await self._changes.undo(undo, self._spec or self._remembered_spec())
            self._changed(done, "rollback", {}, f"rolled back {done.preset}", "rollback")
            await self._restart(reason="rollback")

    def _changed(self, done: Changed, kind: str, results: dict[str, Any], note: str, mark: str) -> None:
        self._spec = done.spec
        if done.draft_text is not None:
            self.target.draft_text = done.draft_text
        self._record(kind, results, note)
        self.telemetry.mark(time.time(), mark)
        self._update_served()

    def can_rollback(self) -> str | None:
        """The preset the next rollback undoes, or None."""
        return self.store.rollback_preset()

    async def start_server(self) -> None:
        """Start the server with the profile's launch command (or the last known one)."""
        async with self._changing("start", None):
            if self._spec is None:
                self._spec = self._remembered_spec()
            if self._spec is None:
                raise UserError("no launch command: set launch_command in the profile")
            await self._check_target(self._spec, "start the server")
            await self._restart(reason="start")

    async def stop_server(self) -> None:
        self._check_writable("stop")
        self.deploy.check("stop")
        await self.restarter.stop()

    async def restart(self, *, into_log: bool = False) -> None:
        """Stop, wait for the port, relaunch with the same argv/cwd/env, wait until ready.

        `into_log`: a server in a terminal pane or a pipe is relaunched detached into a log file."""
        async with self._changing("restart", "restart", into_log=into_log):
            if into_log:
                self.deploy.release_to_log()
            await self._check_target(self._spec, "restart the server")
            if self._spec is None:
                raise UserError("no server to restart: none was found and the profile has no launch command")
            await self._restart(reason="restart")

    async def relaunch(self, argv: Sequence[str], *, reason: str) -> None:
        """Restart with `argv` as the launch command, through the one restart path, without an undo
        record: the flag sweep keeps one record (its first change) for all its steps and restores
        through `rollback`."""
        async with self._changing("restart", "flags"):
            await self._check_target(self._spec, "restart the server")
            if self._spec is None:
                raise UserError("no server to restart: none was found and the profile has no launch command")
            self._spec = self._spec.with_argv(tuple(argv))
            self.store.save_launch(self._spec)
            self._update_served()
            await self._restart(reason=reason)

    async def _check_target(self, spec: LaunchSpec | None, what: str) -> None:
        """Refuse, naming what was found, unless `what` acts on the server the user named: the one on the
        port asked for (`--port`, the profile's port, its launch command's), else, with none named, the
        only one running. A server not running may be started only on the port asked for, and only when
        nothing else holds that port. Called before anything on the host changes."""
        want = wanted_port(self.profile)
        found = "; ".join(s.label for s in self._servers) or "none"
        adopted = self.server.pid is not None and any(s.pid == self.server.pid for s in self._servers)
        if want is None:
            if not adopted and len(self._servers) > 1:
                raise UserError(f"refusing to {what}: several servers (SGLang or vLLM) run here ({found}) and none was "
                                "named: give --port (or set the port in the profile); nothing was changed")
            return
        if adopted and self.server.port == want:
            return
        if spec is not None and spec.port != want:
            raise UserError(
                f"refusing to {what}: no SGLang or vLLM server this console recognises runs on port {want} (servers "
                f"found: {found}), and the launch command known serves port {spec.port}, not {want}; nothing "
                f"was changed (set launch_command in the profile to start one on port {want})")
        if spec is not None and not await self.restarter.port_free(spec.bind_host, want):
            raise UserError(
                f"refusing to {what}: port {want} is in use, but not by an SGLang or vLLM server this console "
                f"recognises (servers found: {found}); nothing was changed (see `ss -ltnp 'sport = :{want}'` "
                "on the host)")

    def _on_launched(self, spec: LaunchSpec, pgid: int, reason: str) -> None:
        now = time.time()
        self.telemetry.mark(now, reason)
        self.telemetry.new_run(now)
        self._spec = spec
        self.store.save_launch(spec)
        self._update_served()

    async def _restart(self, *, reason: str) -> None:
        """The restart (the caller holds the claim), then what the new server says about itself."""
        assert self._spec is not None
        self._spec = with_log_path(self._spec, self.profile.log_path)
        self.deploy.fit_remembered(self._spec)
        self.store.begin_restart({"reason": reason, "since": time.time(), "port": self._spec.port,
                                  "pgid_before": self.server.pgid, "pid": os.getpid()})
        try:
            seconds = await self.restarter.run(self._spec, reason=reason)
        except RestartFailed as err:
            # The host may already be back when the failure lands: the cause, not the state, says "lost".
            lost = isinstance(err.__context__, ConnectionLost) or not (
                self.host.state.kind == "connected" or self.profile.local)
            if lost:  # the record stays (the next attach says it too); once the host is back, say where it stands
                err.exit_code = EXIT_CONNECTION_LOST  # a command ends on it with the lost connection's status
                self._tasks.spawn(self._restart_cut_off())
            else:
                self.store.end_restart()  # a stated outcome
            self._record("restart", {"ok": False, "error": str(err)}, "failed")
            raise
        self.store.end_restart()
        with contextlib.suppress(UserError):
            await self.poll_server_info()
        await self.refresh_servers()
        await self.read_launch_facts()
        with contextlib.suppress(Exception):
            await self.refresh_findings()
        self._record("restart", {"ok": True, "seconds": round(seconds, 2)}, reason)

    # ------------------------------------------------------------ benchmark and check

    async def benchmark(self, *, baseline: bool = False, raw: bool = False, **opts: Any) -> BenchResult:
        """Benchmark through the HTTP API; record it in the ledger (a baseline sets the reference tok/s).
        Prompts go as chat in the served model's template unless `raw` (the ledger row says which), through
        the serving engine's API (`senders.bench_sender`)."""
        from eagle3_tui.session.bench.chat import NO_TEMPLATE, chat_mode
        from eagle3_tui.session.bench.senders import bench_sender
        from eagle3_tui.sglang.client import run_benchmark

        if self.server.state not in ("ready", "unknown"):
            raise UserError(f"the server is {self.server.state}; start it before benchmarking")
        if wanted_port(self.profile) is None:
            await self._check_target(None, "benchmark")  # several servers, none named: which one is unknown
        if baseline and self.server.speculative:
            raise UserError("a baseline run needs the server without speculation: apply the "
                            f"{NO_SPEC_PRESET!r} preset first (and roll back after)")
        c = await self.client()
        opts.setdefault("flush", not self.readonly)
        try:
            t_start = time.time()
            chat = None if raw else chat_mode(self.target.chat_template,
                                              tokenizer_read=self.target.tokenizer_read)
            result = await run_benchmark(c, baseline=baseline, sender=bench_sender(self.engine, chat),
                                         on_progress=lambda d, t: self._emit(BenchProgress(d, t)), **opts)
            if chat is None and not raw:
                result.chat_template = NO_TEMPLATE
            published = self._published()
            if published is not None:
                result.published_accept_len, result.published_source = published.accept_len, published.source
            await asyncio.sleep(BENCH_LOG_GRACE_S)  # the follower delivers the window's last lines
            result.accept_len_log = self._log_accept_len(t_start, time.time())
        except UserError as err:
            self._emit(BenchFinished(None, str(err)))
            raise
        if baseline:
            self.telemetry.baseline_tps = result.output_tps
        self._last_bench = result
        self._record("baseline" if baseline else "benchmark", self.bench_results(result))
        self.telemetry.mark(time.time(), "baseline" if baseline else "benchmark")
        self._emit(BenchFinished(result, None))
        return result

    async def served_concurrency(self) -> tuple[int, str]:
        """The requests the server runs at once now: its decode lines' #running-req (mean over the live window),
        else the engine's /metrics gauge of running requests; and what said it. UserError when neither shows any."""
        mean = self.telemetry.summary(LIVE_WINDOW_S).means.get("running_req")
        if mean is not None and mean >= 0.5:
            return max(1, round(mean)), f"the server log's #running-req, mean {mean:.1f} over {LIVE_WINDOW_S:.0f} s"
        gauge = self.engine.running_metric
        with contextlib.suppress(UserError):
            running = (await (await self.client()).metrics()).total(gauge)
            if running is not None and running >= 1:
                return round(running), f"/metrics {gauge} {running:.0f}"
        raise UserError("no running requests seen (no decode line with #running-req in the last "
                        f"{LIVE_WINDOW_S:.0f} s, none in /metrics): give the concurrency with -c N")

    def _published(self) -> Published | None:
        """The draft's published accept length (its config.json, else its README.md), when it says one."""
        import json

        from eagle3_tui.eagle.published import published_accept_length

        t = self.target
        try:
            cfg = json.loads(t.draft_text) if t.draft_text else None
        except ValueError:
            cfg = None
        return published_accept_length(cfg if isinstance(cfg, dict) else None, t.draft_card,
                                       config_name=t.draft_config_path or "config.json",
                                       card_name=t.draft_card_path or "README.md")

    def _log_accept_len(self, t0: float, t1: float) -> float | None:
        vals = [v for _, v in self.telemetry.series["accept_len"].window(t0, t1)]
        return sum(vals) / len(vals) if vals else None

    def bench_results(self, r: BenchResult) -> dict[str, Any]:
        """A benchmark as its ledger row's results (with the speedup over the current baseline)."""
        return bench_results(r, self.telemetry.baseline_tps)

    def _check_defaults(self) -> CheckDefaults:
        t = self.target
        launched = parse_argv(self._spec.argv) if self._spec is not None else None
        return CheckDefaults(
            draft_dir=self.profile.draft_path or t.checkpoint_path or (launched.draft_model_path if launched else None),
            data_glob=self.profile.data_glob, data_slots=self.profile.data_slots, steps=self.server.steps,
            num_layers=t.num_layers, python=self.profile.remote_python,
            target=str(Path(t.target_config_path).parent) if t.target_config_path else self.profile.target_path,
        )

    async def run_check(
        self, *, on_event: EventHandler | None = None, record: bool = True, **opts: Any
    ) -> CheckReport:
        """The standalone accuracy check on the host; cancel the task to cancel the job.

        `on_event` also sees every line of the job; `record=False` leaves the ledger alone.
        """
        draft, data_glob, options = check_request(opts, self._check_defaults())

        def progress(ev: CheckEvent) -> None:
            if on_event is not None:
                on_event(ev)
            if ev.done is not None and ev.total is not None:
                self._emit(CheckProgress(ev.done, ev.total, ev.eta_s, ev.wiring))

        try:
            report = await run_check_job(self.host, draft_dir=draft, data_glob=data_glob, on_event=progress,
                                              **options)
        except asyncio.CancelledError:
            self._emit(CheckFinished(None, "cancelled"))
            raise
        except UserError as err:
            self._emit(CheckFinished(None, str(err)))
            raise
        self.check = report
        if record:
            self._record("check", jsonable(report), "accuracy check")
        with contextlib.suppress(Exception):
            await self.refresh_findings()
        self._emit(CheckFinished(report, None))
        return report

    # ------------------------------------------------------------ ledger

    def _ledger(self) -> Ledger:
        return self.records.ledger()

    def ledger_rows(self) -> list[LedgerRow]:
        return self.records.rows()

    def config_snapshot(self) -> dict[str, Any]:
        return config_snapshot(self._spec, self.server, self.telemetry.baseline_tps)

    def _record(self, kind: str, results: dict[str, Any], note: str = "") -> None:
        self.records.record(kind, self.config_snapshot(), results, note)

    # ------------------------------------------------------------ close

    async def close(self) -> None:
        """Stop following and polling; the server keeps running."""
        self._closed = True
        await self._feed.close()
        await self._access_feed.close()
        await self.deploy.close()
        await self._tasks.cancel_all()
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.aclose()
            self._client = None
        if self._remove_state_listener is not None:
            self._remove_state_listener()
        if self._own_host:
            with contextlib.suppress(Exception):
                await self.host.close()
        self.records.close()

    async def __aenter__(self) -> Session:
        await self.attach()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
