"""Find SGLang and vLLM servers on a host from its process table, with what a faithful relaunch needs.

A server is a process group whose leader runs an engine's launch command (`engines.engine_for_launch`:
`python -m sglang.launch_server`, `sglang serve`, the sim server, `vllm serve MODEL`, `python -m
vllm.entrypoints.openai.api_server`). The engine's children (SGLang's scheduler/detokenizer, vLLM's
`VLLM::EngineCore`/`VLLM::Worker`) share the group, so servers are grouped by process group and the oldest
member stands for the group. A relaunch gets the
server's whole environment as its main process has it (`relaunch_env`: /proc/<pid>/environ, less the
few variables the console must change); values whose names look secret are kept for the relaunch but
never shown or saved (`redact_env`, `LaunchSpec.to_json`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from eagle3_tui.engines import ENGINES, Engine, engine_for_launch
from eagle3_tui.errors import UserError
from eagle3_tui.remote.scripts import ENV_NAME
from eagle3_tui.session.host.deployment import (
    Deployment,
    ProcView,
    bind_mounts,
    classify,
    journal_source,
    json_log_default,
)
from eagle3_tui.session.host.hfcache import hub_cache_dir
from eagle3_tui.session.launch import LaunchSpec

if TYPE_CHECKING:
    from eagle3_tui.profile import Profile
    from eagle3_tui.remote.host import Host, ProcessInfo

CONSOLE_CHANGES = frozenset({
    # a terminal multiplexer's markers: the relaunch runs detached, in no pane (discovery reads them as
    # "runs in tmux/screen" and would then refuse the next restart of a server that is not there)
    "TMUX", "TMUX_PANE", "STY", "WINDOW",
    # systemd's hand-over of fds and sockets to the process it started: none of them exists in a relaunch
    "NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "JOURNAL_STREAM",
})
"""What a relaunch does not reproduce of the server's environment, each because it names something
that belonged to the old launch only."""


def relaunch_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The server's environment as a relaunch gets it: all of it (OMP_NUM_THREADS, LD_PRELOAD,
    LD_LIBRARY_PATH, TORCH_*, proxies, caches: whatever the server ran with) but `CONSOLE_CHANGES`
    and names that are not plain identifiers (bash's exported functions, `BASH_FUNC_f%%`: `env`
    cannot be handed them safely)."""
    return {k: v for k, v in environ.items() if k not in CONSOLE_CHANGES and ENV_NAME.fullmatch(k)}


def parse_environ(data: bytes) -> dict[str, str]:
    """/proc/<pid>/environ (NUL-separated NAME=value) to a dict; undecodable bytes replaced."""
    out: dict[str, str] = {}
    for item in data.split(b"\0"):
        if b"=" not in item:
            continue
        k, _, v = item.partition(b"=")
        out[k.decode("utf-8", "replace")] = v.decode("utf-8", "replace")
    return out


def log_path_from_fd_target(target: str) -> str | None:
    """The readlink of /proc/<pid>/fd/1 when it is a regular file (not a pipe, socket, tty)."""
    t = target.strip()
    if t.endswith(" (deleted)") or not t.startswith("/") or t.startswith("/dev/"):
        return None
    return t


@dataclass(frozen=True)
class ServerProcess:
    """One running server (its process group)."""

    pid: int
    pgid: int
    start_time: float | None
    argv: tuple[str, ...]
    cwd: str | None
    env: dict[str, str]
    log_path: str | None
    port: int
    kind: str
    deployment: Deployment = field(default_factory=Deployment)
    engine: str = "sglang"
    """The engine serving (`engines.ENGINES`' name)."""
    hf_cache: str | None = None
    access_log: str | None = None
    """uvicorn's access lines, when stdout is another file than the log (`> access.log 2> server.log`)."""
    note: str = ""
    """One sentence when `argv` is not the process's own (its command line could not be read as a launch)."""

    env_whole: bool = False
    """`env` is the process's whole environment (False: it could not be read, e.g. another user's)."""

    def spec(self) -> LaunchSpec:
        spec = LaunchSpec.from_argv(self.argv, cwd=self.cwd, env=self.env, log_path=self.log_path)
        return replace(spec, owner=self.deployment.owner, hf_cache=self.hf_cache, env_whole=self.env_whole)

    @property
    def label(self) -> str:
        return f"pid {self.pid} port {self.port} ({self.kind})"


