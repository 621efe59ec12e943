"""The accuracy check as a job on a host: ship the check's zip, run it next to the data, stream back.

The check must run where the hidden states are (often hundreds of GB on the GPU host), with the
host's own Python and torch. So the check's zip application (eagle/shipped.py: the package's own
modules the check imports) is written to a fresh temp directory on the host, run there with the given
interpreter, its JSON lines streamed back as events, and the directory removed. Cancelling the awaiting task closes the stream, and the
host-side watchdog ends the job (research/ssh.md: closing a channel alone does not).

The temp directory is made and owned by a small keeper process on the host (`_KEEPER`), started over
its own channel before anything is copied: it removes the directory when its stdin reaches EOF, that
is when this side closes the channel or when the connection dies with this process (SIGKILLed, a
power cut, a cut network). So a killed check leaves no `eagle3-check-*` behind, whatever the moment;
`leftovers.py` still sweeps what an older version left.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eagle3_tui.eagle import shipped
from eagle3_tui.eagle.accuracy import CheckReport
from eagle3_tui.errors import UserError
from eagle3_tui.remote.host import Host
from eagle3_tui.remote.stream import ProcChannel
from eagle3_tui.remote.types import RunResult
from eagle3_tui.session.check.leftovers import remove_leftovers

# python -c _KEEPER: make the job's temp dir, print it, remove it at stdin EOF (or SIGHUP/SIGTERM); a job
# still writing into it gets a few tries to be gone
_KEEPER = (
    "import os, shutil, signal, sys, tempfile, time\n"
    "d = tempfile.mkdtemp(prefix='eagle3-check-')\n"
    "def gone(*_):\n"
    "    for _ in range(20):\n"
    "        shutil.rmtree(d, ignore_errors=True)\n"
    "        if not os.path.exists(d):\n"
    "            break\n"
    "        time.sleep(0.25)\n"
    "    os._exit(0)\n"
    "signal.signal(signal.SIGHUP, gone)\n"
    "signal.signal(signal.SIGTERM, gone)\n"
    "sys.stdout.write(d + '\\n')\n"
    "sys.stdout.flush()\n"
    "try:\n"
    "    while os.read(0, 65536):\n"
    "        pass\n"
    "except OSError:\n"
    "    pass\n"
    "gone()\n"
)
_PRECHECK = (
    "import sys\n"
    "missing = []\n"
    "for m in ('torch', 'safetensors'):\n"
    "    try:\n"
    "        __import__(m)\n"
    "    except Exception as e:\n"
    "        missing.append('%s (%s)' % (m, e))\n"
    "print('MISSING ' + '; '.join(missing) if missing else 'OK ' + sys.version.split()[0])\n"
)

EventHandler = Callable[["CheckEvent"], object]


class CheckEvent(dict[str, Any]):
    """A JSON-lines event; keys read as attributes too (`ev.done`, `ev.eta_s`), None when absent."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self.get(name)


def zip_path(job_dir: str) -> str:
    """Where the check's zip lies in a job's temp directory on the host."""
    return f"{job_dir}/{shipped.NAME}"


async def _ship(host: Host, job_dir: str) -> None:
    await host.write_atomic(zip_path(job_dir), shipped.build(), expect_sha256=None)


