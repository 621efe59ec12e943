"""`eagle3-tui` without a subcommand: open the console on a host, or on the demo world.

`--demo` builds (or reuses) the demo world behind a progress screen, starts the sim server through
the session's one launch path with the seeds' broken flags, attaches through LocalHost and shows a
one-line hint; quitting stops the demo server. `--host H` / `--local` load the profile and attach.
Nothing here imports torch: the world build runs in a worker thread after the first frame.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import shutil
import signal
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

DEMO_HINT = (
    "demo: the seeds' broken server. 2 findings says why · 3 config: p picks a preset, enter applies it · "
    "c accuracy check · b benchmark · ? help"
)


def free_port() -> int:
    """A free TCP port on loopback for the demo's sim server."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def _stop_and_close(session: Any) -> None:
    """Quit the demo: stop the sim server it started, then detach."""
    try:
        if getattr(session.server, "pgid", None) or getattr(session.server, "pid", None):
            await session.stop_server()
    finally:
        await session.close()


def stop_local_group(session: Any, grace: float = 15.0) -> None:
    """Synchronous emergency stop of a local server's process group (TERM, grace, KILL): what a
    hang-up runs for the demo, when the event loop may no longer be able to run the session's stop."""
    pgid = getattr(session.server, "pgid", None)
    if pgid:
        terminate_group(pgid, grace)


def terminate_group(pgid: int, grace: float) -> None:
    """TERM a local process group, wait up to `grace` seconds for it to go, then KILL it."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)


async def _close(session: Any) -> None:
    await session.close()


async def _attach(session: Any) -> None:
    await session.attach()


async def _attach_and_start(session: Any) -> None:
    await session.attach()
    if getattr(session.server, "state", "") not in ("ready", "starting"):
        await session.start_server()


def demo_boot(readonly: bool, state_root: Path) -> Callable[[Callable[[str], None]], Any]:
    """The demo's boot coroutine: world (cached), a fresh state dir, the demo profile, a Session."""

    async def boot(progress: Callable[[str], None]) -> Any:
        from eagle3_tui.profile import demo_profile
        from eagle3_tui.session import Session
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


def build_app(args: argparse.Namespace, **app_kwargs: Any) -> tuple[Any, Callable[[], None]]:
    """The app for these CLI args, and a cleanup to run after it exits."""
    from eagle3_tui.ui.app import Eagle3App

    readonly = bool(getattr(args, "readonly", False))
    if getattr(args, "demo", False):
        state_root = Path(tempfile.mkdtemp(prefix="eagle3-tui-demo-"))
        app = Eagle3App(
            boot=demo_boot(readonly, state_root),
            start=_attach_and_start,
            on_exit=_stop_and_close,
            hint=DEMO_HINT,
            **app_kwargs,
        )
        app.hangup_hook = lambda: app.session is not None and stop_local_group(app.session)
        return app, lambda: shutil.rmtree(state_root, ignore_errors=True)

    from eagle3_tui.profile import load_profile

    overrides = {"accept_new_host_key": True} if getattr(args, "accept_new_host_key", False) else None
    profile = load_profile(
        args.host, getattr(args, "profile", None), overrides, local=bool(getattr(args, "local", False))
    )

    async def make_session(progress: Callable[[str], None]) -> Any:
        # Imported here, after the first frame: the session pulls in the log model, presets and HTTP client.
        from eagle3_tui.session import Session

        return Session(profile, readonly=readonly)

    app = Eagle3App(
        boot=make_session,
        boot_screen=False,
        start=_attach,
        on_exit=_close,
        theme_name=profile.theme,
        keymap=dict(profile.keymap or {}),
        **app_kwargs,
    )
    return app, lambda: None


def run_console(args: argparse.Namespace) -> int:
    """Entry from cli.py when no subcommand is given."""
    app, cleanup = build_app(args)
    app.exit_cleanup = cleanup
    try:
        code = app.run()
    finally:
        # If the app died before its quit path ran, still stop the demo server and detach.
        session = app.session
        if session is not None and not app.quitting and app.on_exit_hook is not None:
            with contextlib.suppress(Exception):
                asyncio.run(app.on_exit_hook(session))
        cleanup()
    return int(code or app.return_code or 0)
