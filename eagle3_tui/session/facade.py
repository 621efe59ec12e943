"""One attached host: the only thing the UI (and the headless commands) talk to.

A `Session` owns the host connection, the followed server log (fed into `Telemetry`), the polled
`/server_info`, the doctor's findings, the presets, the one restart path and the ledger. The UI reads
plain dataclass snapshots (`conn`, `server`, ...) that are replaced on change, and listens to events.

Changing methods raise `ReadOnlyError` when the session is read-only, and `UserError` for a second
restart while one runs. Restart: stop the process group, wait for the port, relaunch detached with
the same argv/cwd/env (log rotated by the host layer), follow the new log, ready when the log says
"The server is fired up and ready to roll!" and `/health` answers, within the profile's deadline.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from eagle3_tui.errors import UserError
from eagle3_tui.profile import Preset, Profile
from eagle3_tui.session.discovery import (
    DEFAULT_PORT,
    LaunchSpec,
    ServerProcess,
    default_log_path,
    discover_servers,
    redact_env,
)
from eagle3_tui.session.events import (
    BenchFinished,
    BenchProgress,
    CheckFinished,
    CheckProgress,
    ConnectionChanged,
    ConnView,
    FindingsChanged,
    LedgerChanged,
    LogBatch,
    Notice,
    ReadOnlyError,
    ServerChanged,
    ServerView,
    SessionEvent,
    StatsUpdated,
)
from eagle3_tui.session.presets import (
    NO_SPEC_PRESET,
    ApplyPlan,
    all_presets,
    builtin_presets,
    find_preset,
    plan_flags,
    plan_layers,
)
from eagle3_tui.session.restart import LOG_TAIL_LINES, RestartMixin
from eagle3_tui.session.store import LocalStateMixin
from eagle3_tui.sglang import launch
from eagle3_tui.sglang.logline import (
    DecodeStats,
    Failure,
    LogEvent,
    LogReader,
    ServerArgs,
    ServerReady,
    ServerWarning,
)
from eagle3_tui.telemetry.metrics import Telemetry

if TYPE_CHECKING:
    from eagle3_tui.sglang.client import BenchResult, SGLangClient


READY_LINE = "The server is fired up and ready to roll!"
POLL_INTERVAL_S = 3.0
QUIET_FLUSH_S = 1.5
BENCH_LOG_GRACE_S = 1.0



@dataclass
class _Target:
    """What the session learned about the draft and target (for presets, validation, facts)."""

    draft_config_path: str | None = None
    draft_text: str | None = None
    num_layers: int | None = None
    hidden_size: int | None = None
    arch: str | None = None
    fc_num_aux: int | None = None
    embed_capture: bool | None = None
    embed_capture_source: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


class Session(RestartMixin, LocalStateMixin):
    """One attached host. See the module docstring."""

    def __init__(self, profile: Profile, *, readonly: bool = False, host: Any | None = None) -> None:
        self.profile = profile
        self.readonly = readonly
        self.host = host
        self._own_host = host is None
        self.conn = ConnView("local" if profile.local else "connecting")
        self.server = ServerView(port=profile.port, log_path=profile.log_path)
        self.telemetry = Telemetry()
        self.telemetry.baseline_tps = profile.baseline_tps
        self.findings: list[Any] = []
        self.check: Any | None = None
        self.facts: Any | None = None
        self.servers: list[ServerProcess] = []
        self.last_bench: BenchResult | None = None
        self.target = _Target()
        self._listeners: list[Callable[[SessionEvent], None]] = []
        self._tasks: set[asyncio.Task[Any]] = set()
        self._follow_task: asyncio.Task[None] | None = None
        self._follow_path: str | None = None
        self._poll_task: asyncio.Task[None] | None = None
        self._reader = LogReader()
        self._recent: deque[str] = deque(maxlen=400)
        self._spec: LaunchSpec | None = None
        self._client: SGLangClient | None = None
        self._client_port: int | None = None
        self._restarting = False
        self._restart_epoch = 0
        self._log_epoch = 0  # the launch whose log file the follower is reading
        self._launch_epoch = 0
        self._ready_epoch = -1
        self._failure: Failure | None = None
        self._failure_epoch = -1
        self._ledger: Any | None = None
        self._remove_state_listener: Callable[[], None] | None = None
        self._attached = False
        self._closed = False
        self._server_args: dict[str, str] = {}
        self._warnings: deque[str] = deque(maxlen=50)
        self._server_info: dict[str, Any] | None = None
        self._pending_since: tuple[Failure, float] | None = None

    # ------------------------------------------------------------ listeners and state

    def add_listener(self, fn: Callable[[SessionEvent], None]) -> None:
        self._listeners.append(fn)

    def remove_listener(self, fn: Callable[[SessionEvent], None]) -> None:
        if fn in self._listeners:
            self._listeners.remove(fn)

    def _emit(self, event: SessionEvent) -> None:
        for fn in list(self._listeners):
            try:
                fn(event)
            except Exception:  # a broken listener must not break the session
                continue

    def _set_server(self, **changes: Any) -> None:
        new = dataclasses.replace(self.server, **changes)
        if new != self.server:
            self.server = new
            self._emit(ServerChanged(new))

    def _notice(self, message: str, severity: Literal["information", "warning", "error"] = "information") -> None:
        self._emit(Notice(message, severity))

    def _check_writable(self, what: str) -> None:
        if self.readonly:
            raise ReadOnlyError(f"read-only session: refusing to {what} (started with --readonly)")

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ------------------------------------------------------------ host and connection

    def _make_host(self) -> Any:
        if self.profile.local:
            from eagle3_tui.remote.local import LocalHost

            return LocalHost()
        from eagle3_tui.remote.ssh import SSHHost

        return SSHHost(
            self.profile.target,
            accept_new_host_key=self.profile.accept_new_host_key,
            python=self.profile.remote_python or "python3",
            config=[os.path.expanduser(self.profile.ssh_config)] if self.profile.ssh_config else None,
        )

    def _on_conn_state(self, state: Any) -> None:
        kind = state.kind
        if self.profile.local and kind == "connected":
            view = ConnView("local")
        elif kind == "closed":
            view = ConnView("failed", reason=state.reason or "closed")
        else:
            view = ConnView(kind, attempt=state.attempt, next_try_s=state.wait_s or None, reason=state.reason or None)
        if view != self.conn:
            self.conn = view
            self._emit(ConnectionChanged(view))

    async def _connect(self) -> None:
        if self.host is None:
            self.host = self._make_host()
        self._remove_state_listener = self.host.add_state_listener(self._on_conn_state)
        try:
            await self.host.connect()
        except UserError as err:
            self.conn = ConnView("failed", reason=str(err))
            self._emit(ConnectionChanged(self.conn))
            raise
        self._on_conn_state(self.host.state)

    # ------------------------------------------------------------ attach

    async def attach(self) -> None:
        """Connect, discover the server, follow its log, poll /server_info, gather the doctor's facts."""
        if self._attached:
            return
        await self._connect()
        self._attached = True
        await self.refresh_servers()
        if self._spec is None:
            self._spec = self._spec_from_profile_or_state()
            if self._spec is not None:
                self._set_server(state="stopped", port=self._spec.port, log_path=self._spec.log_path,
                                 argv=self._spec.argv, message="no server running; start one with the launch command")
        await self._read_launch_facts()  # the profile's draft/target paths serve when nothing runs
        if self.server.state == "ready" and self.server.pgid:
            with contextlib.suppress(UserError):
                if not await (await self.client()).health(timeout=5):
                    self._set_server(state="starting", message="attached while the server loads")
        if self.server.log_path:
            self._start_follow(self.server.log_path, start="end", last_lines=200)
        self._start_poll()
        await self.refresh_findings()
        self._load_baseline()

    async def refresh_servers(self) -> list[ServerProcess]:
        """Look at the process table again; pick the profile's port, or the only server."""
        self.servers = await discover_servers(self.host, log_path=self.profile.log_path)
        chosen: ServerProcess | None = None
        want = self._wanted_port()
        if want is not None:
            chosen = next((s for s in self.servers if s.port == want), None)
        elif len(self.servers) == 1:
            chosen = self.servers[0]
        elif self.servers:
            self._notice(
                "several SGLang servers run here ("
                + "; ".join(s.label for s in self.servers)
                + "): pick one (or set the port in the profile)",
                "warning",
            )
        if chosen is not None:
            self._adopt(chosen)
        elif self.server.state in ("unknown", "ready"):
            gone = not self.servers or want is not None
            self._set_server(state="stopped" if gone else "unknown", pid=None, pgid=None)
        return self.servers

    def _wanted_port(self) -> int | None:
        """The profile's port, else the port of its launch command: that server or none."""
        if self.profile.port is not None:
            return self.profile.port
        if self.profile.launch_command:
            with contextlib.suppress(UserError):
                return launch.parse_launch(self.profile.launch_command).port or DEFAULT_PORT
        return None

    async def select_server(self, pid: int) -> None:
        """Attach to one of several discovered servers."""
        found = next((s for s in self.servers if s.pid == pid), None)
        if found is None:
            raise UserError(f"no SGLang server with pid {pid} on this host")
        self._adopt(found)
        await self._read_launch_facts()
        if self.server.log_path:
            self._start_follow(self.server.log_path, start="end", last_lines=200)
        await self.refresh_findings()

    def _adopt(self, proc: ServerProcess) -> None:
        spec = proc.spec()
        if spec.log_path is None:
            spec = dataclasses.replace(spec, log_path=self.profile.log_path)
        self._spec = spec
        self._save_launch(spec)
        self._set_server(state="ready", pid=proc.pid,
                         pgid=proc.pgid, started_at=proc.start_time, port=spec.port, log_path=spec.log_path,
                         argv=spec.argv, kind=proc.kind, message="")
        self._update_effective()

    def _spec_from_profile_or_state(self) -> LaunchSpec | None:
        saved = self._load_launch()
        if saved is not None:
            return saved
        cmd = self.profile.launch_command
        if not cmd:
            return None
        spec = LaunchSpec.from_argv(cmd, cwd=self.profile.launch_cwd, env=self.profile.launch_env,
                                    log_path=self.profile.log_path)
        if spec.log_path is None:
            spec = dataclasses.replace(spec, log_path=default_log_path(spec.port))
        return spec

    def _update_effective(self) -> None:
        if self._spec is None:
            return
        try:
            args = launch.parse_launch(self._spec.argv)
        except UserError:
            return
        eff = launch.effective(args, target_arch=self.target.arch)
        self.telemetry.num_steps = eff.steps
        ids = None
        boundaries = None
        if self.target.draft_text is not None:
            from eagle3_tui.eagle.draft_config import DraftConfig

            try:
                cfg = DraftConfig.parse(self.target.draft_text)
                ids = cfg.sglang_layer_ids
                if self.target.num_layers:
                    boundaries = cfg.served_boundaries(self.target.num_layers)
            except UserError:
                pass
        self._set_server(
            speculative=eff.speculative,
            algorithm=eff.algorithm,
            steps=eff.steps,
            topk=eff.topk,
            draft_tokens=eff.draft_tokens,
            requested_draft_tokens=args.num_draft_tokens,
            adjusted=tuple(eff.adjusted),
            layer_ids=ids,
            boundaries=boundaries,
            active_preset=self._active_preset_name(ids, args),
        )

    def _active_preset_name(self, ids: tuple[int, ...] | None, args: launch.LaunchArgs) -> str | None:
        if not args.speculative:
            return NO_SPEC_PRESET
        for p in self.presets():
            if p.kind == "layers" and p.layer_ids == ids:
                return p.name
        return None

    async def _read_launch_facts(self) -> None:
        """Draft config, target config, checkpoint header, embed-capture support (all best effort)."""
        from eagle3_tui.session import facts as session_facts

        try:
            self.target = await session_facts.read_target(self.host, self._spec, self.profile)
        except UserError as err:
            self._notice(str(err), "warning")
        self._update_effective()

    # ------------------------------------------------------------ log following

    def _start_follow(self, path: str, *, start: Literal["end", "begin"], last_lines: int = 0) -> None:
        if self._follow_task is not None and self._follow_path == path and not self._follow_task.done():
            return
        if self._follow_task is not None:
            self._follow_task.cancel()
        self._follow_path = path
        self._follow_task = self._spawn(self._follow(path, start, last_lines))

    async def _follow(self, path: str, start: Literal["end", "begin"], last_lines: int) -> None:
        from eagle3_tui.remote.host import FollowBatch, FollowEvent

        cursor = None
        while not self._closed:
            try:
                async with self.host.follow(path, cursor, start=start, last_lines=last_lines) as fol:
                    async for item in fol:
                        if isinstance(item, FollowBatch):
                            cursor = item.cursor
                            self._ingest_lines(item.lines)
                        elif isinstance(item, FollowEvent) and item.kind in ("rotated", "truncated", "opened"):
                            if item.kind != "opened":
                                self._reader = LogReader()
                            # lines from here on come from the newest launch's log file
                            self._log_epoch = self._launch_epoch
                return
            except asyncio.CancelledError:
                raise
            except UserError as err:
                self._notice(f"log follow of {path}: {err}; retrying", "warning")
                await asyncio.sleep(2.0)

    def _ingest_lines(self, lines: list[str]) -> None:
        events: list[LogEvent] = []
        for line in lines:
            self._recent.append(line)
            events.extend(self._reader.feed(line))
        self._handle_events(list(lines), events)

    def _flush_if_quiet(self, *, force: bool = False) -> None:
        """A failure is held until the next record; when the log goes quiet, deliver it anyway."""
        pending = self._reader.pending
        if pending is None:
            self._pending_since = None
            return
        now = time.monotonic()
        if self._pending_since is None or self._pending_since[0] is not pending:
            self._pending_since = (pending, now)
        if force or now - self._pending_since[1] >= QUIET_FLUSH_S:
            self._pending_since = None
            self._handle_events([], self._reader.flush())

    def _handle_events(self, lines: list[str], events: list[LogEvent]) -> None:
        now = time.time()
        stats = False
        for ev in events:
            if isinstance(ev, DecodeStats):
                self.telemetry.ingest(ev, now)
                stats = True
            elif isinstance(ev, ServerReady):
                self._ready_epoch = self._log_epoch
            elif isinstance(ev, Failure):
                self._failure = ev
                self._failure_epoch = self._log_epoch
                if not self._restarting and self.server.state == "ready":
                    self._notice(f"server log: {ev.kind}: {ev.last_line}", "error")
            elif isinstance(ev, ServerArgs):
                self._server_args = dict(ev.args)
            elif isinstance(ev, ServerWarning):
                self._warnings.append(ev.message)
        if lines or events:
            self._emit(LogBatch(lines, events))
        if stats:
            self._emit(StatsUpdated())

    def recent_log(self, n: int = LOG_TAIL_LINES) -> list[str]:
        return list(self._recent)[-n:]

    # ------------------------------------------------------------ HTTP

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
            self._client = SGLangClient(f"http://127.0.0.1:{local}", timeout=120.0)
            self._client_port = port
        return self._client

    def _start_poll(self) -> None:
        if self._poll_task is None or self._poll_task.done():
            self._poll_task = self._spawn(self._poll_loop())

    async def _poll_loop(self) -> None:
        last = 0.0
        seen_lines = -1
        while not self._closed:
            self._flush_if_quiet()
            now = time.monotonic()
            if now - last >= POLL_INTERVAL_S and not self._restarting:
                last = now
                await self._poll_once()
                if self.telemetry.decode_lines != seen_lines:  # live numbers feed some rules
                    seen_lines = self.telemetry.decode_lines
                    with contextlib.suppress(Exception):
                        await self.refresh_findings(quiet=True)
            await asyncio.sleep(0.5)

    async def _poll_once(self) -> None:
        """Ready: read /server_info. Attached while it loads ("starting"): ready once /health answers."""
        state = self.server.state
        with contextlib.suppress(UserError):
            if state == "ready":
                try:
                    await self.poll_server_info()
                except UserError:
                    await self._check_still_running()
                    raise
            elif state == "starting" and self.server.pgid and await (await self.client()).health(timeout=10):
                self._set_server(state="ready", message="")
                await self.poll_server_info()

    async def _check_still_running(self) -> None:
        """The server stopped answering: if its process group is gone, it is `failed`, with the log tail."""
        pgid = self.server.pgid
        if pgid is None or self._restarting or await self._group_alive(pgid):
            return
        await self.refresh_servers()
        if self.server.pgid not in (None, pgid):  # restarted by someone else: follow the new one
            self._notice(f"the server was restarted outside this session (now pid {self.server.pid})")
            with contextlib.suppress(UserError):
                if not await (await self.client()).health(timeout=5):
                    self._set_server(state="starting", message="restarted outside this session: loading")
                await self._read_launch_facts()
            return
        await asyncio.sleep(0.5)  # let the follower deliver the last lines
        self._flush_if_quiet(force=True)
        f = self._failure
        why = f"{f.kind}: {f.last_line}" if f is not None and self._failure_epoch == self._log_epoch else "no failure line"
        tail = await self._log_tail()
        self._set_server(state="failed", log_tail=tail, message=f"the server exited ({why})")
        self._notice(f"the server (process group {pgid}) exited: {why}", "error")

    async def poll_server_info(self) -> dict[str, Any]:
        """One /server_info read: effective values as the server reports them, accept length."""
        from eagle3_tui.sglang.client import server_accept_length

        c = await self.client()
        info = await c.server_info()
        changes: dict[str, Any] = {"accept_len_server": server_accept_length(info)}
        if isinstance(info.get("version"), str):
            changes["version"] = info["version"]
        for key, name in (("speculative_num_steps", "steps"), ("speculative_eagle_topk", "topk"),
                          ("speculative_num_draft_tokens", "draft_tokens")):
            if isinstance(info.get(key), int):
                changes[name] = info[key]
        self._server_info = info
        self._set_server(**changes)
        return info

    # ------------------------------------------------------------ doctor

    async def refresh_findings(self, *, quiet: bool = False) -> list[Any]:
        """Gather the facts and run the doctor's rules (`quiet`: tell listeners only when they changed)."""
        from eagle3_tui.doctor import diagnose
        from eagle3_tui.session import facts as session_facts

        self.facts = session_facts.build_facts(self)
        findings = list(diagnose(self.facts))
        changed = findings != self.findings
        self.findings = findings
        if changed or not quiet:
            self._emit(FindingsChanged(list(findings)))
        return self.findings

    # ------------------------------------------------------------ presets

    def presets(self) -> list[Preset]:
        current = None
        if self._spec is not None:
            with contextlib.suppress(UserError):
                current = launch.parse_launch(self._spec.argv)
        builtins = builtin_presets(data_slots=self.profile.data_slots, current=current)
        return all_presets(builtins, self.profile.presets, self.target.num_layers)

    async def plan_apply(self, preset_name: str) -> ApplyPlan:
        """What applying the preset would change, validated. Changes nothing."""
        preset = find_preset(self.presets(), preset_name)
        if preset.kind == "flags":
            if self._spec is None:
                raise UserError("no launch command known: attach to a running server or set launch_command in the profile")
            return plan_flags(preset, argv=self._spec.argv, target_arch=self.target.arch)
        path = self.target.draft_config_path
        if path is None:
            raise UserError("the draft config path is unknown (no --speculative-draft-model-path and no draft_path in the profile)")
        before = await self.host.read_text(path)
        self.target.draft_text = before
        return plan_layers(preset, path=path, before=before, num_layers=self.target.num_layers,
                           embed_capture=self.target.embed_capture, fc_num_aux=self.target.fc_num_aux)

    async def apply(self, plan: ApplyPlan) -> None:
        """Validate, write atomically with a backup (or change the launch command), ledger row, restart."""
        self._check_writable(f"apply preset {plan.preset.name!r}")
        self._check_not_restarting()
        if plan.problems:
            raise UserError(f"preset {plan.preset.name!r} cannot be applied: {plan.problems[0]}")
        if self._spec is None:
            raise UserError("no server to restart after the change: none was found and the profile has no launch command")
        self._restarting = True  # from here on a second restart is refused
        try:
            await self._apply_change(plan)
        except BaseException:
            self._restarting = False
            raise
        await self._restart(reason=f"preset {plan.preset.name}")

    async def _apply_change(self, plan: ApplyPlan) -> None:
        undo: dict[str, Any]
        if plan.kind == "layers":
            res = await self.host.write_atomic(plan.path, plan.after.encode("utf-8"), expect_sha256=plan.before_sha256)
            self.target.draft_text = plan.after
            undo = {"kind": "layers", "path": plan.path, "backup_path": res.backup_path, "sha256_after": res.sha256,
                    "preset": plan.preset.name}
        else:
            assert self._spec is not None
            import shlex

            new_argv = tuple(shlex.split(plan.after))
            undo = {"kind": "flags", "argv_before": list(self._spec.argv), "argv_after": list(new_argv),
                    "preset": plan.preset.name}
            self._spec = self._spec.with_argv(new_argv)
            self._save_launch(self._spec)
        self._save_undo(undo)
        self._record("preset", results={"diff": plan.diff, "warnings": plan.warnings},
                     note=f"applied {plan.preset.name}")
        self.telemetry.mark(time.time(), f"preset {plan.preset.name}")
        self._update_effective()

    async def rollback(self) -> None:
        """Undo the last applied preset (the config backup byte for byte, or the previous argv) and restart."""
        self._check_writable("roll back")
        self._check_not_restarting()
        undo = self._load_undo()
        if undo is None:
            raise UserError("nothing to roll back: no preset was applied from this machine")
        self._restarting = True
        try:
            await self._undo_change(undo)
        except BaseException:
            self._restarting = False
            raise
        await self._restart(reason="rollback")

    async def _undo_change(self, undo: dict[str, Any]) -> None:
        if undo["kind"] == "layers":
            backup = undo.get("backup_path")
            if not backup:
                raise UserError(f"no backup of {undo['path']} was made (the file did not exist)")
            data = await self.host.read_bytes(backup)
            current = await self.host.read_bytes(undo["path"])
            import hashlib

            await self.host.write_atomic(undo["path"], data, expect_sha256=hashlib.sha256(current).hexdigest())
            self.target.draft_text = data.decode("utf-8", "replace")
        else:
            if self._spec is None:
                self._spec = self._spec_from_profile_or_state()
            if self._spec is None:
                raise UserError("the launch command to roll back to is unknown")
            self._spec = self._spec.with_argv(undo["argv_before"])
            self._save_launch(self._spec)
        self._clear_undo()
        self._record("rollback", results={}, note=f"rolled back {undo.get('preset')}")
        self.telemetry.mark(time.time(), "rollback")
        self._update_effective()

    # ------------------------------------------------------------ benchmark and check

    async def benchmark(self, *, baseline: bool = False, **opts: Any) -> BenchResult:
        """Benchmark through the HTTP API; record it in the ledger (a baseline sets the reference tok/s)."""
        from eagle3_tui.sglang.client import run_benchmark

        if self.server.state not in ("ready", "unknown"):
            raise UserError(f"the server is {self.server.state}; start it before benchmarking")
        if baseline and self.server.speculative:
            raise UserError(
                "a baseline run needs the server without speculation: apply the "
                f"{NO_SPEC_PRESET!r} preset first (and roll back after)"
            )
        c = await self.client()
        opts.setdefault("flush", not self.readonly)
        try:
            t_start = time.time()
            result = await run_benchmark(c, baseline=baseline,
                                         on_progress=lambda d, t: self._emit(BenchProgress(d, t)), **opts)
            await asyncio.sleep(BENCH_LOG_GRACE_S)  # the follower delivers the window's last lines
            result.accept_len_log = self._log_accept_len(t_start, time.time())
        except UserError as err:
            self._emit(BenchFinished(None, str(err)))
            raise
        if baseline:
            self.telemetry.baseline_tps = result.output_tps
        self.last_bench = result
        self._record("baseline" if baseline else "benchmark", results=self._bench_results(result))
        self.telemetry.mark(time.time(), "baseline" if baseline else "benchmark")
        self._emit(BenchFinished(result, None))
        return result

    def _log_accept_len(self, t0: float, t1: float) -> float | None:
        vals = [v for _, v in self.telemetry.series["accept_len"].window(t0, t1)]
        return sum(vals) / len(vals) if vals else None

    def _bench_results(self, r: BenchResult) -> dict[str, Any]:
        from eagle3_tui.telemetry.metrics import speedup

        d = r.as_dict()
        d["tok_s"] = r.output_tps
        d["speedup"] = None if r.baseline else speedup(r.output_tps, self.telemetry.baseline_tps)
        d["baseline_tps"] = self.telemetry.baseline_tps
        return d

    async def run_check(self, **opts: Any) -> Any:
        """The standalone accuracy check on the host; cancel the task to cancel the job."""
        from eagle3_tui.session import checkjob

        draft = opts.pop("draft_dir", None) or self.profile.draft_path or self._draft_dir()
        data_glob = opts.pop("data_glob", None) or self.profile.data_glob
        if not draft or not data_glob:
            raise UserError("the check needs the draft dir and the data glob (set draft_path and data_glob in the profile)")
        if self.profile.data_slots and "slot_boundaries" not in opts and "data_slots" not in opts:
            opts["data_slots"] = self.profile.data_slots
        if self.server.steps and "steps" not in opts:
            opts["steps"] = self.server.steps  # predict the accept length for the flags being served
        if self.target.num_layers and "num_layers" not in opts:
            opts["num_layers"] = self.target.num_layers
        target_cfg = self.target.extra.get("target_config_path")
        if "target" not in opts and (target_cfg or self.profile.target_path):
            opts["target"] = str(Path(target_cfg).parent) if target_cfg else self.profile.target_path
        if self.profile.remote_python and "python" not in opts:
            opts["python"] = self.profile.remote_python

        def on_event(ev: Any) -> None:
            done = getattr(ev, "done", None)
            total = getattr(ev, "total", None)
            if done is not None and total is not None:
                self._emit(CheckProgress(done, total, getattr(ev, "eta_s", None), getattr(ev, "wiring", None)))

        try:
            report = await checkjob.run_check(self.host, draft_dir=draft, data_glob=data_glob, on_event=on_event, **opts)
        except asyncio.CancelledError:
            self._emit(CheckFinished(None, "cancelled"))
            raise
        except UserError as err:
            self._emit(CheckFinished(None, str(err)))
            raise
        self.check = report
        self._record("check", results=_jsonable(report), note="accuracy check")
        with contextlib.suppress(Exception):
            await self.refresh_findings()
        self._emit(CheckFinished(report, None))
        return report

    def _draft_dir(self) -> str | None:
        if self._spec is None:
            return None
        with contextlib.suppress(UserError):
            return launch.parse_launch(self._spec.argv).draft_model_path
        return None

    # ------------------------------------------------------------ ledger

    def ledger(self) -> Any:
        if self._ledger is None:
            from eagle3_tui.telemetry.ledger import Ledger

            self._ledger = Ledger()
        return self._ledger

    def ledger_rows(self) -> list[Any]:
        return list(self.ledger().rows(host=self.profile.name))

    def config_snapshot(self) -> dict[str, Any]:
        s = self.server
        return {
            "argv": list(self._spec.argv) if self._spec else list(s.argv),
            "env": redact_env(self._spec.env) if self._spec else {},
            "speculative": s.speculative,
            "algorithm": s.algorithm,
            "steps": s.steps,
            "topk": s.topk,
            "draft_tokens": s.draft_tokens,
            "requested_draft_tokens": s.requested_draft_tokens,
            "layer_ids": list(s.layer_ids) if s.layer_ids is not None else None,
            "boundaries": list(s.boundaries) if s.boundaries is not None else None,
            "preset": s.active_preset,
            "baseline_tps": self.telemetry.baseline_tps,
        }

    def _record(self, kind: str, *, results: dict[str, Any], note: str = "") -> None:
        try:
            self.ledger().record(kind, self.profile.name, self.config_snapshot(), results, note)
        except Exception as err:  # the ledger must never break a restart
            self._notice(f"could not write the ledger: {err}", "warning")
            return
        self._emit(LedgerChanged())

    def _load_baseline(self) -> None:
        if self.telemetry.baseline_tps is not None:
            return
        with contextlib.suppress(Exception):
            for row in reversed(self.ledger_rows()):
                if row.kind == "baseline":
                    tps = row.results.get("tok_s") or row.results.get("output_tps")
                    if tps:
                        self.telemetry.baseline_tps = float(tps)
                        return

    # ------------------------------------------------------------ close

    async def close(self) -> None:
        """Stop following and polling; the server keeps running."""
        self._closed = True
        for t in list(self._tasks):
            t.cancel()
        for t in list(self._tasks):
            with contextlib.suppress(BaseException):
                await t
        if self._client is not None:
            with contextlib.suppress(Exception):
                await self._client.aclose()
            self._client = None
        if self._remove_state_listener is not None:
            self._remove_state_listener()
        if self.host is not None and self._own_host:
            with contextlib.suppress(Exception):
                await self.host.close()
        if self._ledger is not None:
            with contextlib.suppress(Exception):
                self._ledger.close()

    async def __aenter__(self) -> Session:
        await self.attach()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _jsonable(obj: Any) -> dict[str, Any]:
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return json.loads(json.dumps(dataclasses.asdict(obj), default=str))
    return {"value": str(obj)}