def check_argv(
    python: str,
    job_dir: str,
    *,
    draft_dir: str,
    data_glob: str,
    target: str | None = None,
    wirings: Sequence[str] = (),
    samples: int = 20000,
    steps: int = 3,
    device: str = "cpu",
    dtype: str = "float32",
    data_slots: Sequence[int] | None = None,
    num_layers: int | None = None,
    labels: str = "auto",
    batch_tokens: int | None = None,
    threads: int | None = None,
    predict: Sequence[Sequence[int]] = (),
    served_loader: Mapping[str, Any] | None = None,
    other_loader: Mapping[str, Any] | None = None,
) -> list[str]:
    """The command line on the host; every value is one argv element (data, never shell text)."""
    argv = [python, "-u", zip_path(job_dir), "--no-stdin-watch",
            "--draft", draft_dir, "--data", data_glob, "--samples", str(samples), "--steps", str(steps),
            "--device", device, "--dtype", dtype, "--labels", labels]
    if target:
        argv += ["--target", target]
    for w in wirings:
        argv.append(f"--wiring={w}")  # one element, so a spec starting with '-' is not an option
    if data_slots is not None:
        argv += ["--data-slots", ",".join(str(int(x)) for x in data_slots)]
    if num_layers is not None:
        argv += ["--num-layers", str(int(num_layers))]
    if batch_tokens is not None:
        argv += ["--batch-tokens", str(int(batch_tokens))]
    if threads is not None:
        argv += ["--threads", str(int(threads))]
    for cfg in predict:  # (steps, topk, draft tokens)
        argv += ["--predict", ",".join(str(int(x)) for x in cfg)]
    # the serving engine's draft loader (eagle/trainers.py ServedLoader.to_dict), whose numbers lead
    for flag, loader in (("--served-loader", served_loader), ("--other-loader", other_loader)):
        if loader is not None:
            argv.append(f"{flag}={json.dumps(dict(loader), sort_keys=True)}")
    return argv


def _with_profile_names(options: dict[str, Any]) -> dict[str, Any]:
    """The profile's names: slot_boundaries (the data's slot boundaries), target_path (the target model dir)."""
    out = dict(options)
    for alias, name in (("slot_boundaries", "data_slots"), ("target_path", "target")):
        if alias in out:
            value = out.pop(alias)
            if out.get(name) is None:
                out[name] = value
    return out


async def _precheck(host: Host, py: str) -> None:
    """The host's Python runs and imports torch and safetensors, or a sentence says why not."""
    pre = await host.run([py, "-c", _PRECHECK], timeout=120)
    if pre.exit_code != 0 or not pre.stdout.startswith(("OK", "MISSING")):
        why = (pre.stderr or pre.stdout).strip().splitlines()[-1:] or [f"exit {pre.exit_code}"]
        raise UserError(f"{py} on {host.name} cannot run the check: {why[0]}")
    if pre.stdout.startswith("MISSING"):
        raise UserError(f"{py} on {host.name} cannot import {pre.stdout[8:].strip()}: the check needs torch "
                        f"and safetensors (give --remote-python with both installed)")


class _TempDir:
    """The job's temp directory on the host, held by its keeper (module doc); `close()` removes it."""

    def __init__(self, host: Host, py: str) -> None:
        self._host, self._py = host, py
        self._chan: ProcChannel | None = None
        self.path = ""

    async def __aenter__(self) -> str:
        self._chan = await self._host.open_channel([self._py, "-c", _KEEPER])
        try:
            line = await asyncio.wait_for(self._chan.readline(), 60)
        except BaseException:
            await self.close()
            raise
        self.path = line.strip()
        if not self.path.startswith("/"):
            why = self._chan.stderr_text().strip() or line.strip() or "no directory was printed"
            self.path = ""
            await self.close()
            raise UserError(f"could not make a temp directory on {self._host.name}: {why}")
        return self.path

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._chan is not None:
            chan, self._chan = self._chan, None
            with contextlib.suppress(Exception):
                await chan.close()  # stdin EOF: the keeper removes the directory
        if self.path:
            await _remove(self._host, self.path)  # in case the keeper could not (gone already, or denied)


