"""SGLang's children rename themselves with setproctitle (`sglang::scheduler_TP0`, ...): discovery still
finds the server by them when the main process's own command line is not a launch command, and says
when its launch args cannot be read (the profile's launch_command then stands in)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from eagle3_tui.remote.local import LocalHost
from eagle3_tui.session.host.discovery import (
    _recovered_argv,
    discover,
    discover_servers,
    engine_title,
    group_servers,
    sglang_title,
    titled_groups,
)

LAUNCH = ["python", "-m", "sglang.launch_server", "--model-path", "/m", "--port", "31234"]
SPAWNED = ["python", "-c", "from multiprocessing.spawn import spawn_main; spawn_main()", "--multiprocessing-fork"]

# A wrapper (`python serve.py` as many users run SGLang through its Python API) whose child renames itself
# as SGLang's scheduler does (srt/managers/scheduler.py: setproctitle.setproctitle(f"sglang::scheduler{prefix}")).
_WRAPPER = r"""
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c",
    "import setproctitle, sys, time; setproctitle.setproctitle('sglang::scheduler_TP0'); "
    "print('titled', flush=True); time.sleep(60)"], stdout=subprocess.PIPE, text=True)
print(child.pid, child.stdout.readline().strip(), flush=True)
child.wait()
"""


def test_titles_and_the_groups_they_mark():
    assert sglang_title(["sglang::scheduler_TP0"]) == "sglang::scheduler_TP0"
    assert sglang_title(["sglang::tokenizer_worker:123"]) == "sglang::tokenizer_worker:123"
    assert sglang_title(["python", "sglang::x"]) is None and sglang_title([]) is None
    P = SimpleNamespace
    procs = [
        # stock SGLang: the main process keeps its argv, its children are titled: found by its argv
        P(pid=10, pgid=10, argv=LAUNCH), P(pid=11, pgid=10, argv=["sglang::scheduler_TP0"]),
        P(pid=12, pgid=10, argv=["sglang::detokenizer"]),
        # a wrapper script: only the titles say it is SGLang
        P(pid=20, pgid=20, argv=["python", "serve.py"]), P(pid=21, pgid=20, argv=SPAWNED),
        P(pid=22, pgid=20, argv=["sglang::scheduler_DP0_TP0"]),
        # no leader left in the group: its oldest untitled member stands for it
        P(pid=31, pgid=30, argv=["sglang::scheduler_TP0"]), P(pid=32, pgid=30, argv=["python", "x.py"]),
        P(pid=40, pgid=40, argv=["vim", "sglang::notes"]),
    ]
    assert [p.pid for p in group_servers(procs)] == [10]
    assert [(p.pid, t) for p, t in titled_groups(procs)] == [(20, "sglang::scheduler_DP0_TP0"),
                                                             (32, "sglang::scheduler_TP0")]


def _start_wrapper(tmp_path: Path) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, "-c", _WRAPPER], stdout=subprocess.PIPE, text=True, cwd=tmp_path,
                            start_new_session=True, env={**os.environ, "HF_HOME": str(tmp_path / "hf")})
    assert proc.stdout is not None
    child, word = proc.stdout.readline().split()
    assert word == "titled"
    return proc, int(child)


async def test_a_real_renamed_child_marks_the_server(tmp_path):
    proc, child = _start_wrapper(tmp_path)
    host = LocalHost()
    try:
        # setproctitle overwrites the argv memory: the kernel's cmdline is the title alone.
        assert Path(f"/proc/{child}/cmdline").read_bytes().rstrip(b"\0") == b"sglang::scheduler_TP0"
        # ... and, having moved the environment to make room, leaves the kernel's environ zeroed:
        # the environment is read from the untitled main process.
        assert b"HF_HOME=" not in Path(f"/proc/{child}/environ").read_bytes()
        t0 = time.monotonic()
        bare = await discover(host)
        mine = [n for n in bare.notes if f"pid {proc.pid} " in n]
        assert len(mine) == 1, bare.notes
        assert mine[0].startswith(f"pid {proc.pid} runs SGLang (its children are titled sglang::scheduler_TP0) "
                                  f"but its command line '{sys.executable} -c ")
        assert mine[0].endswith("is not SGLang's launch command, so the server's launch args cannot be read: "
                                "set launch_command in the profile")
        assert all(s.pid != proc.pid for s in bare.servers)

        found = await discover(host, launch_command=LAUNCH)
        server = next(s for s in found.servers if s.pid == proc.pid)
        assert server.argv == tuple(LAUNCH) and server.port == 31234 and server.cwd == str(tmp_path)
        assert server.note.endswith("cannot be read: using the profile's launch_command")
        assert server.hf_cache == str(tmp_path / "hf" / "hub") and server.env["HF_HOME"] == str(tmp_path / "hf")
        assert all(s.pid != proc.pid for s in await discover_servers(host))  # restarts' look-ups: own argv only
        assert time.monotonic() - t0 < 3
    finally:
        await host.close()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)


def test_vllm_servers_and_their_titled_children():
    """vLLM's API server keeps its argv; its children are `VLLM::EngineCore` and `VLLM::Worker`
    (vllm/utils/system_utils.py set_process_title, 0.32)."""
    P = SimpleNamespace
    serve = ["vllm", "serve", "/m", "--port", "8123"]
    module = ["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m"]
    procs = [
        P(pid=10, pgid=10, argv=serve), P(pid=11, pgid=10, argv=["VLLM::EngineCore"]),
        P(pid=12, pgid=10, argv=["VLLM::Worker"]),
        P(pid=20, pgid=20, argv=module), P(pid=21, pgid=20, argv=["VLLM::EngineCore_DP0"]),
        P(pid=30, pgid=30, argv=["python", "serve.py"]), P(pid=31, pgid=30, argv=["VLLM::EngineCore"]),
        P(pid=40, pgid=40, argv=["vim", "VLLM::notes"]),
    ]
    assert [p.pid for p in group_servers(procs)] == [10, 20]
    assert [(p.pid, t) for p, t in titled_groups(procs)] == [(30, "VLLM::EngineCore")]
    assert engine_title(["VLLM::Worker_DP0_PP0_TP1"])[0].name == "vllm"
    assert engine_title(["VLLM::notes"]) is None and engine_title([]) is None
    note = _recovered_argv(procs[5], "VLLM::EngineCore", None)[1]
    assert note.startswith("pid 30 runs vLLM (its children are titled VLLM::EngineCore)")
    assert "is not vLLM's launch command" in note
    argv, note = _recovered_argv(procs[5], "VLLM::EngineCore", module)
    assert argv == tuple(module) and note.endswith("using the profile's launch_command")


def test_a_vllm_launch_is_a_spec_on_vllms_port():
    from eagle3_tui.session.launch import LaunchSpec

    spec = LaunchSpec.from_argv(["vllm", "serve", "/m", "--speculative-config",
                                 '{"method": "eagle3", "model": "/d", "num_speculative_tokens": 3}'], cwd=None)
    assert spec.engine.name == "vllm" and spec.port == 8000
    spec = LaunchSpec.from_argv(["python", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m",
                                 "--port", "8123", "--host", "0.0.0.0"], cwd=None)
    assert (spec.port, spec.bind_host) == (8123, "127.0.0.1")
    assert LaunchSpec.from_argv(LAUNCH, cwd=None).engine.name == "sglang"
