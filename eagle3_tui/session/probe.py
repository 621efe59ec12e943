"""Reading what the session knows of the draft and the target from the host: draft and target
configs, the checkpoint header, whether the server's model file can capture the embedding (layer id -1).

Reads go through the `Host` (files, one small Python snippet for safetensors headers, one for the
SGLang source); nothing here writes. Every read is best effort: a missing fact stays None and the
rule that needs it stays silent.
"""

from __future__ import annotations

import base64
import contextlib
import json
import posixpath
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eagle3_tui.errors import UserError
from eagle3_tui.sglang import launch

if TYPE_CHECKING:
    from eagle3_tui.eagle.checkpoint import TensorInfo
    from eagle3_tui.profile import Profile
    from eagle3_tui.remote.host import Host
    from eagle3_tui.session.discovery import LaunchSpec

SIM_PATCH_FLAG = "--sim-embed-capture-patch"


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
    checkpoint_path: str | None = None
    checkpoint_tensors: dict[str, TensorInfo] | None = None

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
    if spec is not None:
        with contextlib.suppress(UserError):
            args = launch.parse_launch(spec.argv)
    cwd = spec.cwd if spec else None
    draft_dir = _resolve((args.draft_model_path if args else None) or profile.draft_path, cwd)
    model_dir = _resolve((args.model_path if args else None) or profile.target_path, cwd)
    if draft_dir:
        path = posixpath.join(draft_dir, "config.json")
        with contextlib.suppress(UserError):
            t.draft_text = await host.read_text(path)
            t.draft_config_path = path
    if model_dir:
        await _read_target_config(host, model_dir, t)
    if draft_dir:
        await _read_checkpoint(host, draft_dir, t)
    if spec is not None:
        t.embed_capture, t.embed_capture_source = await embed_capture_support(host, spec, profile, t.arch)
    return t


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


async def _read_checkpoint(host: Host, draft_dir: str, t: TargetInfo) -> None:
    tensors = await read_checkpoint_tensors(host, draft_dir)
    t.checkpoint_tensors = tensors
    t.checkpoint_path = draft_dir
    fc = (tensors or {}).get("fc.weight")
    if fc is not None and t.hidden_size and len(fc.shape) == 2 and fc.shape[1] % t.hidden_size == 0:
        t.fc_num_aux = fc.shape[1] // t.hidden_size
