"""Rules on the draft checkpoint's tensors, as the installed release's draft loader sees them: fc's width,
weights the loader skips or lacks, norms it does not apply, shapes it cannot load. The issues come from
`eagle.checkpoint.check_tensors` (`Facts.checkpoint_issues`); a rule keeps those the installed loader still has.
"""

from __future__ import annotations

from eagle3_tui.doctor import release_rules as rel
from eagle3_tui.doctor.facts import Facts
from eagle3_tui.doctor.findings import Evidence, Finding

FC_WIDTH = "fc-width"
UNKNOWN_WEIGHTS = "unknown-weights"
IGNORED_NORMS = "ignored-norms"
CHECKPOINT_SHAPES = "checkpoint-shapes"

IDS_PATH = "eagle_config.eagle_aux_hidden_state_layer_ids"


def _config_source(f: Facts) -> str:
    return f.draft_config_path or "draft config"


def _ids(ids: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(i) for i in ids) + "]"


def _issues(f: Facts, *kinds: str) -> list:
    """Checkpoint issues of these kinds that still hold for the installed draft loader (all when unknown)."""
    return [i for i in (f.checkpoint_issues or []) if i.kind in kinds and rel.loader_keeps(f, i)]


def _ckpt_source(f: Facts) -> str:
    return f.checkpoint_path or "draft checkpoint"


def fc_width(f: Facts) -> Finding | None:
    """fc's input width differs from (number of aux states) x (target hidden size)."""
    issues = _issues(f, "fc-width")
    if not issues:
        return None
    ev = [Evidence(_ckpt_source(f), i.message) for i in issues]
    if f.draft_config is not None:
        ids = f.draft_config.sglang_layer_ids
        ev.append(Evidence(_config_source(f), f"{IDS_PATH} = {_ids(ids) if ids is not None else 'absent (3 states)'}"))
    if f.target_hidden_size is not None:
        ev.append(Evidence(f.target_config_path or "target config", f"hidden_size = {f.target_hidden_size}"))
    return Finding(
        FC_WIDTH,
        "error",
        "the draft's fc input width does not match the hidden states SGLang feeds it",
        ev,
        "Serve the draft with as many layer ids as its fc was trained for, on the target it was trained "
        "against (fc width = ids x target hidden size).",
    )


def unknown_weights(f: Facts) -> Finding | None:
    """Checkpoint tensors SGLang's loader skips (left random), and the ones it then lacks."""
    issues = [i for i in _issues(f, "unknown", "missing") if i.tensor != "d2t"]  # the d2t rule says that one
    if not issues:
        return None
    from eagle3_tui.eagle.checkpoint import summarize

    lines = summarize(issues)
    ev = [Evidence(_ckpt_source(f), line) for line in lines[:8]]
    if len(lines) > 8:
        ev.append(Evidence(_ckpt_source(f), f"... and {len(lines) - 8} more"))
    unknown = sum(1 for i in issues if i.kind == "unknown")
    missing = sum(1 for i in issues if i.kind == "missing")
    renamed = any(i.kind == "unknown" and i.tensor.removeprefix("model.").startswith("layers.0.") for i in issues)
    if renamed:
        fix = ("Serve with SGLang >= 0.5.12, which loads layers.0.*, or rename layers.0.* to midlayer.* and re-save "
               "the checkpoint.")
    elif unknown:
        fix = ("Export the draft with the names SGLang's llama_eagle3 loads (SpecForge's to_sglang export does), or "
               "drop the tensors no draft layer uses.")
    else:
        fix = "The checkpoint lacks weights the draft needs: export the whole trained draft again."
    return Finding(
        UNKNOWN_WEIGHTS,
        "error",
        f"{unknown} checkpoint tensors are skipped by SGLang's loader and {missing} it needs are missing: "
        f"those weights stay random",
        ev,
        fix,
    )


def ignored_norms(f: Facts) -> Finding | None:
    """Norm weights (input_norm/fc_norm) or norm flags that SGLang's draft does not apply."""
    issues = _issues(f, "ignored-norm")
    if not issues:
        return None
    return Finding(
        IGNORED_NORMS,
        "warning",
        "the draft was trained with norms SGLang's llama_eagle3 does not apply",
        [Evidence(_ckpt_source(f), i.message) for i in issues],
        _norms_fix(f, issues),
    )


# the first release whose llama_eagle3 applies each norm when the draft config sets its flag
# (sglang/installed/table.py's loader rows, read from the wheels)
_NORM_RELEASE = (("input_norm", "norm_before_fc", "0.5.17"), ("fc_norm", "fc_norm", "0.5.12"),
                 ("aux_norm", "fc_norm", "0.5.12"), ("norm_output", "norm_output", "0.5.12"))
_NEVER = ("norm_before_residual", "q_norm", "k_norm")


def _norms_fix(f: Facts, issues: list) -> str:
    """Upgrade to the first release that applies what the draft has, set the flag where the installed one
    does, and say which norms no release applies."""
    text = " ".join(f"{i.tensor} {i.message}" for i in issues)
    need = sorted({(release, flag) for key, flag, release in _NORM_RELEASE if key in text})
    never = [n for n in _NEVER if n in text]
    parts: list[str] = []
    own = rel.norms_fix(f)
    applies = set(f.installed.loader.applies) if f.installed is not None else set()
    later = [(release, flag) for release, flag in need if flag not in applies]
    if own and any(flag in applies for _, flag in need):
        parts.append(own.rstrip("."))
    if later:
        top = max(release for release, _ in later)
        parts.append(f"upgrade to SGLang >= {top}, which applies {', '.join(sorted({fl for _, fl in later}))} when "
                     "the draft config sets the flag")
    if never:
        parts.append(f"no SGLang release applies {', '.join(never)}: serve a draft trained without it")
    if not parts:
        return "Export a draft trained without these norms, or serve it where they are applied."
    out = "; ".join(parts)
    return out[0].upper() + out[1:] + "."


def checkpoint_shapes(f: Facts) -> Finding | None:
    """Tensors with shapes SGLang cannot load, or a d2t that maps outside the target vocabulary."""
    issues = _issues(f, "shape")
    if not issues:
        return None
    return Finding(
        CHECKPOINT_SHAPES,
        "error",
        "checkpoint tensors do not fit what SGLang's llama_eagle3 builds from the draft config",
        [Evidence(_ckpt_source(f), i.message) for i in issues],
        "Make the draft config's sizes match the checkpoint, then restart.",
    )
