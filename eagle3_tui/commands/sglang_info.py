"""`eagle3-tui sglang-info`: what the installed SGLang does with a draft's layer ids, read from its source.

`--sglang-dir DIR` reads an `sglang` package directory (a wheel unpacked, a site-packages copy, or a
checkout's `python/`); `--local`/`--host H` find the package with that machine's Python (or take
`--sglang-dir` as a path there) and read only the files the analysis asks for. `--sglang-version V` answers from
the version table. The target is given with `--arch` and `--num-layers`; `--layer-ids` is the draft config's
`eagle_config.eagle_aux_hidden_state_layer_ids` (absent, or `none`: no id key, SGLang's default). With
`--host`/`--local`, what is not given is the served target's and the served draft config's: the session
attaches read-only (the running server's paths, else the profile's) and reads both configs there.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from eagle3_tui.errors import UserError

if TYPE_CHECKING:
    from collections.abc import Callable

    from eagle3_tui.session import TargetInfo
    from eagle3_tui.sglang.installed import Answer, Arch, Read

DEFAULT_PYTHON = "python3"


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    p = subparsers.add_parser(
        "sglang-info",
        parents=[common],
        help="what the installed SGLang captures for a draft's layer ids (read from its source)",
        description=(
            "Read the installed SGLang's own source and say, for a target architecture, which hidden-state "
            "boundaries a layer-id list is captured as (0 = embedding output, h = input of layer h), what "
            "graphed decode replays, whether -1 works, what the draft loader applies, the auto-chosen spec "
            "flags and where the log goes. Write negative ids with '=': --layer-ids=-1,2,30."
        ),
    )
    p.add_argument("--sglang-dir", metavar="DIR", help="an sglang package directory (e.g. a wheel unpacked)")
    p.add_argument("--sglang-version", metavar="V", help="no source: answer from the table for release V "
                                                         "(with --host/--local: for the served target)")
    p.add_argument("--python", metavar="PY", default=DEFAULT_PYTHON,
                   help="the host's Python that runs SGLang (--host/--local; default: the running server's, else python3)")
    p.add_argument("--arch", metavar="ARCH", help="target architecture: llama, qwen3, qwen3_moe, deepseek_v3, "
                                                  "kimi_k25, glm4_moe, gpt_oss, llama4, ... or an HF name")
    p.add_argument("--num-layers", metavar="N", type=_positive, help="the target's num_hidden_layers")
    p.add_argument("--layer-ids", metavar="IDS", help="e.g. 2,30,58 or =-1,2,30; 'none' for no id key")
    p.add_argument("--target-config", metavar="FILE", help="a local target config.json: gives --arch and --num-layers")
    p.add_argument("--draft-config", metavar="FILE", help="a local draft config.json: gives --layer-ids")
    p.add_argument("--json", action="store_true", help="one JSON object")
    p.set_defaults(func=run)


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 4:
        raise argparse.ArgumentTypeError(f"{value} layers is too few for SGLang's default boundaries")
    return value


def parse_layer_ids(text: str | None) -> tuple[int, ...] | None:
    """'-1,2,30' / '[2, 30, 58]' -> ids; None or 'none' -> no id key. UserError on anything else."""
    from eagle3_tui.eagle.wiring import parse_ids

    if text is None or text.strip().lower() in ("none", "null", ""):
        return None
    try:
        return parse_ids(text)
    except ValueError as err:
        raise UserError(f"--layer-ids: {err}") from None


def run(args: argparse.Namespace) -> int:
    from eagle3_tui.sglang.installed import answer, read_release

    served = None
    if (args.host or args.local) and (_wants_target(args) or _wants_ids(args)):
        import asyncio

        try:
            served = asyncio.run(served_target(args))
        except UserError as err:
            if _wants_target(args):
                raise
            print(f"eagle3-tui: warning: the served draft config was not read ({err}); no id key assumed "
                  "(give --layer-ids)", file=sys.stderr)
    arch, num_layers = _target(args, served)
    ids = _draft_ids(args, served)

    def analyse(read: Read | None) -> Answer:
        return answer(read_release(read, version=args.sglang_version), arch, num_layers, ids)

    got = _served_release(args, served, arch, num_layers, ids) or evaluate(args, analyse)
    if args.json:
        json.dump({**got.to_json(), "served_from": _served_from(served)}, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        sys.stdout.write(render_text(got))
        if served is not None:
            sys.stdout.write(f"  from the served configs: {', '.join(_served_from(served) or ['none read'])}\n")
    return 0


def _served_release(args: argparse.Namespace, served: TargetInfo | None, arch: Arch, num_layers: int,
                    ids: tuple[int, ...] | None) -> Answer | None:
    """The running server's own SGLang (the session read it from the source the server imports), when no
    other release was asked for (--sglang-dir, --sglang-version, --python) and the target is the served one."""
    base = served.installed if served is not None else None
    if base is None or args.sglang_dir or args.sglang_version or args.python != DEFAULT_PYTHON:
        return None
    if base.arch.architecture != arch.architecture or base.num_layers != num_layers:
        return None
    return base if base.layer_ids == ids else base.evaluate(ids)


def _served_from(served: TargetInfo | None) -> list[str] | None:
    """The served config files the target and ids were read from (None: none were asked for)."""
    if served is None:
        return None
    return [p for p in (served.target_config_path, served.draft_config_path) if p]


def _read_json(path: str, what: str) -> dict[str, Any]:
    """A config file as a JSON object, through the one validating reader (NaN, nesting, wrong types)."""
    from pathlib import Path

    from eagle3_tui.formats.readers import json_object

    try:
        data = Path(path).expanduser().read_bytes()
    except OSError as err:
        raise UserError(f"cannot read the {what} {path}: {err.strerror or err}") from None
    return json_object(data, f"the {what} {path}")


def _wants_target(args: argparse.Namespace) -> bool:
    return args.target_config is None and (args.arch is None or args.num_layers is None)


def _wants_ids(args: argparse.Namespace) -> bool:
    return args.layer_ids is None and args.draft_config is None


async def served_target(args: argparse.Namespace) -> TargetInfo:
    """The served target's config and the served draft config, read on the host by a read-only session
    (the running server's model and draft paths, else the profile's target_path and draft_path)."""
    from eagle3_tui.profile import load_profile
    from eagle3_tui.session import Session

    overrides = {"accept_new_host_key": True} if args.accept_new_host_key else {}
    session = Session(load_profile(args.host, args.profile, overrides, local=args.local), readonly=True)
    try:
        await session.attach()
        return session.target
    finally:
        await session.close()


def _target(args: argparse.Namespace, served: TargetInfo | None = None) -> tuple[Arch, int]:
    """--arch/--num-layers, else what --target-config says (the flags win), else the served target's."""
    from eagle3_tui.sglang.installed import lookup, target_from_config

    if args.target_config is not None:
        arch, layers = target_from_config(_read_json(args.target_config, "target config"))
        return (lookup(args.arch) if args.arch else arch), (args.num_layers or layers)
    if served is not None and (args.arch or served.arch) and (args.num_layers or served.num_layers):
        return lookup(str(args.arch or served.arch)), int(args.num_layers or served.num_layers or 0)
    if args.arch is None or args.num_layers is None:
        where = "" if served is None else (f" (no server on {args.host or 'this machine'} names a readable target "
                                           "config, and neither does the profile's target_path)")
        if served is not None and served.unresolved:  # a repo id not in the host's hub cache
            where = f" ({'; '.join(served.unresolved)})"
        raise UserError("sglang-info needs --arch and --num-layers, or --target-config, or --host/--local for "
                        f"the served target's{where}")
    return lookup(args.arch), args.num_layers


