"""A server run by a systemd unit: found as the unit, restarted by `systemctl restart`, a flag preset written
as a drop-in (what `systemctl cat` merges), `daemon-reload` before the restart, a failed reload undone.

No systemd runs in CI: `systemctl` on PATH is a FAKE that records every call and does what systemd
would for these few verbs (merge ExecStart from the unit and its drop-ins, start it with the unit's
StandardOutput=append: file, in the unit's cgroup, answer MainPID). The unit's cgroup is real: a
directory in the cgroup v1 `name=systemd` hierarchy, so /proc/<pid>/cgroup says `/system.slice/UNIT.service`.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest

from eagle3_tui.profile import Profile
from eagle3_tui.remote.local import LocalHost
from eagle3_tui.session import Session
from eagle3_tui.session.deploy import systemd as deploy_systemd
from eagle3_tui.session.deploy.systemd import (
    SystemdRestart,
    effective_exec_start,
    quote_exec_arg,
    unquote_exec,
)
from eagle3_tui.session.events import ConnView, RestartFailed, ServerView
from eagle3_tui.session.host.deployment import Deployment
from eagle3_tui.session.restart.strategy import Parts
from eagle3_tui.session.views import Views
from tests.plugins.world import SPEC_ARGS, free_port

CGROOT = Path("/sys/fs/cgroup/systemd")

FAKE = textwrap.dedent('''\
    #!{py}
    """A FAKE systemctl (no systemd in CI): records calls; restart/stop/show/daemon-reload/cat for one unit dir."""
    import json, os, signal, subprocess, sys, time
    from pathlib import Path
    cfg = json.load(open({cfg!r}))
    open(cfg["calls"], "a").write(" ".join(sys.argv[1:]) + "\\n")
    verb, unit = sys.argv[1], sys.argv[-1]
    unit_dir = Path(cfg["unit_dir"])
    pidfile = Path(cfg["pidfile"])
    def texts():
        yield (unit_dir / f"{{unit}}.service").read_text()
        d = unit_dir / f"{{unit}}.service.d"
        for f in sorted(d.glob("*.conf")) if d.is_dir() else ():
            yield f.read_text()
    def exec_start():
        value = None
        for text in texts():
            for line in text.splitlines():
                if line.startswith("ExecStart="):
                    value = line[len("ExecStart="):] or None
        import shlex
        return [w.replace("%%", "%").replace("$$", "$") for w in shlex.split(value)]
    def stop():
        if not pidfile.exists():
            return
        pid = int(pidfile.read_text())
        try:
            os.killpg(pid, signal.SIGTERM)
        except ProcessLookupError:
            return
        for _ in range(150):
            try:
                os.killpg(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.1)
        else:
            os.killpg(pid, signal.SIGKILL)
        pidfile.unlink()
    def start():
        out = open(cfg["log"], "ab")
        procs = cfg["cgroup"] + "/cgroup.procs"
        p = subprocess.Popen(exec_start(), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                             start_new_session=True, cwd=cfg["cwd"],
                             preexec_fn=lambda: open(procs, "w").write(str(os.getpid())))
        pidfile.write_text(str(p.pid))
    if verb == "daemon-reload":
        sys.exit(1 if Path(cfg["fail_reload"]).exists() else 0)
    elif verb == "restart":
        stop(); start()
    elif verb == "stop":
        stop()
    elif verb == "show":
        print(pidfile.read_text() if pidfile.exists() else "0")
    elif verb == "cat":
        print("\\n".join(texts()))
    else:
        sys.exit(f"fake systemctl: unsupported {{sys.argv[1:]}}")
''')


def _cgroup(unit: str) -> Path | None:
    d = CGROOT / "system.slice" / f"{unit}.service"
    try:
        d.mkdir(parents=True)
    except OSError:
        return None
    return d


@pytest.fixture
def unit(demo_world: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    if os.geteuid() != 0 or not CGROOT.is_dir():
        pytest.skip("needs root and the cgroup v1 name=systemd hierarchy to put the server in a unit's cgroup")
    name = f"e3t-{uuid.uuid4().hex[:8]}"
    cg = _cgroup(name)
    if cg is None:
        pytest.skip(f"cannot create a cgroup under {CGROOT}")
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    unit_dir = tmp_path / "etc-systemd-system"
    unit_dir.mkdir()
    monkeypatch.setattr(deploy_systemd, "UNIT_DIR", str(unit_dir))
    port = free_port()
    log = tmp_path / "sglang.log"
    argv = [sys.executable, "-m", "eagle3_tui.sim.server", "--model-path", str(demo_world.target_dir),
            "--speculative-draft-model-path", str(demo_world.draft_dir), *SPEC_ARGS, "--sim-background-load", "1",
            "--host", "127.0.0.1", "--port", str(port)]
    (unit_dir / f"{name}.service").write_text(
        "[Unit]\nDescription=sim sglang\n[Service]\nExecStart=" + " ".join(quote_exec_arg(a) for a in argv)
        + f"\nStandardOutput=append:{log}\nStandardError=inherit\n")
    cfg = {"calls": str(tmp_path / "calls"), "unit_dir": str(unit_dir), "pidfile": str(tmp_path / "main.pid"),
           "log": str(log), "cgroup": str(cg), "cwd": str(tmp_path), "fail_reload": str(tmp_path / "fail-reload")}
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "systemctl"
    fake.write_text(FAKE.format(py=sys.executable, cfg=str(tmp_path / "cfg.json")))
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    os.system(f"{shlex.quote(str(fake))} restart {name}")
    try:
        yield {"name": name, "port": port, "log": log, "unit_dir": unit_dir, "cfg": cfg, "argv": argv,
               "tmp": tmp_path}
    finally:
        os.system(f"{shlex.quote(str(fake))} stop {name}")
        for leftover in (cg / "cgroup.procs").read_text().split():  # nothing may stay in the unit's cgroup
            os.system(f"kill -KILL {int(leftover)}")
        cg.rmdir()


def _calls(cfg: dict[str, str]) -> list[str]:
    return Path(cfg["calls"]).read_text().splitlines()


def _wait_ready_line(log: Path) -> None:
    import time

    for _ in range(600):
        if log.exists() and "ready to roll" in log.read_text(errors="replace"):
            return
        time.sleep(0.2)
    raise AssertionError("the unit's server did not log its ready line")


async def test_systemd_unit_found_preset_as_dropin_and_rollback(unit: dict[str, Any]) -> None:
    import asyncio

    name, cfg = unit["name"], unit["cfg"]
    await asyncio.to_thread(_wait_ready_line, unit["log"])
    async with Session(Profile(name="u", local=True, port=unit["port"], state_dir=str(unit["tmp"] / "state"),
                               restart_deadline_s=120)) as session:
        dep = session.deployment
        assert (dep.kind, dep.unit, dep.log) == ("systemd", name, str(unit["log"]))
        assert session.server.deployment == f"systemd unit {name}"
        assert dep.to_json() == {"kind": "systemd", "engine": None, "id": name, "nodes": 1, "log": str(unit["log"])}
        plan = await session.presets.plan("no-speculation")
        await session.presets.apply(plan)
        calls = _calls(cfg)
        reload_at = max(i for i, c in enumerate(calls) if c == "daemon-reload")
        assert reload_at < max(i for i, c in enumerate(calls) if c == f"restart {name}")
        dropin = unit["unit_dir"] / f"{name}.service.d" / "eagle3-tui.conf"
        merged = effective_exec_start([(unit["unit_dir"] / f"{name}.service").read_text(), dropin.read_text()])
        assert unquote_exec(merged[-1]) == list(session.server.argv)
        assert "--speculative-algorithm" not in session.server.argv and session.server.state == "ready"
        assert session.deployment.kind == "systemd"  # still the unit's: found again after the restart
        assert not list(unit["tmp"].glob(".*.pid"))  # no detached launch of the console's own
        await session.presets.rollback()
        merged = effective_exec_start([(unit["unit_dir"] / f"{name}.service").read_text(), dropin.read_text()])
        assert unquote_exec(merged[-1]) == unit["argv"] == list(session.server.argv)
        assert session.server.state == "ready" and session.server.speculative


async def test_failed_daemon_reload_puts_the_previous_dropin_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    calls = tmp_path / "calls"
    fake = bindir / "systemctl"
    # a FAKE systemctl whose daemon-reload fails (the new unit text does not parse, say)
    fake.write_text(f'#!/bin/sh\necho "$*" >> {calls}\n[ "$1" = daemon-reload ] && {{ echo "bad unit" >&2; exit 1; }}\nexit 0\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    host = LocalHost()
    parts = Parts(host, Views(ConnView("local"), ServerView()), None, None, 10.0, None)  # type: ignore[arg-type]
    dep = Deployment("systemd", None, "sglang", pid=1, unit="sglang")
    strat = SystemdRestart(parts, dep, ["python", "-m", "sglang.launch_server"], unit_dir=str(tmp_path))
    with pytest.raises(RestartFailed, match="daemon-reload failed: bad unit"):
        await strat.write_dropin(["python", "-m", "sglang.launch_server", "--x"], 0.0)
    d = tmp_path / "sglang.service.d"
    assert not (d / "eagle3-tui.conf").exists()  # there was none: there is none
    (d / "eagle3-tui.conf").write_text("[Service]\nExecStart=\nExecStart=/bin/old\n")
    with pytest.raises(RestartFailed):
        await strat.write_dropin(["python", "-m", "sglang.launch_server", "--y"], 0.0)
    assert (d / "eagle3-tui.conf").read_text() == "[Service]\nExecStart=\nExecStart=/bin/old\n"
    assert calls.read_text().splitlines() == ["daemon-reload"] * 4  # each failed reload, and the one after the undo
    await host.close()
