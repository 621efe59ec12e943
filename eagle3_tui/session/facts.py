"""Gathering what the doctor needs from a host: draft and target configs, the checkpoint header,
whether the server's model file can capture the embedding (layer id -1), and the live numbers.

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
from typing import TYPE_CHECKING, Any

from eagle3_tui.errors import UserError
from eagle3_tui.sglang import launch

if TYPE_CHECKING:
    from eagle3_tui.doctor import Facts
    from eagle3_tui.profile import Profile
    from eagle3_tui.session.discovery import LaunchSpec
    from eagle3_tui.session.facade import Session, _Target

SIM_PATCH_FLAG = "--sim-embed-capture-patch"

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


async def _read_json(host: Any, path: str) -> dict[str, Any] | None:
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


async def read_checkpoint_tensors(host: Any, draft_dir: str) -> dict[str, Any] | None:
    from eagle3_tui.eagle.checkpoint import parse_safetensors_header

    try:
        res = await host.run([host.python, "-c", _HEADERS, draft_dir], timeout=60)
    except UserError:
        return None
    if res.exit_code != 0:
        return None
    tensors: dict[str, Any] = {}
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
    host: Any, spec: LaunchSpec, profile: Profile, arch: str | None
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


async def read_target(host: Any, spec: LaunchSpec | None, profile: Profile) -> _Target:
    """Draft config (text), target sizes, fc width, embed-capture support."""
    from eagle3_tui.session.facade import _Target

    t = _Target()
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
        cfg = await _read_json(host, posixpath.join(model_dir, "config.json"))
        if cfg is not None:
            tc = _text_config(cfg)
            n = tc.get("num_hidden_layers")
            h = tc.get("hidden_size")
            t.num_layers = n if isinstance(n, int) else None
            t.hidden_size = h if isinstance(h, int) else None
            archs = tc.get("architectures") or cfg.get("architectures")
            t.arch = str(archs[0]) if isinstance(archs, list) and archs else None
            rt = tc.get("rope_theta")
            t.extra["target_rope_theta"] = float(rt) if isinstance(rt, (int, float)) else None
            t.extra["target_config_path"] = posixpath.join(model_dir, "config.json")
    if draft_dir:
        tensors = await read_checkpoint_tensors(host, draft_dir)
        t.extra["checkpoint_tensors"] = tensors
        t.extra["checkpoint_path"] = draft_dir
        fc = (tensors or {}).get("fc.weight")
        if fc is not None and t.hidden_size and len(fc.shape) == 2 and fc.shape[1] % t.hidden_size == 0:
            t.fc_num_aux = fc.shape[1] // t.hidden_size
    if spec is not None:
        t.embed_capture, t.embed_capture_source = await embed_capture_support(host, spec, profile, t.arch)
    return t


def build_facts(session: Session) -> Facts:
    """Everything the session knows, as the doctor's Facts."""
    from eagle3_tui.doctor import Facts
    from eagle3_tui.eagle.draft_config import DraftConfig

    f = Facts()
    spec = session._spec
    t = session.target
    if spec is not None:
        with contextlib.suppress(UserError):
            f.launch = launch.parse_launch(spec.argv)
            f.effective = launch.effective(f.launch, target_arch=t.arch)
        pid = session.server.pid
        f.launch_source = f"process {pid}" if pid else "launch command (profile)"
    info = getattr(session, "_server_info", None)
    if isinstance(info, dict):
        f.server_args = info
    if t.draft_text is not None:
        with contextlib.suppress(UserError):
            f.draft_config = DraftConfig.parse(t.draft_text, source=t.draft_config_path or "draft config")
        f.draft_config_path = t.draft_config_path
    f.target_num_layers = t.num_layers
    f.target_hidden_size = t.hidden_size
    f.target_arch = t.arch
    f.target_rope_theta = t.extra.get("target_rope_theta")
    f.target_config_path = t.extra.get("target_config_path")
    f.checkpoint_path = t.extra.get("checkpoint_path")
    f.checkpoint_tensors = t.extra.get("checkpoint_tensors")
    f.embed_capture_supported = t.embed_capture
    f.embed_capture_evidence = t.embed_capture_source or None
    prof = session.profile
    if prof.data_slots:
        f.data_slot_boundaries = tuple(prof.data_slots)
        f.training_convention = "[:-1]"
        f.data_source = prof.data_glob or "profile data_slots"
    summ = session.telemetry.summary(120.0)
    f.live_accept_len = summ.accept_len
    f.live_gen_tps = summ.gen_tps
    bench = session.last_bench
    if bench is not None and not bench.baseline and session.server.speculative:
        f.live_gen_tps = bench.output_tps
        f.live_source = "benchmark"
        if bench.accept_len is not None and f.live_accept_len is None:
            f.live_accept_len = bench.accept_len
    f.baseline_tps = session.telemetry.baseline_tps
    f.predicted_accept_len = _predicted(session)
    f.server_info_accept_len = session.server.accept_len_server
    lines = session.telemetry.decode_lines
    f.log_decode_lines = lines
    if lines:
        f.log_has_accept_stats = len(session.telemetry.series["accept_len"]) > 0
    f.log_warnings = tuple(session._warnings)
    f.log_path = session.server.log_path
    return f


def _predicted(session: Session) -> float | None:
    """The check's predicted accept length for the wiring being served (by boundaries)."""
    report = session.check
    if report is None:
        return None
    served = session.server.boundaries
    results = getattr(report, "results", None) or getattr(report, "wirings", None) or []
    best = None
    for r in results:
        b = getattr(r, "boundaries", None)
        p = getattr(r, "predicted_accept_len", None)
        if p is None:
            continue
        if served is not None and b is not None and tuple(b) == tuple(served):
            return float(p)
        if best is None and getattr(r, "name", "") == "draft config":
            best = float(p)
    return best