def is_server_command(argv: Sequence[str]) -> bool:
    """Whether argv is any engine's launch command."""
    return any(e.is_launch(argv) for e in ENGINES.values())


def group_servers(procs: Sequence[ProcessInfo]) -> list[ProcessInfo]:
    """Pick one process per process group among those running a launch command (the oldest)."""
    groups: dict[int, ProcessInfo] = {}
    for p in procs:
        try:
            if not is_server_command(p.argv):
                continue
        except Exception:  # a weird argv must never break discovery
            continue
        cur = groups.get(p.pgid)
        if cur is None or (p.pid == p.pgid) or (cur.pid != cur.pgid and p.pid < cur.pid):
            groups[p.pgid] = p
    return sorted(groups.values(), key=lambda p: p.pid)


# SGLang's children rename themselves (setproctitle), so their /proc/<pid>/cmdline is the title alone:
# `sglang::scheduler_TP0`, `sglang::detokenizer`, `sglang::data_parallel_controller`,
# `sglang::tokenizer_worker:<pid>`, `sglang::detokenizer_router` (srt/managers/scheduler.py,
# detokenizer_manager.py, data_parallel_controller.py, multi_tokenizer_mixin.py in 0.4.9, 0.5.6, 0.5.12,
# 0.5.23). The main process (HTTP server and tokenizer manager) is never renamed in those releases, and
# the children are spawned (`mp.set_start_method("spawn")`, srt/entrypoints/engine.py) into its group.
# setproctitle also zeroes a renamed process's /proc/<pid>/environ (it moves the environment to make room
# for the title), so the environment is read from an untitled member: the main process.
SGLANG_TITLE_PREFIX = "sglang::"


def sglang_title(argv: Sequence[str]) -> str | None:
    """The SGLang process title a renamed child shows as its command line, else None."""
    first = argv[0].strip() if argv else ""
    return first.split()[0] if first.startswith(SGLANG_TITLE_PREFIX) else None


def engine_title(argv: Sequence[str]) -> tuple[Engine, str] | None:
    """(the engine, the title) when argv is an engine's renamed child (`sglang::scheduler_TP0`,
    `VLLM::EngineCore`: `Engine.process_titles`), else None."""
    first = argv[0].strip() if argv else ""
    title = first.split()[0] if first else ""
    for engine in ENGINES.values():
        if any(title.startswith(stem) for stem in engine.process_titles):
            return engine, title
    return None


def titled_groups(procs: Sequence[ProcessInfo]) -> list[tuple[ProcessInfo, str]]:
    """Process groups where an engine's renamed children run but no member runs a launch command (a
    wrapper script, the Python API): each group's untitled leader (else its oldest untitled member, else
    its oldest) with one child's title."""
    launched = {p.pgid for p in group_servers(procs)}
    members: dict[int, list[ProcessInfo]] = {}
    for p in procs:
        if p.pgid not in launched:
            members.setdefault(p.pgid, []).append(p)
    out: list[tuple[ProcessInfo, str]] = []
    for pgid, group in members.items():
        titles = sorted(t[1] for p in group if (t := engine_title(p.argv)) is not None)
        if not titles:
            continue
        candidates = [p for p in group if engine_title(p.argv) is None] or group
        leader = next((p for p in candidates if p.pid == pgid), None) or min(candidates, key=lambda p: p.pid)
        out.append((leader, titles[0]))
    return sorted(out, key=lambda lt: lt[0].pid)


async def _read_environ(host: Host, pid: int) -> dict[str, str]:
    """The whole environment (empty when it cannot be read: gone, or another user's server)."""
    try:
        data = await host.read_bytes(f"/proc/{pid}/environ")
    except Exception:
        return {}
    return parse_environ(data)


_LINKS = 'for f; do printf "%s\\n" "$(readlink "$f" 2>/dev/null)"; done'


async def _read_text(host: Host, path: str) -> str:
    try:
        return await host.read_text(path)
    except Exception:  # gone, or not readable: that part of the picture stays unknown
        return ""


