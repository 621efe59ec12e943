"""`eagle3-tui` without a subcommand: open the console on a host, or on the demo world.

`--demo` boots `eagle3_tui.session.demo.lifecycle` behind a progress screen (world, profile, session, the sim
server started with the seeds' broken flags) and shows a one-line hint; quitting stops the demo server.
`--host H` / `--local` load the profile and attach. The session package is imported only after the
first frame (inside the hooks below), and nothing here imports torch.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eagle3_tui.errors import Interrupted
from eagle3_tui.ui.factory import make_app
from eagle3_tui.ui.options import Lifecycle, Progress

if TYPE_CHECKING:
    from eagle3_tui.session import Session
    from eagle3_tui.ui.app import Eagle3App

DEMO_HINT = (
    "demo: the seeds' broken server. key 2: the findings say why · key 3: p picks a preset, enter applies it · "
    "c accuracy check · b benchmark · ? help"
)


async def attach(session: Session) -> None:
    await session.attach()


async def close(session: Session) -> None:
    await session.close()


def demo_lifecycle(readonly: bool, temp_dir: Path | None = None, engine: str = "sim") -> Lifecycle:
    """The demo's boot, start and stop (eagle3_tui.session.demo.lifecycle), imported when each first runs. The
    boot makes the demo's temp folder in `temp_dir` (and removes dead demos' ones); cleanup removes it."""
    made: list[Path] = []
    builds: list[Any] = []  # the world build under way (session.demo.WorldBuild): stopped by the cleanup

    async def boot(progress: Progress) -> Session:
        from eagle3_tui.session import DemoWorldBuild, demo_boot, new_demo_root

        root, removed = await asyncio.to_thread(new_demo_root, temp_dir)
        made.append(root)
        if removed:
            progress(f"removed {len(removed)} temp folder(s) left by demos that were killed")
        build = DemoWorldBuild()
        builds.append(build)
        return await demo_boot(readonly, root, build, engine=engine)(progress)

    inductor = os.environ.get("TORCHINDUCTOR_CACHE_DIR")  # the demo's boot points it into its folder

    def cleanup() -> None:
        for build in builds:
            build.stop()
        remove(made)
        if inductor is None:
            os.environ.pop("TORCHINDUCTOR_CACHE_DIR", None)
        else:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = inductor

    async def start(session: Session) -> None:
        from eagle3_tui.session import demo_attach_and_start

        await demo_attach_and_start(session)

    async def stop(session: Session) -> None:
        from eagle3_tui.session import demo_stop_and_close

        await demo_stop_and_close(session)

    def hangup(session: Session) -> None:
        from eagle3_tui.session import demo_emergency_stop

        demo_emergency_stop(session)

    return Lifecycle(
        boot=boot,
        start=start,
        on_exit=stop,
        hangup=hangup,
        cleanup=cleanup,
    )


def remove(folders: list[Path]) -> None:
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


def fleet_requested(args: argparse.Namespace) -> bool:
    """`--fleet FILE`, `--prometheus URL` or several `--host`: the console opens on the Fleet screen."""
    hosts = getattr(args, "hosts", None) or []
    return bool(getattr(args, "fleet", None) or getattr(args, "prometheus", None) or len(hosts) > 1)


def build_fleet_app(args: argparse.Namespace, **options: Any) -> Eagle3App:
    """The console on a fleet: the Fleet screen first; enter opens the row's server as `--host` would."""
    from eagle3_tui.errors import UserError
    from eagle3_tui.fleet import FleetEntry, make_fleet, spec_from_cli
    from eagle3_tui.session import Session, SSHTunnels, fleet_profile
    from eagle3_tui.ui.options import FleetHome
    from eagle3_tui.ui.screens.fleet import FleetScreen

    readonly = bool(getattr(args, "readonly", False))
    profile_path = getattr(args, "profile", None)
    accept = bool(getattr(args, "accept_new_host_key", False))
    prometheus = getattr(args, "prometheus", None)
    spec = spec_from_cli(getattr(args, "fleet", None), list(getattr(args, "hosts", None) or []),
                         getattr(args, "fleet_engine", "auto"), prometheus)
    fleet, close_fleet = make_fleet(spec, prometheus=prometheus,
                                    tunnels=SSHTunnels(profile_path, accept_new_host_key=accept))
    apps: list[Eagle3App] = []

    def open_server(entry: FleetEntry) -> None:
        try:
            profile = fleet_profile(entry, profile_path, accept_new_host_key=accept)
        except UserError as err:
            apps[0].notify(str(err), severity="error")
            return
        apps[0].open_server(Session(profile, readonly=readonly))

    screen = FleetScreen(fleet, interval_s=spec.interval_s if spec is not None else 5.0, open_server=open_server)
    lifecycle = Lifecycle(start=attach, on_exit=close, closing=close_fleet)
    app = make_app(lifecycle=lifecycle, fleet=FleetHome(screen), boot_screen=False, **options)
    apps.append(app)
    return app


