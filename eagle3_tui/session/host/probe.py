"""Reading what the session knows of the draft and the target from the host: draft and target
configs, the checkpoint header, whether the server's model file can capture the embedding (layer id -1).

Reads go through the `Host` (files, one small Python snippet for safetensors headers, one for the
SGLang source); nothing here writes. Every read is best effort: a missing fact stays None and the
rule that needs it stays silent.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import posixpath
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from eagle3_tui.eagle.chat_template import ServedTemplate, served_template
from eagle3_tui.engines import Launch
from eagle3_tui.errors import UserError
from eagle3_tui.session.host.hfcache import hub_cache_dir, repo_id_of, resolve_model_path
from eagle3_tui.sglang import launch

if TYPE_CHECKING:
    from eagle3_tui.eagle.checkpoint import TensorInfo
    from eagle3_tui.profile import Profile
    from eagle3_tui.remote.host import Host
    from eagle3_tui.session.launch import LaunchSpec
    from eagle3_tui.sglang.installed import Answer, Read

SIM_PATCH_FLAG = "--sim-embed-capture-patch"
SIM_VERSION_FLAG = "--sglang-version"
SIM_ARCH_FLAG = "--sim-target-arch"


@dataclass
class TargetInfo:
    """What the session learned about the draft and the target (for presets, validation, facts).
    Every field is best effort: None when it could not be read."""

    draft_config_path: str | None = None
    draft_text: str | None = None
    num_layers: int | None = None
    hidden_size: int | None = None
    arch: str | None = None
    fc_num_aux: int | None = None
    embed_capture: bool | None = None
    embed_capture_source: str = ""
    target_rope_theta: float | None = None
    target_config_path: str | None = None
    target_config: dict[str, Any] | None = None
    """The target's config.json as read (quantization, context window, dtype: the doctor's numerics rules)."""
    target_quant_files: dict[str, Any] | None = None
    """The other quantization descriptions found beside it (`eagle.quantization.QUANT_FILES`), path -> JSON."""
    target_rotation_files: tuple[str, ...] = ()
    """Rotation-matrix files beside the target's weights."""
    checkpoint_path: str | None = None
    checkpoint_tensors: dict[str, TensorInfo] | None = None
    installed: Answer | None = None
    """The installed SGLang's answer for this target with no id key (`evaluate` gives the draft's ids);
    None when neither its source nor its version could be read."""
    """Where the model came from: the package directory read, or the sim's release flag."""
    installed_fallback: bool = True
    """Whether `/server_info`'s version may stand in when `installed` is None (not for a sim that models
    no release: it runs without CUDA graphs and has its own embed-capture flag)."""
    unresolved: list[str] = field(default_factory=list)
    """One sentence per launch-command model path that could not be found (a repo id not in the cache)."""
    chat_template: ServedTemplate | None = None
    """The chat template the server applies (its tokenizer's, or `--chat-template`); None: it has none."""
    draft_card: str | None = None
    """The draft folder's README.md (its model card), for the accept length its authors published."""
    draft_card_path: str | None = None
    tokenizer_read: bool = False
    """Whether the served tokenizer folder was found (then `chat_template` None means it has none)."""

# Prints one JSON line per safetensors file of a draft dir: name, size, the first 8 + n bytes (base64).
_HEADERS = r"""
import base64, json, os, struct, sys
d = sys.argv[1]
names = sorted(n for n in os.listdir(d) if n.endswith('.safetensors'))
for n in names:
    p = os.path.join(d, n)
    size = os.path.getsize(p)
    with open(p, 'rb') as f:
        head = f.read(8)
        if len(head) == 8:
            (k,) = struct.unpack('<Q', head)
            if 8 + k <= min(size, 100 * 1024 * 1024 + 8):
                head += f.read(k)
    print(json.dumps({'file': p, 'size': size, 'head': base64.b64encode(head).decode()}))
"""

# Prints the directory of the sglang package without importing it (importing loads torch and CUDA).
_SGLANG_DIR = (
    "import importlib.util as u\n"
    "s = u.find_spec('sglang')\n"
    "print(list(s.submodule_search_locations)[0] if s and s.submodule_search_locations else '')\n"
)

