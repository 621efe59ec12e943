"""What kind of deployment a found server runs in, read from the host's /proc (pure parsing here).

A server started from a shell with its output in a file is a plain `process`; the console can
relaunch its argv. Others must not be relaunched that way:

- `container` (Docker, Podman, a Kubernetes pod): its mount namespace differs from the host's, its
  cgroup names the engine, its paths are the container's (read through `/proc/<pid>/root`), its output
  is the engine's log, and only the engine (or the pod's controller) may restart it;
- `systemd`: its cgroup is `/system.slice/NAME.service`; systemd restarts it, a command-line change
  is a drop-in;
- `pane` (tmux/screen: stdout on a pty) and `pipe`: no file to follow; HTTP is what there is, and a
  restart (into a log file) happens only when asked.

`classify` turns what was read into a `Deployment`; `detect` (in discovery) does the reading.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from eagle3_tui.errors import UserError

Kind = Literal["process", "container", "systemd", "pane", "pipe"]
Engine = Literal["docker", "podman"]

_HEX64 = r"[0-9a-f]{64}"
# cgroup v2 (systemd driver) and v1 (cgroupfs driver) spellings of a container's cgroup
_DOCKER_CG = re.compile(rf"(?:/docker-({_HEX64})\.scope|/docker/({_HEX64}))")
_PODMAN_CG = re.compile(rf"(?:/libpod-(?:conmon-)?({_HEX64})\.scope|/libpod_parent/libpod-({_HEX64}))")
_KUBE_CG = re.compile(rf"kubepods.*?(?:pod([0-9a-f_-]{{36}}))[^/]*/(?:(?:cri-containerd|crio|docker)-)?({_HEX64})")
_UNIT_CG = re.compile(r"^/system\.slice/(?:[^/]+\.slice/)*([^/]+)\.service(?:/|$)")
_MOUNT_DOCKER = re.compile(rf"/docker/containers/({_HEX64})/")
_MOUNT_PODMAN = re.compile(rf"/overlay-containers/({_HEX64})/userdata/")

#: what each kind refuses, and why (an action missing here is allowed)
_REFUSE: dict[str, dict[str, str]] = {
    "container": {
        "flags": "the container's command line belongs to its image and `docker run`: change it there",
    },
    "pane": {
        "restart": "the server runs in a terminal pane: restarting it would leave the pane; "
                   "restart it into a log file (restart --into-log) to let the console own it",
    },
    "pipe": {
        "restart": "the server writes into a pipe that another program reads: restart it into a log "
                   "file (restart --into-log) to let the console own it",
    },
}
_POD_REFUSE = {
    "restart": "the server runs in a Kubernetes pod: the pod's controller restarts it (delete the pod to "
               "restart it; the console does not)",
    "flags": "the pod's spec sets the command line: change it in the pod's controller",
    "stop": "the pod's controller would start it again: scale or delete the pod instead",
}


INTO_LOG_KINDS = ("pane", "pipe")


@dataclass(frozen=True)
class Deployment:
    """Where and how a server runs. `log`: the file or source followed (None: HTTP only)."""

    kind: Kind = "process"
    engine: Engine | None = None
    id: str | None = None
    nodes: int = 1
    log: str | None = None
    pid: int | None = None
    unit: str | None = None
    pod: str | None = None
    terminal: str | None = None  # "tmux", "screen", or "terminal" for a pane
    source: str | None = None  # followed without a file: "journalctl -u sglang"
    node_rank: int = 0
    dist_init: str | None = None  # --dist-init-addr: where node 0 (the head) waits for the others
    binds: tuple[tuple[str, str], ...] = ()
    """A container's bind mounts as (path in the container, the same directory's path on the host)."""
    node_hosts: tuple[str, ...] = ()
    """The hosts of every node in rank order, the head first (the profile's `nodes`)."""

    def to_json(self) -> dict[str, object]:
        """`doctor --json`'s `deployment` object."""
        return {"kind": self.kind, "engine": self.engine, "id": self.id, "nodes": self.nodes,
                "log": self.log or self.source}

    @property
    def label(self) -> str:
        """For the status bar: "container 3f2a… (docker)", "systemd unit sglang", "tmux pane", "2 nodes"."""
        one = self._one_label
        if self.nodes <= 1:
            return one
        nodes = f"{self.nodes} nodes" + (f" (this is node {self.node_rank})" if self.node_rank
                                         else f": {', '.join(self.node_hosts)}" if self.node_hosts else "")
        return f"{one}, {nodes}" if one else nodes

    @property
    def _one_label(self) -> str:
        if self.kind == "container":
            what = "pod container" if self.pod else "container"
            return f"{what} {(self.id or '?')[:4]}… ({self.engine or 'unknown engine'})"
        if self.kind == "systemd":
            return f"systemd unit {self.unit}"
        if self.kind == "pane":
            return f"{self.terminal or 'terminal'} pane"
        if self.kind == "pipe":
            return "output into a pipe"
        return ""

    def editable_path(self, path: str) -> str:
        """Where a config edit of `path` is written: the host path of the bind mount that holds it.

        A file only in the container's image is refused: an atomic write resolves the real path of
        its target, and `/proc/<pid>/root` resolves to the host's own `/`, so the host's file of that
        name would be the one replaced. (And the image's file is lost with the container anyway.)
        """
        mapped = self.host_path(path)
        if self.kind == "container" and self.pid is not None and mapped.startswith(f"/proc/{self.pid}/root/"):
            raise UserError(f"{path} is inside the container's image, not on a bind mount: an edit there cannot be "
                            "written safely from the host (and would not outlive the container); mount the draft "
                            "directory into the container (docker run -v) and attach again")
        return mapped

    @property
    def owner(self) -> str | None:
        """Who restarts the server when not this console (kept with the remembered launch)."""
        if self.kind == "container":
            return f"pod:{self.id}" if self.pod else f"{self.engine or 'unknown'}:{self.id}"
        if self.kind == "systemd":
            return f"systemd:{self.unit}"
        return None

    @classmethod
    def from_owner(cls, owner: str, *, log: str | None = None) -> Deployment:
        """The deployment a remembered launch's owner names (its process is not running now)."""
        who, _, ident = owner.partition(":")
        if who == "systemd":
            return cls("systemd", None, ident, log=log, unit=ident)
        if who == "pod":
            return cls("container", None, ident, log=log, pod="?")
        engine: Engine | None = "docker" if who == "docker" else "podman" if who == "podman" else None
        return cls("container", engine, ident or None, log=log)

    @property
    def restarts_into_log(self) -> bool:
        """A server in a terminal pane or a pipe: offered a restart detached into a log file."""
        return self.kind in INTO_LOG_KINDS

    def check(self, action: str, *, into_log: bool = False) -> None:
        """Raise the reason `action` cannot be done safely here (nothing when it can)."""
        if into_log:
            if not self.restarts_into_log:
                raise UserError(f"restart --into-log is for a server in a terminal pane or a pipe; this one is a {self.kind}")
            return
        why = self.refusal(action)
        if why is None and action == "flags":  # a flag preset is applied by a restart
            why = self.refusal("restart")
        if why is not None:
            raise UserError(f"{self.label or self.kind}: {why}")

    def refusals(self) -> dict[str, str]:
        """Every action refused here, with its reason (for disabling them in the UI)."""
        return {a: why for a in ("restart", "stop", "flags") if (why := self.refusal(a)) is not None}

    def refusal(self, action: str) -> str | None:
        """Why `action` ("restart", "stop", "flags") cannot be done safely here; None when it can."""
        if self.nodes > 1 and action in ("restart", "stop", "flags"):
            return self._nodes_refusal(action)
        if self.kind == "container" and self.pod:
            return _POD_REFUSE.get(action)
        if self.kind == "container" and (self.engine is None or self.id is None) and action in ("restart", "stop"):
            return ("the server runs in its own mount namespace but no container engine was found for it: "
                    "restart it with what started it")
        return _REFUSE.get(self.kind, {}).get(action)

    def _nodes_refusal(self, action: str) -> str | None:
        """Several nodes restart together, from the head, when each is a plain process (deploy/nodes.py)."""
        if self.node_rank > 0:
            return (f"this is node {self.node_rank} of {self.nodes}: every node is stopped and started together, "
                    f"from the head; attach to node 0 (at {self.dist_init or '?'}) to restart them all")
        if self.kind != "process":
            return (f"the server spans {self.nodes} nodes and runs as a {self.kind}: the console restarts "
                    "several nodes only when each is a plain process")
        if len(self.node_hosts) != self.nodes:
            return (f"the server spans {self.nodes} nodes but the profile names {len(self.node_hosts)} node hosts: "
                    f"set nodes = [...] to the {self.nodes} hosts in node-rank order, the head first")
        if action == "flags":
            return (f"a flag preset would change the head's command line alone, and all {self.nodes} nodes must "
                    "run the same flags: change every node's command line, then restart")
        return None

    def host_path(self, path: str) -> str:
        """`path` as the server sees it, reachable from the host: a container's through the bind mount
        that holds it (a path that outlives the process), else through /proc/<pid>/root."""
        if self.kind != "container" or not path.startswith("/"):
            return path
        for inside, outside in sorted(self.binds, key=lambda b: -len(b[0])):
            if path == inside or path.startswith(inside.rstrip("/") + "/"):
                return outside.rstrip("/") + path[len(inside.rstrip("/")):]
        if self.pid is None:
            return path
        prefix = f"/proc/{self.pid}/root"
        return path if path.startswith(prefix + "/") else prefix + path


@dataclass(frozen=True)
class ProcView:
    """What the host's /proc says about one server process (the input of `classify`)."""

    pid: int
    cgroup: str = ""
    mountinfo: str = ""
    own_mount_ns: bool = True  # the same mount namespace as the host's
    stdout: str = ""  # readlink of fd 1 ("/dev/pts/3", "pipe:[123]", "/var/log/x.log", "socket:[9]")
    stderr: str = ""
    terminal: str | None = None  # from the environment: "tmux" (TMUX), "screen" (STY)


def cgroup_paths(text: str) -> list[str]:
    """The cgroup paths of /proc/<pid>/cgroup (`hierarchy:controllers:path` per line)."""
    return [line.split(":", 2)[2] for line in text.splitlines() if line.count(":") >= 2]


def container_from_cgroup(text: str) -> tuple[Engine | None, str | None, str | None]:
    """(engine, container id, pod uid) from the cgroup paths; all None when none names a container."""
    for path in cgroup_paths(text):
        m = _KUBE_CG.search(path)
        if m:
            return ("docker" if "/docker-" in path or "/docker/" in path else None), m.group(2), m.group(1)
        m = _DOCKER_CG.search(path)
        if m:
            return "docker", m.group(1) or m.group(2), None
        m = _PODMAN_CG.search(path)
        if m:
            return "podman", m.group(1) or m.group(2), None
    return None, None, None


def container_from_mountinfo(text: str) -> tuple[Engine | None, str | None]:
    """(engine, id) from the engine's per-container files bind-mounted in (hostname, resolv.conf)."""
    for line in text.splitlines():
        fields = line.split()
        root = fields[3] if len(fields) > 4 else ""
        m = _MOUNT_DOCKER.search(root)
        if m:
            return "docker", m.group(1)
        m = _MOUNT_PODMAN.search(root)
        if m:
            return "podman", m.group(1)
    return None, None


def systemd_unit(text: str) -> str | None:
    """The system unit from the cgroup (`0::/system.slice/sglang.service` -> "sglang")."""
    for path in cgroup_paths(text):
        m = _UNIT_CG.match(path)
        if m:
            return m.group(1)
    return None


def output_kind(target: str) -> Literal["file", "pane", "pipe", "other"]:
    """What an fd's readlink names: a regular file, a terminal, a pipe, or something else (socket, null)."""
    t = target.strip()
    if t.startswith(("/dev/pts/", "/dev/tty")):
        return "pane"
    if t.startswith("pipe:"):
        return "pipe"
    if t.startswith("/") and not t.startswith("/dev/") and not t.endswith(" (deleted)"):
        return "file"
    return "other"


def classify(view: ProcView) -> Deployment:
    """The deployment `view` shows: container first, then systemd unit, then where the output goes."""
    engine, cid, pod = container_from_cgroup(view.cgroup)
    if cid is None:
        engine, cid = container_from_mountinfo(view.mountinfo)
    if cid is not None or not view.own_mount_ns:
        return Deployment("container", engine, cid, pid=view.pid, pod=pod)
    unit = systemd_unit(view.cgroup)
    if unit is not None:
        return Deployment("systemd", None, unit, pid=view.pid, unit=unit)
    out = output_kind(view.stdout)
    if out == "pane" or (out != "file" and output_kind(view.stderr) == "pane"):
        return Deployment("pane", pid=view.pid, terminal=view.terminal or "terminal")
    if out == "pipe":
        return Deployment("pipe", pid=view.pid)
    return Deployment("process", pid=view.pid)


def _mounts(text: str) -> list[tuple[str, str, str]]:
    """(major:minor, root within the filesystem, mount point) per mountinfo line (octal escapes decoded)."""
    out = []
    for line in text.splitlines():
        f = line.split()
        if len(f) > 4:
            out.append((f[2], _unescape(f[3]), _unescape(f[4])))
    return out


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def bind_mounts(container: str, host: str) -> tuple[tuple[str, str], ...]:
    """The container's mounts whose directory the host also has mounted: (container path, host path).

    A mount of the container shows the root of its source inside the filesystem (field 4); a host
    mount of the same device whose root is above it names where the host sees that directory.
    The container's own root (`/`) is skipped: it is the image, not a bind mount.
    """
    host_mounts = sorted(_mounts(host), key=lambda m: -len(m[1]))  # the closest host mount first
    out: list[tuple[str, str]] = []
    for dev, root, point in _mounts(container):
        if point == "/":
            continue
        for hdev, hroot, hpoint in host_mounts:
            rel = _under(root, hroot)
            if hdev == dev and rel is not None:
                out.append((point, (hpoint.rstrip("/") + rel) or "/"))
                break
    return tuple(out)


def _under(path: str, top: str) -> str | None:
    """`path` relative to `top` ("" or "/rest"), None when it is not under it."""
    if top == "/":
        return "" if path == "/" else path
    if path == top or path.startswith(top + "/"):
        return path[len(top):]
    return None


def json_log_default(engine: Engine | None, cid: str) -> str | None:
    """Where the engine's json-file driver writes, when the engine cannot be asked."""
    if engine == "docker":
        return f"/var/lib/docker/containers/{cid}/{cid}-json.log"
    return None


JOURNAL_LAST_LINES = 200


def journal_argv(unit: str, last_lines: int = JOURNAL_LAST_LINES) -> list[str]:
    """How a unit that logs only to the journal is followed."""
    return ["journalctl", "-u", f"{unit}.service", "-f", "-o", "cat", "-n", str(last_lines), "--no-pager"]


def journal_source(unit: str) -> str:
    """How `doctor --json` and the status bar name what is followed."""
    return f"journalctl -u {unit}"