def build_app(args: argparse.Namespace, **options: Any) -> tuple[Eagle3App, Callable[[], None]]:
    """The app for these CLI args (through `make_app`), and a cleanup to run after it exits."""
    readonly = bool(getattr(args, "readonly", False))
    if fleet_requested(args) and not getattr(args, "demo", False):
        return build_fleet_app(args, **options), lambda: None
    if getattr(args, "demo", False):
        engine = str(getattr(args, "engine", "sim") or "sim")
        if engine != "sim":  # one sentence, before the console opens, where the engine's venv is missing
            from eagle3_tui.errors import UserError
            from eagle3_tui.session import real_engine_missing

            missing = real_engine_missing(engine)
            if missing is not None:
                raise UserError(missing)
        lifecycle = demo_lifecycle(readonly, engine=engine)
        app = make_app(lifecycle=lifecycle, hint=DEMO_HINT, **options)
        return app, lifecycle.cleanup or (lambda: None)

    from eagle3_tui.profile import load_profile

    overrides = {"accept_new_host_key": True} if getattr(args, "accept_new_host_key", False) else None
    profile = load_profile(
        args.host, getattr(args, "profile", None), overrides, local=bool(getattr(args, "local", False))
    )

    async def make_session(progress: Progress) -> Session:
        # Imported here, after the first frame: the session pulls in the log model, presets and HTTP client.
        from eagle3_tui.session import Session

        return Session(profile, readonly=readonly)

    lifecycle = Lifecycle(boot=make_session, start=attach, on_exit=close)
    return make_app(lifecycle=lifecycle, profile=profile, boot_screen=False, **options), lambda: None


def freeze_startup_heap() -> None:
    """Take what the imports built (modules, classes, functions: alive as long as the process) out of
    the garbage collector's sight (`gc.freeze`), so the collections of the start scan only new objects,
    and turn the collector on (cli.main turns it off for the console's imports: they make no garbage
    worth the collections they would trigger). Without this, a full collection falls due just before
    the first frame (benchmarks/MEASURED.md)."""
    gc.freeze()
    gc.enable()


def run_console(args: argparse.Namespace) -> int:
    """Entry from cli.py when no subcommand is given."""
    app, cleanup = build_app(args)
    freeze_startup_heap()
    try:
        code = app.run()
    finally:
        # If the app died before its quit path ran, still stop the demo server and detach.
        session, on_exit = app.session, app.lifecycle.on_exit
        if session is not None and not app.quitting and on_exit is not None:
            with contextlib.suppress(Exception):
                asyncio.run(on_exit(session))
        cleanup()
    if app.stopped_by is not None:  # after the cleanup: cli.main says which signal and exits 128 + it
        raise Interrupted(app.stopped_by)
    return int(code or app.return_code or 0)
