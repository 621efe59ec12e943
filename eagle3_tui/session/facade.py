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
  (the ledger); `host/`: what the host says about the draft, target and data, and the doctor's facts;
- `attached/`: `Known` (what the parts share: the launch, the target, the last check, training data and
  benchmark), `Survey` (the servers found, the launch facts, the doctor's findings), `Recorder` (ledger rows);
- what the UI and commands call: `control` (`control.server.ServerControl`: start, stop, restart,
  relaunch), `presets` (`control.presets.Presets`: list, plan, apply, roll back), `bench`
  (`measure.bench.Bench`), `accuracy` (`measure.accuracy.AccuracyCheck`: the check and the training data).

Every entry point that changes what runs begins with `control.changing`: read-only refused
(`ReadOnlyError`), the deployment asked, the restart claimed (`UserError` for a second one while one runs).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from eagle3_tui.engines import Engine, Failed
from eagle3_tui.errors import UserError
from eagle3_tui.profile import Profile
from eagle3_tui.session.attached.known import Known
from eagle3_tui.session.attached.recorder import Recorder
from eagle3_tui.session.attached.survey import Survey
from eagle3_tui.session.claim import RestartClaim
from eagle3_tui.session.connection import conn_view, make_host
from eagle3_tui.session.control.presets import Presets
from eagle3_tui.session.control.server import ServerControl
from eagle3_tui.session.deploy.part import DeploymentPart
from eagle3_tui.session.events import ConnView, ServerView
from eagle3_tui.session.host.deployment import Deployment
from eagle3_tui.session.host.probe import TargetInfo, client_options
from eagle3_tui.session.launch import LaunchSpec
from eagle3_tui.session.live.logfeed import LOG_TAIL_LINES, LogFeed
from eagle3_tui.session.live.monitor import GroupGone, ServerMonitor
from eagle3_tui.session.live.runstate import RunTracker
from eagle3_tui.session.measure.accuracy import AccuracyCheck
from eagle3_tui.session.measure.bench import Bench
from eagle3_tui.session.restart.restarter import Restarter
from eagle3_tui.session.store.changes import Changes
from eagle3_tui.session.store.local import LocalStore
from eagle3_tui.session.store.records import Records
from eagle3_tui.session.tasks import TaskSet
from eagle3_tui.session.terms import EngineTerms
from eagle3_tui.session.views import Listener, Views
from eagle3_tui.sglang.logline import Failure
from eagle3_tui.telemetry.metrics import Telemetry

if TYPE_CHECKING:
    from eagle3_tui.doctor import Facts, Finding
    from eagle3_tui.eagle.accuracy import CheckReport
    from eagle3_tui.remote.host import ConnState, Host
    from eagle3_tui.session.host.training_data import TrainingData
    from eagle3_tui.sglang.client import SGLangClient

ATTACH_LAST_LINES = 200


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
        self.known = Known()
        self._tracker = RunTracker()
        self._feed = LogFeed(self.host, self._tracker, self.views, self.telemetry, on_failure=self._on_failure_line)
        # uvicorn's access lines when stdout is their own file (`> access.log 2> server.log`): shown in the
        # log pane with the log's lines, never part of the run state (a tracker of their own)
        self._access_feed = LogFeed(self.host, RunTracker(), self.views, self.telemetry)
        self.store = LocalStore(profile)
        self.records = Records(profile.name, self.views)
        self._tasks = TaskSet()
        self._claim = RestartClaim()
        self.deploy = DeploymentPart(self.host, profile, self.views, self._feed, self._tracker, self.client, self._tasks)
        self._monitor = ServerMonitor(self.host, self.views, self._feed, self._tracker, self._claim, self.telemetry,
                                      self.client, self.deploy)
        self.survey = Survey(self.host, profile, self.views, self.known, self.store, self.deploy, self._feed,
                             self.telemetry, self._monitor, self.records)
        self.recorder = Recorder(self.known, self.views, self.telemetry, self.records)
        self.restarter = Restarter(self.host, profile, self.views, self._tracker, self._feed, self.client,
                                   self._claim, self.deploy, self.survey.launched)
        self.control = ServerControl(self.host, profile, self.views, self.known, self.survey, self._monitor,
                                     self.restarter, self.deploy, self.store, self._claim, self._tasks,
                                     self.recorder, readonly=readonly)
        self._changes = Changes(self.host, self.store)
        self.presets = Presets(self.host, self.known, self.survey, self.control, self._changes, self.store,
                               self.deploy, self.recorder, self.telemetry)
        self.bench = Bench(profile, self.views, self.known, self.telemetry, self.recorder, self.control,
                           self.client, readonly=readonly)
        self.accuracy = AccuracyCheck(self.host, profile, self.views, self.known, self.survey, self.recorder)
        self._client: SGLangClient | None = None
        self._client_port: int | None = None
        self._poll_task: asyncio.Task[None] | None = None
        self._remove_state_listener: Callable[[], None] | None = None
        self._connected = False
        self._attached = False
        self._closed = False

    # ------------------------------------------------------------ views, what is known, listeners

    @property
    def conn(self) -> ConnView:
        return self.views.conn

    @property
    def server(self) -> ServerView:
        return self.views.server

    @property
    def spec(self) -> LaunchSpec | None:
        """The launch a restart runs: the attached server's, else the remembered or profile's one."""
        return self.known.spec

    @property
    def engine(self) -> Engine:
        """The engine serving (the launch command's: `engines.engine_for_launch`); SGLang when none is known."""
        return self.known.engine

    @property
    def terms(self) -> EngineTerms:
        """The serving engine's presets, plans and served fields (`session/terms`)."""
        return self.known.terms

    @property
    def target(self) -> TargetInfo:
        return self.known.target

    @property
    def check(self) -> CheckReport | None:
        """The last accuracy check's report (`accuracy.run`)."""
        return self.known.check

    @property
    def training(self) -> TrainingData | None:
        """The training data read for the doctor's trained wiring (`accuracy.use_training_data`); None: the profile's slots."""
        return self.known.training

    @property
    def recovered(self) -> str | None:
        """What attaching found of an interrupted change or restart, in one sentence; None: nothing."""
        return self.known.recovered

    @property
    def findings(self) -> list[Finding]:
        return self.survey.findings

    @property
    def facts(self) -> Facts | None:
        return self.survey.facts

    @property
    def access_log(self) -> str | None:
        return self.survey.access_log

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
        await self.survey.refresh_servers()
        self.control.recover()
        if self.known.spec is None:
            spec = self.known.spec = self.survey.remembered_spec()
            if spec is not None:
                self.views.set_server(self.server.with_launch(spec.port, spec.log_path, spec.argv)
                                      .with_state("stopped", "no server running; start one with the launch command"))
        await self.survey.read_launch_facts()  # the profile's draft/target paths serve when nothing runs
        if self.server.state == "ready" and self.server.pgid:
            with contextlib.suppress(UserError):
                if not await (await self.client()).health(timeout=5):
                    self.views.set_state("starting", "attached while the server loads")
        if self.server.log_path:
            self._feed.start(self.server.log_path, start="end", last_lines=ATTACH_LAST_LINES)
        if self.survey.access_log:
            self._access_feed.start(self.survey.access_log, start="end", last_lines=ATTACH_LAST_LINES)
        if self._poll_task is None or self._poll_task.done():
            self._poll_task = self._tasks.spawn(self._watch())
        await self.survey.refresh_findings()
        if self.telemetry.baseline_tps is None:
            self.telemetry.baseline_tps = self.records.last_baseline_tps()

    async def _recover_changes(self) -> str | None:
        """Settle an undo record a killed or cut-off change left unfinished, and say how (a warning)."""
        try:
            self.known.recovered = await self._changes.recover()
        except UserError as err:
            self.known.recovered = f"an unfinished change could not be checked on the host: {err}"
        if self.known.recovered:
            self.views.notice(self.known.recovered, "warning")
        return self.known.recovered

    # ------------------------------------------------------------ HTTP and polling

    async def client(self) -> SGLangClient:
        """An SGLang client through the host's port forward (LocalHost: the port itself)."""
        from eagle3_tui.sglang.client import SGLangClient

        port = self.server.port or (self.known.spec.port if self.known.spec else None)
        if port is None:
            raise UserError("the server's port is unknown (no server found and no launch command in the profile)")
        if self._client is None or self._client_port != port:
            if self._client is not None:
                await self._client.aclose()
            local = await self.host.forward(port)
            self._client = SGLangClient(**client_options(self.known.spec, local, api_key=self.profile.api_key),
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
                    await self.survey.refresh_findings(quiet=True)

    async def _server_gone(self, pgid: int) -> None:
        with contextlib.suppress(UserError):
            await self.survey.refresh_servers()
            if self.server.pgid not in (None, pgid):  # restarted by someone else: follow the new one
                self.views.notice(f"the server was restarted outside this session (now pid {self.server.pid})")
                if not await (await self.client()).health(timeout=5):
                    self.views.set_state("starting", "restarted outside this session: loading")
                await self.survey.read_launch_facts()
                return
            await self._monitor.mark_exited(pgid, self._log_path())

    def _log_path(self) -> str | None:
        return self.known.spec.log_path if self.known.spec else self.server.log_path

    def _on_failure_line(self, failure: Failure | Failed) -> None:
        if not self._claim.busy and self.server.state == "ready":
            self.views.notice(f"server log: {failure.kind}: {failure.last_line}", "error")

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
