"""The demo's session: the demo world (built once, cached), a fresh state dir, the demo profile with
the seeds' broken flags, and the sim server started through the session's one launch path.

Quitting the demo stops the server it started. A hang-up may leave no event loop to run the session's
stop, so `emergency_stop` is synchronous and stops the local process group through
`remote.procgroup.stop_group` (the one TERM, grace, KILL sequence). Nothing here imports torch: the
world build runs in a thread.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

from eagle3_tui.session import Session

Progress = Callable[[str], None]


def free_port() -> int:
    """A free TCP port on loopback for the demo's sim server."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def demo_boot(readonly: bool, state_root: Path) -> Callable[[Progress], Awaitable[Session]]:
    """The coroutine that builds the demo's session, saying what it does through `progress`."""

    async def boot(progress: Progress) -> Session:
        from eagle3_tui.profile import demo_profile
        from eagle3_tui.sim.world import ensure_world

        progress("building or reusing the demo world (first run trains a tiny draft: a minute or two)…")
        world = await asyncio.to_thread(ensure_world, progress=progress)
        progress(f"demo world ready in {world.root}")
        profile = demo_profile(world, port=free_port(), state_dir=state_root)
        progress(
            "starting the sim server with --speculative-num-steps 1 --speculative-num-draft-tokens 16 "
            "--speculative-eagle-topk 1 and no layer-id key…"
        )
        return Session(profile, readonly=readonly)

    return boot


async def attach_and_start(session: Session) -> None:
    """Attach, and start the server unless one is up or coming up."""
    await session.attach()
    if session.server.state not in ("ready", "starting"):
        await session.start_server()


async def stop_and_close(session: Session) -> None:
    """Quit the demo: stop the sim server it started, then detach."""
    try:
        if session.server.pgid or session.server.pid:
            await session.stop_server()
    finally:
        await session.close()


def emergency_stop(session: Session, grace: float = 15.0) -> None:
    """Synchronous stop of the demo server's local process group (TERM, grace, KILL), for a hang-up."""
    from eagle3_tui.remote.procgroup import stop_group

    pgid = session.server.pgid
    if pgid:
        stop_group(pgid, grace)