# The seeds' patch (research/eagle3_formats.md; seed 003): -1 handled before the +1 shift.
_PATCH_MARKERS = (
    re.compile(r"capture_embedding"),
    re.compile(r"layers_to_capture\s*=\s*\[[^\]]*if\s+val\s*>=\s*0"),
    re.compile(r"-1\s+in\s+layer_ids"),
)


def _resolve(path: str | None, cwd: str | None) -> str | None:
    if not path:
        return None
    if path.startswith("/") or path.startswith("~"):
        return path
    if cwd and (path.startswith(".") or "/" in path):
        return posixpath.normpath(posixpath.join(cwd, path))
    return path


async def _read_json(host: Host, path: str) -> dict[str, Any] | None:
    try:
        text = await host.read_text(path)
        data = json.loads(text)
    except (UserError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _text_config(cfg: dict[str, Any]) -> dict[str, Any]:
    """Multimodal targets (Kimi-K2.5, ...) keep the language model's sizes under text_config."""
    if "num_hidden_layers" not in cfg and isinstance(cfg.get("text_config"), dict):
        merged = dict(cfg["text_config"])
        merged.setdefault("architectures", cfg.get("architectures"))
        return merged
    return cfg


async def read_checkpoint_tensors(host: Host, draft_dir: str) -> dict[str, TensorInfo] | None:
    from eagle3_tui.eagle.checkpoint import parse_safetensors_header

    try:
        res = await host.run([host.python, "-c", _HEADERS, draft_dir], timeout=60)
    except UserError:
        return None
    if res.exit_code != 0:
        return None
    tensors: dict[str, TensorInfo] = {}
    for line in res.stdout.splitlines():
        try:
            rec = json.loads(line)
            tensors.update(parse_safetensors_header(base64.b64decode(rec["head"]), file=rec["file"],
                                                    file_size=rec["size"]))
        except (ValueError, KeyError, UserError):
            continue
    return tensors or None


def _server_python(spec: LaunchSpec, profile: Profile) -> str | None:
    if profile.remote_python:
        return profile.remote_python
    if not spec.argv:
        return None
    first = spec.argv[0]
    base = posixpath.basename(first)
    if base.startswith("python"):
        return first
    if base == "sglang" and "/" in first:
        return posixpath.join(posixpath.dirname(first), "python")
    return None


async def embed_capture_support(
    host: Host, spec: LaunchSpec, profile: Profile, arch: str | None
) -> tuple[bool | None, str]:
    """Whether the server can capture the embedding for layer id -1, and the evidence.

    The sim server: its `--sim-embed-capture-patch` flag. Real SGLang: the target architecture's
    model file in the server's own sglang source, searched for the seeds' patch.
    """
    try:
        args = launch.parse_launch(spec.argv)
    except UserError:
        return None, ""
    if args.kind == launch.KIND_SIM:
        has = args.has_flag(SIM_PATCH_FLAG)
        return has, f"sim server launched {'with' if has else 'without'} {SIM_PATCH_FLAG}"
    python = _server_python(spec, profile)
    if python is None or not arch:
        return None, ""
    env = [f"{k}={v}" for k, v in spec.env.items() if k == "PYTHONPATH"]  # the server's own import path
    try:
        res = await host.run(["env", *env, python, "-c", _SGLANG_DIR], timeout=60)
    except UserError:
        return None, ""
    pkg = res.stdout.strip()
    if res.exit_code != 0 or not pkg:
        return None, ""
    models = posixpath.join(pkg, "srt", "models")
    try:
        grep = await host.run(["grep", "-l", "-E", f"^class {re.escape(arch)}\\b", "-r", models, "--include=*.py"],
                              timeout=60)
    except UserError:
        return None, ""
    files = [f for f in grep.stdout.splitlines() if f.endswith(".py")]
    if not files:
        return None, f"no model file for {arch} under {models}"
    path = files[0]
    try:
        text = await host.read_text(path)
    except UserError:
        return None, ""
    for marker in _PATCH_MARKERS:
        if marker.search(text):
            return True, f"{path} handles layer id -1 ({marker.pattern!r} found)"
    return False, f"{path} has no embedding capture for layer id -1 (no capture_embedding / val >= 0 handling)"


async def read_target(host: Host, spec: LaunchSpec | None, profile: Profile) -> TargetInfo:
    """Draft config (text), target sizes, fc width, embed-capture support."""
    t = TargetInfo()
    args = None
    if spec is not None and _is_sglang(spec):
        with contextlib.suppress(UserError):
            args = launch.parse_launch(spec.argv)
    draft_dir, model_dir = await _model_dirs(host, spec, args, profile, t)
    if draft_dir:
        path = posixpath.join(draft_dir, "config.json")
        with contextlib.suppress(UserError):
            t.draft_text = await host.read_text(path)
            t.draft_config_path = path
        card = posixpath.join(draft_dir, "README.md")
        with contextlib.suppress(UserError):
            t.draft_card = (await host.read_text(card))[:200_000]
            t.draft_card_path = card
    if model_dir:
        await _read_target_config(host, model_dir, t)
        tok_dir = _resolve(args.flag_value("--tokenizer-path"), spec.cwd if spec else None) if args else None
        t.chat_template = await read_chat_template(host, tok_dir or model_dir, args, spec.cwd if spec else None)
        t.tokenizer_read = t.chat_template is not None or any(
            [await _exists(host, posixpath.join(tok_dir or model_dir, n)) for n in ("tokenizer_config.json",
                                                                               "tokenizer.json")])
    if draft_dir:
        await _read_checkpoint(host, draft_dir, t)
    if spec is not None and not _is_sglang(spec):
        t.installed_fallback = False  # SGLang's release table says nothing about another engine's release
    if spec is not None and _is_sglang(spec):  # SGLang's installed source: what no other engine has
        if args is not None and args.kind == launch.KIND_SIM:
            _sim_arch(args, t)
        t.installed, _source = await read_installed(host, spec, profile, t.arch, t.num_layers)
        t.installed_fallback = not (args is not None and args.kind == launch.KIND_SIM)
        if t.installed is not None:
            a = t.installed
            t.embed_capture = a.embed_capture
            t.embed_capture_source = (f"SGLang {a.version or '?'} ({a.source}{', patched' if a.patched else ''}) "
                                      f"{'captures' if a.embed_capture else 'does not capture'} the embedding for "
                                      f"layer id -1 on {a.arch.architecture}")
        else:
            t.embed_capture, t.embed_capture_source = await embed_capture_support(host, spec, profile, t.arch)
    return t


def _is_sglang(spec: LaunchSpec) -> bool:
    """SGLang's (or the sim's) launch command; a command no engine owns counts as SGLang's (its error says)."""
    try:
        return spec.engine.name == "sglang"
    except UserError:
        return True


def _engine_launch(spec: LaunchSpec) -> Launch | None:
    try:
        return spec.engine.parse_launch(spec.argv)
    except UserError:
        return None


async def _hub_cache(host: Host, spec: LaunchSpec) -> str:
    """The server's hub cache (discovery read it from the server's environment), else the one its
    launch env gives, `~` as the host's HOME."""
    if spec.hf_cache:
        return spec.hf_cache
    cache = hub_cache_dir(spec.env)
    if cache.startswith("~"):
        with contextlib.suppress(UserError):
            res = await host.run(["sh", "-c", 'printf "%s" "$HOME"'], timeout=10)
            if res.exit_code == 0 and res.stdout.startswith("/"):
                cache = hub_cache_dir({**spec.env, "HOME": res.stdout})
    return cache


async def _model_dirs(
    host: Host, spec: LaunchSpec | None, args: launch.LaunchArgs | None, profile: Profile, t: TargetInfo
) -> tuple[str | None, str | None]:
    """The draft and target directories: the launch command's paths (a Hugging Face repo id through the
    server's hub cache), else the profile's. An id not in the cache leaves its sentence in `t.unresolved`."""
    cwd = spec.cwd if spec else None
    other = _engine_launch(spec) if spec is not None and args is None else None  # vLLM's model and draft
    found: list[str | None] = []
    for role, given, revision_flag, fallback in (
        ("draft", args.draft_model_path if args else other.draft_model if other else None,
         "--speculative-draft-model-revision", profile.draft_path),
        ("target", args.model_path if args else other.model if other else None, "--revision", profile.target_path),
    ):
        path = _resolve(fallback, cwd)
        if given and spec is not None and (args is not None or other is not None):
            cache = await _hub_cache(host, spec) if repo_id_of(given) else ""
            got = await resolve_model_path(host, given, cwd=cwd, cache=cache, role=role,
                                           revision=args.flag_value(revision_flag) if args is not None else None)
            if got.problem is not None and path is None:
                t.unresolved.append(got.problem)
            path = got.path or path
        found.append(path)
    return found[0], found[1]


def _sim_arch(args: launch.LaunchArgs, t: TargetInfo) -> None:
    """The sim's declared target architecture (`--sim-target-arch`) stands for the tiny world's config."""
    from eagle3_tui.sglang.installed import lookup

    declared = args.flag_value(SIM_ARCH_FLAG)
    if declared:
        with contextlib.suppress(UserError):
            t.arch = lookup(declared).architecture


def server_env_argv(spec: LaunchSpec, argv: list[str]) -> list[str]:
    """`argv` run with the server's own PYTHONPATH (the rest of its import path is its interpreter's)."""
    env = [f"{k}={v}" for k, v in spec.env.items() if k == "PYTHONPATH"]
    return ["env", *env, *argv] if env else argv


async def locate_sglang(host: Host, spec: LaunchSpec, profile: Profile) -> str | None:
    """The sglang package directory the server imports: its interpreter, PYTHONPATH and cwd ask find_spec."""
    from eagle3_tui.sglang.installed.locate import find_argv, package_dir_from

    python = _server_python(spec, profile)
    if python is None:
        return None
    try:
        res = await host.run(server_env_argv(spec, find_argv(python)), cwd=spec.cwd or None, timeout=60)
    except UserError:
        return None
    return package_dir_from(res.stdout) if res.exit_code == 0 else None


async def read_installed(
    host: Host, spec: LaunchSpec, profile: Profile, arch: str | None, num_layers: int | None
) -> tuple[Answer | None, str]:
    """The installed SGLang's answer for the target (no id key) and where it was read.

    The sim: the table for its `--sglang-version`. Real SGLang: only the files the model needs, read
    from the package the server imports; None when that cannot be found (the session then falls back to
    `/server_info`'s version, see `installed_for_version`).
    """
    from eagle3_tui.sglang.installed import answer, gather, lookup, read_release

    if not arch or not num_layers:
        return None, ""
    try:
        target = lookup(arch)
        args = launch.parse_launch(spec.argv)
    except UserError:
        return None, ""
    if args.kind == launch.KIND_SIM:
        version = args.flag_value(SIM_VERSION_FLAG)
        if not version:
            return None, ""
        return answer(read_release(None, version=version), target, num_layers, None), f"sim {SIM_VERSION_FLAG} {version}"
    root = await locate_sglang(host, spec, profile)
    if root is None:
        return None, ""

    loop = asyncio.get_running_loop()

    async def read_on_loop(rel: str) -> str | None:
        try:
            return str(await host.read_text(f"{root}/{rel}"))
        except UserError:
            return None

    async def fetch(rel: str) -> str | None:  # in the worker's loop; the host's I/O stays on the session's
        try:
            return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(read_on_loop(rel), loop))
        except RuntimeError:  # the session's loop closed meanwhile: nothing more to read
            return None

    def analyse(read: Read) -> Answer:
        return answer(read_release(read), target, num_layers, None)

    # Parsing SGLang's source takes a second or more: off the event loop, so the console stays live.
    got, files = await asyncio.to_thread(asyncio.run, gather(fetch, analyse))
    if not any(text is not None for text in files.values()):
        return None, ""
    return got, root