def _draft_ids(args: argparse.Namespace, served: TargetInfo | None = None) -> tuple[int, ...] | None:
    """--layer-ids, else the ids SGLang reads from --draft-config (eagle_config only), else the served draft
    config's, else no id key."""
    from eagle3_tui.eagle.draft_config import DraftConfig

    if served is not None and _wants_ids(args) and served.draft_text is not None:
        return DraftConfig.parse(served.draft_text, source=served.draft_config_path or "the served draft config"
                                 ).sglang_layer_ids
    if args.layer_ids is not None or args.draft_config is None:
        return parse_layer_ids(args.layer_ids)
    from eagle3_tui.eagle.draft_config import DraftConfig

    data = _read_json(args.draft_config, "draft config")
    return DraftConfig.parse(json.dumps(data), source=args.draft_config).sglang_layer_ids


def evaluate(args: argparse.Namespace, analyse: Callable[[Read | None], Answer]) -> Answer:
    """Run `analyse` on --sglang-dir, --host/--local (with --sglang-dir: that directory on the host), or
    the table for --sglang-version (with --host/--local, those then only name the served target)."""
    from eagle3_tui.sglang.installed import dir_reader, find_package_dir

    chosen = [name for name, on in (("--host", args.host), ("--local", args.local)) if on]
    if len(chosen) > 1 or (args.sglang_version and args.sglang_dir) or not (
            chosen or args.sglang_dir or args.sglang_version):
        given = [*chosen, *(["--sglang-version"] if args.sglang_version else []),
                 *(["--sglang-dir"] if args.sglang_dir else [])]
        raise UserError("give exactly one of --sglang-dir, --host, --local or --sglang-version"
                        + (f" (got {', '.join(given)})" if given else ""))
    if args.sglang_version is not None:
        return analyse(None)
    if not chosen:
        pkg = find_package_dir(args.sglang_dir)
        if pkg is None:
            raise UserError(f"{args.sglang_dir} is not an sglang package (no srt/server_args.py and srt/models/llama.py)")
        return analyse(dir_reader(pkg))
    import asyncio

    return asyncio.run(_on_host(args, analyse))


