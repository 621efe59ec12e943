"""Looking at the host again: the servers found (the one adopted), the launch facts read, the served
fields, and the doctor's facts and findings."""

from __future__ import annotations

import dataclasses
import time
from typing import TYPE_CHECKING

from eagle3_tui.doctor.advice import batch_of, measured_configs
from eagle3_tui.errors import UserError
from eagle3_tui.session.events import FindingsChanged
from eagle3_tui.session.host.discovery import (
    ServerProcess,
    discover,
    pick_server,
    spec_from_profile,
    wanted_port,
)
from eagle3_tui.session.host.facts import LIVE_WINDOW_S, FactsSnapshot, base_installed, build_facts
from eagle3_tui.session.host.inputs import input_findings
from eagle3_tui.session.host.probe import read_target
from eagle3_tui.session.terms import PresetInputs

if TYPE_CHECKING:
    from eagle3_tui.doctor import Facts, Finding
    from eagle3_tui.profile import Profile
    from eagle3_tui.remote.host import Host
    from eagle3_tui.session.attached.known import Known
    from eagle3_tui.session.deploy.part import DeploymentPart
    from eagle3_tui.session.launch import LaunchSpec
    from eagle3_tui.session.live.logfeed import LogFeed
    from eagle3_tui.session.live.monitor import ServerMonitor
    from eagle3_tui.session.store.local import LocalStore
    from eagle3_tui.session.store.records import Records
    from eagle3_tui.session.views import Views
    from eagle3_tui.sglang.installed import Answer
    from eagle3_tui.telemetry.metrics import Telemetry