class _Outcome:
    """What the script's JSON lines said: the report, the error, the non-JSON lines (the last 20)."""

    def __init__(self, on_event: EventHandler | None) -> None:
        self.on_event = on_event
        self.report: CheckReport | None = None
        self.error: dict[str, Any] | None = None
        self.stray: list[str] = []

    def line(self, line: str) -> None:
        try:
            raw = json.loads(line)
        except ValueError:
            self.stray = [*self.stray[-19:], line]
            return
        if not isinstance(raw, dict):
            return
        event = CheckEvent(raw)
        if self.on_event is not None:
            self.on_event(event)
        kind = event.get("event")
        if kind == "done":
            self.report = CheckReport.from_dict(event["report"])
        elif kind == "error":
            self.error = event

    def result(self, host: Host, exit_code: int | None, stderr: str) -> CheckReport:
        if self.error is not None:
            msg = str(self.error.get("message", "unknown error"))
            if self.error.get("kind") == "input":
                raise UserError(msg)
            raise UserError(f"the check failed on {host.name}: {msg}")
        if self.report is None:
            tail = (stderr.strip().splitlines() or self.stray or [""])[-1]
            raise UserError(f"the check on {host.name} ended without a result (exit {exit_code})"
                            + (f": {tail}" if tail else ""))
        return self.report


async def run_check(
    host: Host,
    *,
    draft_dir: str,
    data_glob: str,
    python: str | None = None,
    on_event: EventHandler | None = None,
    **options: Any,
) -> CheckReport:
    """Run the check on `host` and return its report; `on_event(event)` sees every JSON line (a dict
    whose keys also read as attributes: `kind = ev.event`, progress has `done`, `total`, `eta_s`, `wiring`).

    Bad input on the host (a truncated file, an empty glob, no CUDA) comes back as the script's
    one-sentence message in a `UserError`.
    """
    py = python or host.python
    options = _with_profile_names(options)
    await _precheck(host, py)
    async with _TempDir(host, py) as tmp:
        await remove_leftovers(host, keep=tmp)  # folders an older version's killed jobs left
        await _ship(host, tmp)
        argv = check_argv(py, tmp, draft_dir=draft_dir, data_glob=data_glob, **options)
        outcome = _Outcome(on_event)
        async with host.stream(argv, cwd=tmp) as lines:
            async for line in lines:
                outcome.line(line)
        return outcome.result(host, lines.exit_code, lines.stderr)


async def run_shipped(host: Host, python: str, argv_for: Callable[[str], list[str]], *, timeout: float = 120.0) -> RunResult:
    """A short job over the check's zip: shipped to a fresh temp dir on the host, `argv_for(zip path)`
    run there (cwd the dir), the dir removed. For quick looks (the data's first file), not the check."""
    async with _TempDir(host, python) as tmp:
        await _ship(host, tmp)
        return await host.run(argv_for(zip_path(tmp)), cwd=tmp, timeout=timeout)


@dataclass(frozen=True)
class CheckDefaults:
    """What the session knows that a check run should use unless the caller says otherwise."""

    draft_dir: str | None = None
    data_glob: str | None = None
    data_slots: tuple[int, ...] | None = None
    steps: int | None = None
    """The served steps, so the predicted accept length is for the flags being served."""
    num_layers: int | None = None
    target: str | None = None
    python: str | None = None


def check_request(opts: dict[str, Any], defaults: CheckDefaults) -> tuple[str, str, dict[str, Any]]:
    """(draft dir, data glob, the other options): the caller's, filled from `defaults`."""
    opts = dict(opts)
    draft = opts.pop("draft_dir", None) or defaults.draft_dir
    data_glob = opts.pop("data_glob", None) or defaults.data_glob
    if not draft or not data_glob:
        raise UserError("the check needs the draft dir and the data glob (set draft_path and data_glob in the profile)")
    if defaults.data_slots and "slot_boundaries" not in opts and "data_slots" not in opts:
        opts["data_slots"] = defaults.data_slots
    filled = {"steps": defaults.steps, "num_layers": defaults.num_layers, "target": defaults.target,
              "python": defaults.python}
    for key, value in filled.items():
        if value and key not in opts:
            opts[key] = value
    return draft, data_glob, opts


async def _remove(host: Host, path: str) -> None:
    """rm -rf the temp dir; only a path we made (eagle3-check-*) is ever removed."""
    if "/eagle3-check-" not in path:
        return
    try:
        await host.run(["rm", "-rf", "--", path], timeout=60)
    except Exception:  # the connection may be gone; nothing more to do
        pass