def make_host(args: argparse.Namespace) -> Any:
    """The host to read from: this machine for --local, else an SSH host for --host."""
    from eagle3_tui.remote import LocalHost

    if args.local:
        return LocalHost(python=args.python)
    from eagle3_tui.remote.ssh import SSHHost

    return SSHHost(args.host, accept_new_host_key=args.accept_new_host_key, python=args.python)


async def _package_root(host: Any, args: argparse.Namespace) -> str:
    """--sglang-dir as a path on the host, else where the host's Python would import sglang from."""
    from eagle3_tui.sglang.installed.locate import find_argv, package_dir_from

    where = "this machine" if args.local else args.host
    if args.sglang_dir is not None:
        root = str(args.sglang_dir).rstrip("/")
        if not await host.exists(f"{root}/srt/server_args.py"):
            raise UserError(f"{root} on {where} is not an sglang package (no srt/server_args.py)")
        return root
    found = await host.run(find_argv(args.python), timeout=60)
    located = package_dir_from(found.stdout) if found.ok else None
    if located is None:
        raise UserError(f"{args.python} on {where} cannot find an sglang package (try --python or --sglang-dir)")
    return located


async def _on_host(args: argparse.Namespace, analyse: Callable[[Read | None], Answer]) -> Answer:
    """Read just the files `analyse` asks for from the host's sglang package."""
    from eagle3_tui.remote import HostError
    from eagle3_tui.sglang.installed import gather

    host = make_host(args)
    try:
        await host.connect()
        root = await _package_root(host, args)

        async def fetch(rel: str) -> str | None:
            try:
                return str(await host.read_text(f"{root}/{rel}"))
            except HostError:
                return None

        got, _files = await gather(fetch, analyse)
        return got
    finally:
        await host.close()


def render_text(a: Answer) -> str:
    """The answer for a person: boundaries in words, then the evidence and how each part is known."""
    from eagle3_tui.eagle.wiring import format_boundaries

    ids = "no id key (SGLang's default)" if a.layer_ids is None else "[" + ", ".join(map(str, a.layer_ids)) + "]"
    lines = [f"SGLang {a.version or 'unknown'} ({a.source}), {a.arch.architecture} with {a.num_layers} layers, ids {ids}"]
    if a.fails:
        lines.append(f"  fails: {a.fails}")
    else:
        lines.append(f"  prefill captures:       {format_boundaries(a.captures)}")
        lines.append(f"  graphed decode replays: {format_boundaries(a.captures_cuda_graph or a.captures)}"
                     + ("  <- the ids reach prefill only; --disable-cuda-graph or SGLang >= 0.5.11" if a.prefill_only else ""))
    if a.fails_without_cuda_graph is None and a.captures_without_cuda_graph not in (None, a.captures):
        lines.append(f"  with --disable-cuda-graph: {format_boundaries(a.captures_without_cuda_graph)}")
    embed = "yes" if a.embed_capture else (f"no (id {a.embed_id} captures it here)" if a.embed_id is not None else "no")
    lines.append(f"  id -1 captures the embedding: {embed}{' (patched)' if a.patched else ''}")
    loader = a.loader
    lines.append(f"  draft loader: layers.0.* {'loaded' if loader.layers_prefix else 'skipped'}, "
                 f"{'several layers' if loader.multi_layer else 'one layer'}, applies "
                 f"{', '.join(loader.applies) or 'no training-side norms'}")
    auto = ", ".join(map(str, a.auto_spec)) if a.auto_spec else "n/a"
    lines.append(f"  auto-chosen steps, topk, draft tokens: {auto}")
    lines.append(f"  server log stream: {a.log_stream}")
    if a.release is not None:
        lines.append(f"  speculative path: {a.release.path.summary()}")
    lines.append("  evidence:")
    lines += [f"    {n.text()}" for n in (*a.notes, *(a.release.path.notes if a.release is not None else ()))]
    return "\n".join(lines) + "\n"
