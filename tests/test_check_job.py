"""The check as a job on a host: LocalHost and a real sshd on 127.0.0.1; cleanup and cancellation."""

from __future__ import annotations

import asyncio
import glob
import os
import tempfile
from pathlib import Path

import pytest

from eagle3_tui.eagle import shipped
from eagle3_tui.errors import UserError
from eagle3_tui.remote.local import LocalHost
from eagle3_tui.session.check import job as checkjob
from tests.bare_python import bare_python
from tests.test_check_mini import Mini, build_mini


@pytest.fixture(scope="module")
def jmini(tmp_path_factory: pytest.TempPathFactory) -> Mini:
    import torch

    torch.set_num_threads(1)
    return build_mini(tmp_path_factory.mktemp("jmini"), n_samples=3)


def _leftovers() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "eagle3-check-*")))


def _check_procs() -> list[int]:
    pids = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if os.path.join(tempfile.gettempdir(), "eagle3-check-").encode() in cmd and b"accuracy.py" in cmd:
            pids.append(int(name))
    return pids


async def test_local_job_matches_in_process(jmini: Mini) -> None:
    from eagle3_tui.eagle.accuracy import CheckOptions, run_check

    before = _leftovers()
    events: list = []
    host = LocalHost()
    rep = await checkjob.run_check(host, draft_dir=str(jmini.draft), data_glob=jmini.v1, target_path=str(jmini.target),
                                   steps=2, threads=1, slot_boundaries=(0, 2, 6, 9), on_event=events.append)
    ref = run_check(CheckOptions(str(jmini.draft), jmini.v1, str(jmini.target), steps=2, data_slots=[0, 2, 6, 9]))
    assert [(w.name, w.top1, w.step_accept, w.boundaries) for w in rep.wirings] == \
        [(w.name, w.top1, w.step_accept, w.boundaries) for w in ref.wirings]
    assert rep.result("training").top1 == 1.0 and rep.slot_boundaries == [0, 2, 6, 9]
    progress = [e for e in events if e.event == "progress"]
    assert progress and progress[-1].done == progress[-1].total and progress[0].eta_s is not None
    assert _leftovers() == before
    await host.close()


async def test_ssh_job_and_bad_input(jmini: Mini, ssh_host) -> None:
    before = _leftovers()
    rep = await checkjob.run_check(ssh_host, draft_dir=str(jmini.draft), data_glob=jmini.st,
                                   target=str(jmini.target), steps=2, threads=1)
    assert rep.layout == "speculators" and rep.result("training").top1 == 1.0
    assert rep.result("serving default").top1 < 0.6
    with pytest.raises(UserError, match=r"the data pattern .*nothing/\*\.pt matches no files"):
        await checkjob.run_check(ssh_host, draft_dir=str(jmini.draft), data_glob=str(jmini.root / "nothing" / "*.pt"),
                                 target=str(jmini.target))
    assert _leftovers() == before


async def test_missing_python_and_torch(jmini: Mini, tmp_path: Path) -> None:
    host = LocalHost()
    with pytest.raises(UserError, match="cannot run the check"):
        await checkjob.run_check(host, draft_dir=str(jmini.draft), data_glob=jmini.v1, python=str(tmp_path / "nopython"))
    fake = tmp_path / "python-without-torch"
    fake.write_text("#!/bin/sh\nexec /usr/bin/env python3 -S -I \"$@\"\n")
    fake.chmod(0o755)
    with pytest.raises(UserError, match="cannot import torch"):
        await checkjob.run_check(host, draft_dir=str(jmini.draft), data_glob=jmini.v1, python=str(fake))
    await host.close()


async def test_cancel_ends_the_remote_job(jmini: Mini, tmp_path: Path, ssh_host) -> None:
    # a target config that is a FIFO: the job blocks reading it until it is ended
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    before = _leftovers()
    started = asyncio.Event()

    def on_event(ev) -> None:
        if ev.event == "start":
            started.set()

    task = asyncio.create_task(checkjob.run_check(ssh_host, draft_dir=str(jmini.draft), data_glob=jmini.v1,
                                                  target=str(fifo), on_event=on_event))
    await asyncio.wait_for(started.wait(), 60)
    assert _check_procs(), "the job should be running"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    for _ in range(100):
        if not _check_procs():
            break
        await asyncio.sleep(0.1)
    assert _check_procs() == []
    assert _leftovers() == before


def test_the_zip_runs_on_a_bare_python_and_exits_when_stdin_closes(jmini: Mini, tmp_path: Path) -> None:
    """The shipped zip, with the package's normal imports, runs where only torch and safetensors are
    installed, prints JSON lines, and ends when stdin closes even while blocked."""
    import json
    import subprocess

    bare, env = bare_python(tmp_path)
    pyz = tmp_path / "job" / "accuracy.pyz"
    pyz.parent.mkdir()
    pyz.write_bytes(shipped.build())
    argv = [*bare, "-u", str(pyz), "--draft", str(jmini.draft), "--data", jmini.v1,
            "--target", str(jmini.target), "--steps", "2", "--threads", "1"]
    done = subprocess.run([*argv, "--no-stdin-watch"], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=env)
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert done.returncode == 0, done.stderr
    assert events[0]["event"] == "start" and events[-1]["event"] == "done"
    assert events[-1]["report"]["wirings"][0]["top1"] == 1.0
    fifo = tmp_path / "config.json"
    os.mkfifo(fifo)
    argv[argv.index("--target") + 1] = str(fifo)
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=tmp_path, env=env)
    assert json.loads(proc.stdout.readline())["event"] == "start"  # now blocked reading the FIFO
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0  # the timeout only guards against a hang
    proc.stdout.close()


def test_every_module_in_the_zip_imports_on_a_bare_python(tmp_path: Path) -> None:
    """What the zip holds is found from the check's imports (module level and inside functions): each
    module imports from the zip alone, and nothing the check does not reach is shipped."""
    import json
    import subprocess

    names = shipped.modules()
    assert {"eagle3_tui.eagle.accuracy", "eagle3_tui.eagle.drafter", "eagle3_tui.formats.readers",
            "eagle3_tui.errors"} <= set(names)  # drafter only inside a function; readers and errors two levels down
    assert not any(n.startswith(("eagle3_tui.session", "eagle3_tui.ui", "eagle3_tui.sim")) for n in names)
    assert "eagle3_tui.eagle.tree" not in names  # the sim's, not the check's
    bare, env = bare_python(tmp_path)
    pyz = tmp_path / "accuracy.pyz"
    pyz.write_bytes(shipped.build())
    script = ("import importlib, json, sys\nsys.path.insert(0, sys.argv[1])\n"
              "mods = [importlib.import_module(m) for m in sys.argv[2:]]\n"
              "print(json.dumps([m.__file__ for m in mods]))\n")
    p = subprocess.run([*bare, "-c", script, str(pyz), *names], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=120)
    assert p.returncode == 0, p.stderr
    assert all(f.startswith(str(pyz) + os.sep) for f in json.loads(p.stdout))