async def _proc_view(host: Host, pid: int, environ: Mapping[str, str]) -> ProcView:
    """The /proc facts `classify` needs: cgroup, mountinfo, mount namespace, where fds 1 and 2 go."""
    links = ["", "", "", ""]
    with contextlib.suppress(Exception):
        res = await host.run(["sh", "-c", _LINKS, "sh", f"/proc/{pid}/ns/mnt", "/proc/self/ns/mnt",
                              f"/proc/{pid}/fd/1", f"/proc/{pid}/fd/2"], timeout=10)
        links = (res.stdout.splitlines() + links)[:4]
    own_ns = not links[0] or not links[1] or links[0] == links[1]
    terminal = "tmux" if "TMUX" in environ else "screen" if "STY" in environ else None
    return ProcView(pid, await _read_text(host, f"/proc/{pid}/cgroup"),
                    await _read_text(host, f"/proc/{pid}/mountinfo"), own_ns, links[2], links[3], terminal)


_INSPECT_LOG = {"docker": "{{.LogPath}}", "podman": "{{.HostConfig.LogConfig.Path}}"}


async def _engine_log(host: Host, dep: Deployment) -> str | None:
    """The container's log file as its engine says (`docker inspect`), else the engine's default place."""
    if dep.engine is None or dep.id is None:
        return None
    with contextlib.suppress(Exception):
        res = await host.run([dep.engine, "inspect", "--format", _INSPECT_LOG[dep.engine], dep.id], timeout=20)
        out = res.stdout.strip()
        if res.exit_code == 0 and out.startswith("/"):
            return out
    return json_log_default(dep.engine, dep.id)


async def detect_deployment(host: Host, view: ProcView, fd_log: str | None) -> Deployment:
    """Classify the server process (its /proc view), with the log it is followed by (None: only HTTP)."""
    dep = classify(view)
    if dep.kind == "container":
        dep = replace(dep, binds=bind_mounts(view.mountinfo, await _read_text(host, "/proc/self/mountinfo")))
        log = await _engine_log(host, dep)
    else:
        log = fd_log if dep.kind in ("process", "systemd") else None
    if dep.kind == "systemd" and log is None and dep.unit:
        return replace(dep, source=journal_source(dep.unit))
    return replace(dep, log=log)


def output_files(stderr_target: str, stdout_target: str) -> tuple[str | None, str | None]:
    """(the server's own log, uvicorn's access log) from the readlinks of fds 2 and 1.

    SGLang logs to stderr (`configure_logger`'s `basicConfig` has no stream, every release); uvicorn's
    access lines go to stdout. The log is stderr's file, else stdout's (a `2>&1`, or a server that logs
    to stdout); the access log is stdout's file when it is another file than the log (`> access.log
    2> server.log`)."""
    err, out = log_path_from_fd_target(stderr_target), log_path_from_fd_target(stdout_target)
    log = err or out
    return log, out if out is not None and out != log else None


async def _cwd(host: Host, pid: int) -> str | None:
    try:
        res = await host.run(["readlink", f"/proc/{pid}/cwd"], timeout=10)
    except Exception:
        return None
    out = res.stdout.strip()
    return out if res.exit_code == 0 and out.startswith("/") else None


@dataclass(frozen=True)
class Discovery:
    """The servers found, and one sentence for each SGLang process group that could not be used."""

    servers: list[ServerProcess]
    notes: list[str] = field(default_factory=list)


def _recovered_argv(
    leader: ProcessInfo, title: str, launch_command: Sequence[str] | None
) -> tuple[tuple[str, ...] | None, str]:
    """The launch args of a group known only by its children's titles: the profile's command, or None,
    with the sentence that says so."""
    shown = " ".join(leader.argv[:4]) + (" ..." if len(leader.argv) > 4 else "")
    found = engine_title([title])
    name = found[0].label if found is not None else "SGLang"
    head = (f"pid {leader.pid} runs {name} (its children are titled {title}) but its command line {shown!r} "
            f"is not {name}'s launch command, so the server's launch args cannot be read")
    if launch_command:
        with contextlib.suppress(UserError):
            engine_for_launch(launch_command).parse_launch(launch_command)
            return tuple(launch_command), f"{head}: using the profile's launch_command"
    return None, f"{head}: set launch_command in the profile"