class Survey:
    """What the host says about the server, read again on demand (see the module docstring)."""

    def __init__(self, host: Host, profile: Profile, views: Views, known: Known, store: LocalStore,
                 deploy: DeploymentPart, feed: LogFeed, telemetry: Telemetry, monitor: ServerMonitor,
                 records: Records) -> None:
        self._host = host
        self._profile = profile
        self._views = views
        self._known = known
        self._store = store
        self._deploy = deploy
        self._feed = feed
        self._telemetry = telemetry
        self._monitor = monitor
        self._records = records
        self.servers: list[ServerProcess] = []
        """The SGLang or vLLM servers found on the host at the last look."""
        self.access_log: str | None = None
        """uvicorn's access lines when stdout is their own file (`> access.log 2> server.log`)."""
        self.findings: list[Finding] = []
        self.facts: Facts | None = None
        self._input_problems: list[Finding] = []
        """Findings about inputs that could not be read (session/host/inputs.py), shown before the doctor's."""

    # ------------------------------------------------------------ servers and launch facts

    def remembered_spec(self) -> LaunchSpec | None:
        remembered = self._store.load_launch()
        if remembered is not None:
            return remembered.with_env(self._profile.launch_env)
        return spec_from_profile(self._profile)

    async def refresh_servers(self) -> list[ServerProcess]:
        """Look at the process table again; pick the profile's port, or the only server."""
        found = await discover(self._host, log_path=self._profile.log_path,
                               launch_command=self._profile.launch_command)
        self.servers = found.servers
        for note in found.notes:  # SGLang runs, but its launch args cannot be read (see `discovery.titled_groups`)
            self._views.notice(note, "warning")
        want = wanted_port(self._profile)
        chosen = pick_server(self.servers, want)
        if chosen is not None and chosen.note:
            self._views.notice(chosen.note, "warning")
        if chosen is None and want is None and len(self.servers) > 1:
            self._views.notice("several servers (SGLang or vLLM) run here (" + "; ".join(s.label for s in self.servers)
                               + "): pick one (or set the port in the profile)", "warning")
        server = self._views.server
        if chosen is not None:
            self._adopt(chosen)
        elif server.state in ("unknown", "ready"):
            gone = not self.servers or want is not None
            self._views.set_server(server.without_process().with_state("stopped" if gone else "unknown",
                                                                       server.message))
        return self.servers

    def _adopt(self, proc: ServerProcess) -> None:
        spec = proc.spec().with_env(self._profile.launch_env)  # the profile's launch_env over what it ran with
        if spec.log_path is None:
            spec = dataclasses.replace(spec, log_path=self._profile.log_path)
        self._known.spec = spec
        self.access_log = proc.access_log
        self._deploy.fit(proc.deployment, proc.argv)
        self._store.save_launch(spec)
        self._views.set_server(self._views.server.with_process(proc.pid, proc.pgid, proc.start_time)
                               .with_launch(spec.port, spec.log_path, spec.argv).with_kind(proc.kind)
                               .with_state("ready"))
        self.update_served()

    def launched(self, spec: LaunchSpec, pgid: int, reason: str) -> None:
        """A restart launched `spec`: the run marked, the launch remembered, the served fields read."""
        now = time.time()
        self._telemetry.mark(now, reason)
        self._telemetry.new_run(now)
        self._known.spec = spec
        self._store.save_launch(spec)
        self.update_served()

    def update_served(self) -> None:
        """The server view's speculative fields from the launch command and the draft config."""
        terms = self._known.terms
        self._feed.use_reader(terms.engine.name, terms.log_reader)
        spec = self._known.spec
        if spec is None:
            return
        inputs = self.preset_inputs()  # one reading of the installed release's answer for both
        view = terms.served(spec.argv, inputs, terms.presets(spec.argv, inputs))
        if view is None:
            return
        self._telemetry.num_steps = view.steps
        self._views.set_server(self._views.server.with_served(view))

    async def read_launch_facts(self) -> None:
        """Draft config, target config, checkpoint header, embed-capture support (all best effort)."""
        known = self._known
        try:
            files = self._deploy.files()  # a container's paths: through its root
            known.target = await read_target(files, known.spec, self._profile)
            self._input_problems = await input_findings(files, known.target, self._profile,
                                                        known.target.checkpoint_path)
        except UserError as err:
            self._views.notice(str(err), "warning")
        if any(f.rule_id == "draft-config-malformed" for f in self._input_problems):
            known.target.draft_text = None  # said by its finding; no rule or preset reads it as a config
        self.update_served()

    # ------------------------------------------------------------ what presets read

    def preset_inputs(self) -> PresetInputs:
        t = self._known.target
        return PresetInputs(target_arch=t.arch, num_layers=t.num_layers, draft_text=t.draft_text,
                            embed_capture=t.embed_capture, fc_num_aux=t.fc_num_aux,
                            data_slots=self._profile.data_slots, user_presets=self._profile.presets,
                            installed=self.installed(), findings=tuple(self.findings))

    def installed(self) -> Answer | None:
        """The installed SGLang's answer for the target (no id key): its source, else /server_info's version."""
        return base_installed(self._known.target, self._views.server.version, self._monitor.server_info)

    # ------------------------------------------------------------ doctor

    def facts_snapshot(self) -> FactsSnapshot:
        """What the doctor reads, at this instant."""
        known, server, telemetry, spec = self._known, self._views.server, self._telemetry, self._known.spec
        return FactsSnapshot(
            server=server, target=known.target,
            launch_argv=spec.argv if spec is not None else None,
            server_info=self._monitor.server_info, data_slots=self._profile.data_slots,
            data_glob=self._profile.data_glob,
            data_convention=known.training.convention if known.training is not None else None,
            live=telemetry.summary(LIVE_WINDOW_S), accept_points=len(telemetry.series["accept_len"]),
            last_bench=known.last_bench, check=known.check, log_warnings=tuple(self._feed.warnings),
            measured=tuple(measured_configs(self._records.readable_rows(), server.boundaries)),
            launch_env=dict(spec.env) if spec is not None else None,
            per_position=tuple(r for r in telemetry.last_positions() if r is not None),
            trained_template=known.training.template if known.training is not None else None,
            bench_format=self._bench_format(), baseline_batch=self._baseline_batch(),
            accept_history=telemetry.drift.slices(),
        )

    def _baseline_batch(self) -> int | None:
        """The concurrency of the newest baseline benchmark (this session's, else the ledger's)."""
        last = self._known.last_bench
        if last is not None and last.baseline:
            return last.concurrency
        for row in reversed(self._records.readable_rows()):
            if row.kind == "baseline":
                return batch_of(row.results)
        return None

    def _bench_format(self) -> tuple[str, str] | None:
        """The latest benchmark's prompt format: this session's, else the ledger's newest row that says it."""
        last = self._known.last_bench
        if last is not None:
            return last.prompt_format, "this session's benchmark"
        for row in reversed(self._records.readable_rows()):
            if row.kind in ("benchmark", "sweep") and row.prompt_format is not None:
                return row.prompt_format, f"ledger row {row.id} ({row.kind})"
        return None

    async def refresh_findings(self, *, quiet: bool = False) -> list[Finding]:
        """Gather the facts and run the doctor's rules (`quiet`: tell listeners only when they changed)."""
        from eagle3_tui.doctor import diagnose

        self.facts = build_facts(self.facts_snapshot())
        findings = [*self._input_problems, *diagnose(self.facts)]
        changed = findings != self.findings
        self.findings = findings
        if changed or not quiet:
            self._views.emit(FindingsChanged(list(findings)))
        return self.findings