def installed_for_version(version: str | None, arch: str | None, num_layers: int | None) -> Answer | None:
    """The version table's answer (`/server_info`'s version), for a server whose source could not be read."""
    from eagle3_tui.sglang.installed import answer, lookup, read_release

    if not version or not arch or not num_layers:
        return None
    try:
        return answer(read_release(None, version=version), lookup(arch), num_layers, None)
    except UserError:
        return None


async def _read_target_config(host: Host, model_dir: str, t: TargetInfo) -> None:
    path = posixpath.join(model_dir, "config.json")
    cfg = await _read_json(host, path)
    if cfg is None:
        return
    tc = _text_config(cfg)
    n = tc.get("num_hidden_layers")
    h = tc.get("hidden_size")
    t.num_layers = n if isinstance(n, int) else None
    t.hidden_size = h if isinstance(h, int) else None
    archs = tc.get("architectures") or cfg.get("architectures")
    t.arch = str(archs[0]) if isinstance(archs, list) and archs else None
    rt = tc.get("rope_theta")
    t.target_rope_theta = float(rt) if isinstance(rt, (int, float)) else None
    t.target_config_path = path
    t.target_config = cfg
    await _read_quant_files(host, model_dir, t)


async def _read_quant_files(host: Host, model_dir: str, t: TargetInfo) -> None:
    """The quantization descriptions other vendors write beside config.json, and rotation-matrix files."""
    from eagle3_tui.eagle.quantization import QUANT_FILES, ROTATION_FILE_PATTERNS

    found: dict[str, Any] = {}
    for name in QUANT_FILES:
        path = posixpath.join(model_dir, name)
        if await _exists(host, path):
            data = await _read_json(host, path)
            if data is not None:
                found[path] = data
    t.target_quant_files = found
    rotation: list[str] = []
    for pattern in ROTATION_FILE_PATTERNS:
        with contextlib.suppress(UserError):
            rotation += [p for p in await host.glob(posixpath.join(model_dir, pattern)) if p not in rotation]
    t.target_rotation_files = tuple(rotation)


