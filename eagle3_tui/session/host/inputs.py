"""The doctor's findings about the inputs themselves: a draft config, checkpoint or data it could not read.

The doctor's rules reason over facts; a fact that could not be read is simply absent, and no rule
fires on an absence, so a broken input would read as "no findings". These findings say instead what
is broken, with the evidence, and what SGLang (or the check) will do with it. The draft config goes
through the one validating reader (`eagle3_tui.formats.readers`): invalid UTF-8, not JSON, NaN/Infinity,
nesting too deep, or not an object.
"""

from __future__ import annotations

import glob
import posixpath
from typing import TYPE_CHECKING

from eagle3_tui.doctor.findings import Evidence, Finding
from eagle3_tui.errors import UserError
from eagle3_tui.formats.readers import json_object

if TYPE_CHECKING:
    from eagle3_tui.profile import Profile
    from eagle3_tui.remote.host import Host
    from eagle3_tui.session.host.probe import TargetInfo

WEIGHT_PATTERNS = ("*.safetensors", "*.bin", "*.pt", "*.pth")


def draft_config_problem(path: str, data: bytes) -> str | None:
    """Why the draft config cannot be used (None: it is a readable JSON object)."""
    try:
        json_object(data, path)
    except UserError as err:
        return str(err)
    return None


def _finding(rule_id: str, title: str, evidence: list[Evidence], fix: str) -> Finding:
    return Finding(rule_id, "error", title, evidence, fix)


async def _draft_config(host: Host, draft_dir: str) -> Finding | None:
    path = posixpath.join(draft_dir, "config.json")
    try:
        data = await host.read_bytes(path)
    except UserError as err:
        return _finding("draft-config-unreadable", "the draft's config.json cannot be read",
                        [Evidence(path, str(err)),
                         Evidence("SGLang", "the draft model's config is loaded at start-up: the server will not start")],
                        "Restore config.json in the draft directory (a backup config.json.bak-* may sit beside it).")
    why = draft_config_problem(path, data)
    if why is None:
        return None
    return _finding("draft-config-malformed", "the draft's config.json is not a usable JSON object",
                    [Evidence(path, why),
                     Evidence("SGLang", "transformers refuses the config when the server loads the draft: "
                                        "the server will not start")],
                    "Fix or restore config.json (`eagle3-tui rollback` restores the one before the last preset).")


async def _checkpoint(host: Host, draft_dir: str, target: TargetInfo) -> Finding | None:
    if target.checkpoint_tensors:
        return None
    found: list[str] = []
    for pattern in WEIGHT_PATTERNS:
        try:
            found += await host.glob(posixpath.join(glob.escape(draft_dir), pattern))
        except UserError:
            continue
    safetensors = [f for f in found if f.endswith(".safetensors")]
    if found and not safetensors:
        return None  # .bin/.pt weights: their header is not read here, nothing to say
    detail = (f"{len(safetensors)} .safetensors file(s), none with a readable header (truncated or corrupt)"
              if safetensors else "no weight files (*.safetensors, *.bin, *.pt)")
    return _finding("checkpoint-unreadable", "the draft's weights cannot be read",
                    [Evidence(draft_dir, detail),
                     Evidence("SGLang", "the draft's weight loader fails at start-up (or the draft runs on "
                                        "random weights if a file is skipped)")],
                    "Copy the draft's weights again from where it was trained or exported.")


async def _data(host: Host, data_glob: str) -> Finding | None:
    try:
        files = await host.glob(data_glob)
    except UserError as err:
        files, why = [], str(err)
    else:
        why = "no file matches"
    if files:
        return None
    return _finding("data-unreadable", "the training data for the accuracy check cannot be found",
                    [Evidence(data_glob, why),
                     Evidence("accuracy check", "the check has no hidden states to feed the draft: it cannot run")],
                    "Set data_glob in the profile to the training data's hidden-state files.")


def _not_cached(sentence: str) -> Finding:
    return Finding("model-path-not-cached", "warning", "a launch-command model path is a Hugging Face repo id "
                   "that is not in the host's cache", [Evidence("launch command", sentence)],
                   "Give draft_path / target_path in the profile (the local directory the server loads).")


async def input_findings(host: Host, target: TargetInfo, profile: Profile, draft_dir: str | None) -> list[Finding]:
    """Findings for each input that could not be read: a repo-id model path not in the host's cache,
    draft config, checkpoint, training data."""
    out: list[Finding | None] = [_not_cached(s) for s in target.unresolved]
    if draft_dir:
        out.append(await _draft_config(host, draft_dir))
        out.append(await _checkpoint(host, draft_dir, target))
    if profile.data_glob:
        out.append(await _data(host, profile.data_glob))
    return [f for f in out if f is not None]