async def _server(host: Host, p: ProcessInfo, argv: Sequence[str], log_path: str | None, note: str) -> ServerProcess:
    engine = engine_for_launch(argv)
    launch = engine.parse_launch(argv)
    cwd = p.cwd or await _cwd(host, p.pid)
    environ = await _read_environ(host, p.pid)
    view = await _proc_view(host, p.pid, environ)  # fds 1 and 2 read once, for the log and the deployment
    fd_log, fd_access = output_files(view.stderr, view.stdout)
    dep = await detect_deployment(host, view, fd_log)
    dep = replace(dep, log=log_path or dep.log, nodes=launch.nodes, node_rank=launch.node_rank,
                  dist_init=launch.dist_init)
    access = fd_access if dep.kind in ("process", "systemd") and fd_access != dep.log else None
    return ServerProcess(pid=p.pid, pgid=p.pgid, start_time=p.start_time, argv=tuple(argv), cwd=cwd,
                         env=relaunch_env(environ), log_path=dep.log, port=launch.port or engine.default_port,
                         kind=launch.native.kind, deployment=dep, engine=engine.name, hf_cache=hub_cache_dir(environ), note=note,
                         access_log=access, env_whole=bool(environ))


async def discover(
    host: Host, *, log_path: str | None = None, launch_command: Sequence[str] | None = None
) -> Discovery:
    """All servers on the host, oldest pid first. `log_path` (the profile's) wins over /proc; the
    profile's `launch_command` stands for a server whose own command line is not a launch command
    (only its children's titles show it is one)."""
    procs = await host.processes()
    out: list[ServerProcess] = []
    notes: list[str] = []
    for p in group_servers(procs):
        with contextlib.suppress(Exception):
            out.append(await _server(host, p, p.argv, log_path, ""))
    for leader, title in titled_groups(procs):
        argv, note = _recovered_argv(leader, title, launch_command)
        if argv is None:
            notes.append(note)
            continue
        with contextlib.suppress(Exception):
            out.append(await _server(host, leader, argv, log_path, note))
    return Discovery(sorted(out, key=lambda s: s.pid), notes)


async def discover_servers(host: Host, *, log_path: str | None = None) -> list[ServerProcess]:
    """All servers on the host whose own command line is a launch command, oldest pid first."""
    found = await discover(host, log_path=log_path)
    return [s for s in found.servers if not s.note]


def rotated_name(path: str, stamp: str) -> str:
    """`server.log` -> `server.log.20260101-120000` (the name a rotated log gets)."""
    return f"{path}.{stamp}"


def default_log_path(port: int) -> str:
    """Where a relaunch logs when the server's stdout was not a file (a tmux pane, a pipe)."""
    return str(Path("/tmp") / f"eagle3-tui-sglang-{port}.log")


def wanted_port(profile: Profile) -> int | None:
    """The profile's port, else the port of its launch command: that server or none."""
    if profile.port is not None:
        return profile.port
    if profile.launch_command:
        with contextlib.suppress(UserError):
            engine = engine_for_launch(profile.launch_command)
            return engine.parse_launch(profile.launch_command).port or engine.default_port
    return None


def pick_server(servers: Sequence[ServerProcess], want: int | None) -> ServerProcess | None:
    """The server on the wanted port (the head, when several nodes share a host), else the only one;
    None when there is none or several."""
    if want is not None:
        on_port = [s for s in servers if s.port == want]
        return next((s for s in on_port if s.deployment.node_rank == 0), on_port[0] if on_port else None)
    return servers[0] if len(servers) == 1 else None


def spec_from_profile(profile: Profile) -> LaunchSpec | None:
    """The profile's launch command as a launch (logging to the default log when it names none)."""
    cmd = profile.launch_command
    if not cmd:
        return None
    spec = LaunchSpec.from_argv(cmd, cwd=profile.launch_cwd, env=profile.launch_env, log_path=profile.log_path)
    if spec.log_path is None:
        spec = replace(spec, log_path=default_log_path(spec.port))
    return spec


def with_log_path(spec: LaunchSpec, profile_log: str | None) -> LaunchSpec:
    """The spec with a log file: its own, else the profile's, else the default for its port."""
    if spec.log_path is not None:
        return spec
    return replace(spec, log_path=profile_log or default_log_path(spec.port))