async def _exists(host: Host, path: str) -> bool:
    try:
        return await host.exists(path)
    except UserError:
        return False


async def read_chat_template(
    host: Host, tokenizer_dir: str, args: launch.LaunchArgs | None, cwd: str | None
) -> ServedTemplate | None:
    """The served chat template: `--chat-template` (a file read, else a built-in name), else the tokenizer
    folder's chat_template.jinja / chat_template.json / tokenizer_config.json (best effort)."""

    async def text(path: str | None) -> str | None:
        if not path:
            return None
        try:
            return await host.read_text(path)
        except UserError:
            return None

    flag = args.flag_value("--chat-template") if args is not None else None
    return served_template(
        await _read_json(host, posixpath.join(tokenizer_dir, "tokenizer_config.json")), tokenizer_dir,
        jinja_file=await text(posixpath.join(tokenizer_dir, "chat_template.jinja")),
        json_file=await text(posixpath.join(tokenizer_dir, "chat_template.json")),
        flag=flag, flag_text=await text(_resolve(flag, cwd)) if flag and ("/" in flag or "." in flag) else None,
    )


async def _read_checkpoint(host: Host, draft_dir: str, t: TargetInfo) -> None:
    tensors = await read_checkpoint_tensors(host, draft_dir)
    t.checkpoint_tensors = tensors
    t.checkpoint_path = draft_dir
    fc = (tensors or {}).get("fc.weight")
    if fc is not None and t.hidden_size and len(fc.shape) == 2 and fc.shape[1] % t.hidden_size == 0:
        t.fc_num_aux = fc.shape[1] // t.hidden_size


def client_options(spec: LaunchSpec | None, local_port: int, *, api_key: str | None = None) -> dict[str, Any]:
    """SGLangClient's base URL and credentials for the forwarded port, from the server's own command line:
    `--api-key K` is sent as a Bearer token (`api_key`, the profile's, wins: a server whose command line
    cannot be read); `--ssl-certfile` (0.5.12+) means https. The certificate names
    the server's host, not the 127.0.0.1 end of the forward, so it is not verified here (the SSH tunnel
    already authenticates the host)."""
    from eagle3_tui.sglang.client import base_url

    args = None
    if spec is not None:
        with contextlib.suppress(UserError):
            args = launch.parse_launch(spec.argv)
    key = api_key or (args.flag_value("--api-key") if args is not None else None)
    tls = args is not None and args.flag_value("--ssl-certfile") is not None
    return {"base_url": base_url("127.0.0.1", local_port, tls=tls), "api_key": key or None, "verify": not tls}
