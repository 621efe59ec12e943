"""A server in a "container": discovery, the engine's json-file log followed, the draft config edited as
the container sees it, and the restart through the engine, never a relaunch on the host.

No container engine runs in CI, so the container is made of what one is made of: a sim server in its
own mount and PID namespace (`unshare --mount --pid --fork`), where the draft lives under a path that
on the host is an empty directory (a bind mount only the namespace sees), with the engine's
per-container `hostname` file bind-mounted in (as Docker does: that is how its id shows in
mountinfo), and its output written by a shim in Docker's json-file format. `docker` on PATH is a
fake that records every call, answers `inspect` with the log path and restarts the namespaced server.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from eagle3_tui.errors import UserError
from eagle3_tui.profile import Profile
from eagle3_tui.session import Session
from eagle3_tui.session.events import RestartFailed
from eagle3_tui.session.presets.catalog import DEFAULT_PRESET
from tests.plugins.world import SPEC_ARGS, free_port, make_draft_dir

CID = "3f2a9c" + "e" * 58

SHIM = textwrap.dedent('''
    """Docker's json-file driver in small: one JSON record per line of the server's output."""
    import datetime, json, sys
    with open(sys.argv[1], "a", buffering=1) as out:
        for line in sys.stdin:
            now = datetime.datetime.now(datetime.timezone.utc).isoformat()
            out.write(json.dumps({"log": line, "stream": "stderr", "time": now}) + "\\n")
''')

# start | stop the "container" (used by the test and by the fake docker)
CTRL = textwrap.dedent('''
    import json, os, signal, subprocess, sys, time
    cfg = json.load(open(sys.argv[2]))
    def stop():
        try:
            pgid = int(open(cfg["pgid"]).read())
        except (OSError, ValueError):
            return
        try:
            os.killpg(pgid, signal.SIGTERM)
        except ProcessLookupError:
            return
        for _ in range(150):
            try:
                os.killpg(pgid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.1)
        os.killpg(pgid, signal.SIGKILL)
    def start():
        inner = ('mount --bind "$1" "$2" && mount --bind "$3" "$4" || exit 97\\n'
                 'd="$5" py="$6" shim="$7" log="$8"; shift 8\\n'
                 'cd "$d" && "$py" -u -m eagle3_tui.sim.server "$@" 2>&1 | "$py" "$shim" "$log"')
        argv = ["unshare", "--mount", "--pid", "--fork", "--kill-child", "sh", "-c", inner, "sh",
                cfg["files"], cfg["view"], cfg["hostname_src"], cfg["hostname_dst"], cfg["cwd"],
                sys.executable, cfg["shim"], cfg["log"]]
        p = subprocess.Popen(argv + cfg["args"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        open(cfg["pgid"], "w").write(str(p.pid))
    {"start": start, "stop": stop}[sys.argv[1]]()
''')

FAKE_DOCKER = textwrap.dedent('''\
    #!/bin/sh
    # A FAKE docker (no container engine runs in CI): records each call, answers inspect, restarts the
    # namespaced sim server for restart, stops it for stop.
    echo "$*" >> "{calls}"
    case "$1" in
      inspect) [ "$4" = "{cid}" ] && echo "{log}" && exit 0; echo "Error: No such object: $4" >&2; exit 1 ;;
      restart) [ -e "{fail}" ] && {{ echo "Error response from daemon: cannot restart container $2" >&2; exit 1; }}
               "{py}" "{ctrl}" stop "{cfg}" && "{py}" "{ctrl}" start "{cfg}" ;;
      stop) "{py}" "{ctrl}" stop "{cfg}" ;;
      *) echo "fake docker: unsupported: $*" >&2; exit 2 ;;
    esac
''')


def _unshare_works() -> str | None:
    if os.geteuid() != 0:
        return "needs root (mount namespaces and bind mounts)"
    if shutil.which("unshare") is None:
        return "no unshare(1) here"
    res = subprocess.run(["unshare", "--mount", "--pid", "--fork", "true"], capture_output=True, timeout=20)
    return None if res.returncode == 0 else f"unshare --mount --pid --fork fails here: {res.stderr.decode()[-200:]}"


@pytest.fixture
def container(demo_world: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    why = _unshare_works()
    if why:
        pytest.skip(why)
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    files = tmp_path / "container-files"  # the container's /models, as the host holds it
    make_draft_dir(demo_world, files / "draft", layer_ids=[0, 1, 2])
    view = tmp_path / "models"  # the path the server is given: empty on the host
    view.mkdir()
    cdir = tmp_path / "var" / "lib" / "docker" / "containers" / CID
    cdir.mkdir(parents=True)
    (cdir / "hostname").write_text("3f2a9c\n")
    (tmp_path / "etc-hostname").write_text("")
    log = cdir / f"{CID}-json.log"
    port = free_port()
    args = ["--model-path", str(demo_world.target_dir), "--speculative-draft-model-path", str(view / "draft"),
            *SPEC_ARGS, "--sim-background-load", "1", "--host", "127.0.0.1", "--port", str(port)]
    cfg = {"files": str(files), "view": str(view), "hostname_src": str(cdir / "hostname"),
           "hostname_dst": str(tmp_path / "etc-hostname"), "cwd": str(tmp_path), "shim": str(tmp_path / "shim.py"),
           "log": str(log), "pgid": str(tmp_path / "container.pgid"), "args": args}
    (tmp_path / "shim.py").write_text(SHIM)
    (tmp_path / "ctrl.py").write_text(CTRL)
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "docker-calls"
    calls.write_text("")
    fake = bindir / "docker"
    fake.write_text(FAKE_DOCKER.format(calls=calls, cid=CID, log=log, py=sys.executable, ctrl=tmp_path / "ctrl.py",
                                       cfg=tmp_path / "cfg.json", fail=tmp_path / "fail-restart"))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    ctrl = [sys.executable, str(tmp_path / "ctrl.py")]
    subprocess.run([*ctrl, "start", str(tmp_path / "cfg.json")], check=True, timeout=30)
    try:
        yield {"port": port, "files": files, "view": view, "log": log, "calls": calls, "tmp": tmp_path,
               "ctrl": [*ctrl, "stop", str(tmp_path / "cfg.json")]}
    finally:
        subprocess.run([*ctrl, "stop", str(tmp_path / "cfg.json")], timeout=60)


def _wait(cond: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def _ready_in_log(log: Path) -> bool:
    return log.exists() and "ready to roll" in log.read_text(errors="replace")


async def test_container_discovery_follow_edit_and_engine_restart(container: dict[str, Any]) -> None:
    import asyncio

    log: Path = container["log"]
    await asyncio.to_thread(_wait, lambda: _ready_in_log(log), 120, "the namespaced server's ready line")
    profile = Profile(name="ctr", local=True, port=container["port"], state_dir=str(container["tmp"] / "state"),
                      restart_deadline_s=120)
    async with Session(profile) as session:
        dep = session.deployment
        assert (dep.kind, dep.engine, dep.id, dep.log) == ("container", "docker", CID, str(log))
        assert session.server.deployment == "container 3f2a… (docker)"
        assert session.server.log_path == str(log)
        old_pid = session.server.pid
        # following: the json-file records come out as the server's own lines, parsed into decode stats
        for _ in range(300):
            if session.telemetry.series["accept_len"].window(0, time.time() + 1):
                break
            await asyncio.sleep(0.2)
        assert session.telemetry.series["accept_len"].window(0, time.time() + 1), session.recent_log(5)
        assert not any(line.startswith('{"log"') for line in session.recent_log(50))
        # the draft config is read and edited where the container has it (its root), not at the host's path
        assert session.target.draft_text is not None and "eagle_aux_hidden_state_layer_ids" in session.target.draft_text
        plan = await session.presets.plan(DEFAULT_PRESET)
        # the bind mount's host directory, found in the container's mountinfo: a path that outlives the pid
        assert plan.path == str(container["files"] / "draft" / "config.json")
        assert session.deployment.host_path("/etc/os-release") == f"/proc/{old_pid}/root/etc/os-release"
        flags = await session.presets.plan("no-speculation")
        with pytest.raises(UserError, match="docker run"):
            await session.presets.apply(flags)  # the container's command line is not the console's to change
        await session.presets.apply(plan)
        cfg = json.loads((container["files"] / "draft" / "config.json").read_text())
        assert "eagle_config" not in cfg or "eagle_aux_hidden_state_layer_ids" not in cfg["eagle_config"]
        assert not (container["view"] / "draft").exists()  # nothing written at the host's own path
        # the restart went through the engine; the new server is in the container again
        calls = container["calls"].read_text().splitlines()
        assert f"restart {CID}" in calls and not any(c.startswith("run") for c in calls)
        assert session.server.state == "ready" and session.server.pid != old_pid
        assert session.deployment.kind == "container" and session.deployment.pid == session.server.pid
        assert os.readlink(f"/proc/{session.server.pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
        assert not list(container["tmp"].glob("**/.*.pid"))  # no detached launch of the console's own
        # the engine refuses: a clear failure, and still nothing started on the host
        (container["tmp"] / "fail-restart").write_text("")
        running = session.server.pid
        with pytest.raises(RestartFailed, match="docker restart 3f2a9ceeeeee failed: Error response from daemon"):
            await session.control.restart()
        assert session.server.state == "failed" and not any('{"log"' in line for line in session.server.log_tail)
        assert os.path.exists(f"/proc/{running}")  # the engine did nothing; neither did the console
        (container["tmp"] / "fail-restart").unlink()
    # the container stopped; a new session knows only the remembered launch: its engine still starts it
    subprocess.run(container["ctrl"], check=True, timeout=60)
    async with Session(profile) as session:
        assert session.server.state == "stopped" and session.spec is not None
        assert session.spec.owner == f"docker:{CID}"
        await session.control.start()
        assert session.server.state == "ready" and session.deployment.kind == "container"
        assert container["calls"].read_text().splitlines().count(f"restart {CID}") == 3
        assert not list(container["tmp"].glob("**/.*.pid"))
