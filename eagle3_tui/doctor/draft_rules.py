"""Load-time draft checks that need no training data, and the numbers the draft meets when served.

* `draft-architecture`: the draft config names a class the release does not load (a speculators export,
  an EAGLE-1/2 draft, the MLA draft before 0.5.12).
* `draft-layers`: more decoder layers than the release builds, when the release is unknown (with it,
  `will-not-start` says so).
* `draft-embedding`, `aux-config`: the checkpoint/config problems `eagle.checkpoint` finds.
* `d2t`: the vocabulary map missing, or holding values SGLang cannot use (absolute ids, out of range, zeros).
* `draft-context`: the draft's context window (`max_position_embeddings` x RoPE scaling) against the
  served window (SGLang's `--context-length`, vLLM's `--max-model-len`) or the target's, and what the engine
  and its release then do (refuse, crash, or run the draft past its window).
* `target-numerics`: what the target's weights (config.json's quantization_config and the other vendors'
  description files, `eagle.quantization`), `--quantization`, `--dtype` and `--kv-cache-dtype` (either engine's,
  through the seam) do to the hidden states the draft sees (a rotation such as QuaRot changes their basis).
"""

from __future__ import annotations

from typing import Any

from eagle3_tui.doctor.facts import Facts
from eagle3_tui.doctor.findings import Evidence, Finding, Severity, severity_rank
from eagle3_tui.doctor.path_rules import path_evidence, release_label, release_of
from eagle3_tui.doctor.release_rules import loader_keeps
from eagle3_tui.eagle import quantization
from eagle3_tui.eagle.checkpoint import MLA_DRAFT, flat_config
from eagle3_tui.engines import get_engine
from eagle3_tui.sglang.installed.specpath import CONTEXT_REFUSED, OVERWRITE_ENV, parse_bool
from eagle3_tui.vllm import diagnose as vllm_diagnose

DRAFT_ARCHITECTURE = "draft-architecture"
DRAFT_LAYERS = "draft-layers"
DRAFT_EMBEDDING = "draft-embedding"
AUX_CONFIG = "aux-config"
D2T = "d2t"
DRAFT_CONTEXT = "draft-context"
TARGET_NUMERICS = "target-numerics"

EAGLE3_DRAFT = "LlamaForCausalLMEagle3"
EAGLE12_DRAFTS = ("LlamaForCausalLMEagle", "Qwen2ForCausalLMEagle")
# sglang/srt/utils/hf_transformers_utils.py CONTEXT_LENGTH_KEYS (0.5.6-0.5.23): the first one present wins
CONTEXT_KEYS = ("max_sequence_length", "seq_length", "max_seq_len", "model_max_length", "max_position_embeddings")


def _src(f: Facts) -> str:
    return f.draft_config_path or "draft config"


def _ckpt(f: Facts) -> str:
    return f.checkpoint_path or "draft checkpoint"


def _serves_eagle3(f: Facts) -> bool:
    a = f.launch.algorithm if f.launch is not None else None
    return a is None or a.upper() == "EAGLE3"


def draft_architecture(f: Facts) -> Finding | None:
    """The draft config's class is not an EAGLE-3 draft the release loads."""
    c = f.draft_config
    if c is None or not _serves_eagle3(f):
        return None
    r = release_of(f)
    classes = r.path.draft_classes if r is not None and r.path.draft_classes else (EAGLE3_DRAFT,)
    first = c.architectures[0] if c.architectures else None
    if first in classes:
        return None
    who = release_label(r) if r is not None else "SGLang"
    ev = [Evidence(_src(f), f"architectures = [{first}]" if first else "no architectures"),
          Evidence(who, f"loads EAGLE-3 drafts as {', '.join(classes)}"
                        + (f" ({r.path.notes[0].how})" if r is not None and r.path.notes else ""))]
    if c.format == "speculators":
        title = "a speculators-format draft: SGLang cannot load it without converting it"
        fix = ("Convert it: copy transformer_layer_config's keys (sizes, rope_theta, max_position_embeddings) to "
               f"the top level, set architectures [\"{EAGLE3_DRAFT}\"], rename layers.0.* to midlayer.* (before "
               "0.5.12), and write the aux ids under eagle_config.eagle_aux_hidden_state_layer_ids in SGLang "
               "counting (speculators/vLLM id - 1).")
    elif first == MLA_DRAFT:
        title = f"an MLA EAGLE-3 draft ({MLA_DRAFT}): {who} has no such draft class"
        fix = f"Upgrade to SGLang >= 0.5.12 (kimi_k25_eagle3.py loads {MLA_DRAFT})."
    elif first in EAGLE12_DRAFTS:
        title = f"an EAGLE-1/2 draft ({first}) served with --speculative-algorithm EAGLE3"
        fix = "Serve it with --speculative-algorithm EAGLE, or point --speculative-draft-model-path at an EAGLE-3 draft."
    else:
        title = f"the draft config's architectures ({first or 'none'}) is not an EAGLE-3 draft class {who} loads"
        fix = f"Set architectures to [\"{EAGLE3_DRAFT}\"] if this is a Llama-style EAGLE-3 draft."
    return Finding(DRAFT_ARCHITECTURE, "error", title, ev, fix)


def draft_layers(f: Facts) -> Finding | None:
    """A multi-layer draft when the release is unknown (with it, will-not-start decides)."""
    c = f.draft_config
    if c is None or release_of(f) is not None:
        return None
    layers = flat_config(c.raw).get("num_hidden_layers")
    if not isinstance(layers, int) or isinstance(layers, bool) or layers <= 1:
        return None
    mla = bool(c.architectures) and c.architectures[0] == MLA_DRAFT
    return Finding(
        DRAFT_LAYERS, "warning",
        f"a {layers}-layer draft: SGLang "
        + ("refuses MLA drafts with more than one layer" if mla else "before 0.5.12 refuses drafts with more than one layer"),
        [Evidence(_src(f), f"num_hidden_layers = {layers}"),
         Evidence("SGLang rule", "llama_eagle3.py raises ValueError(\"EAGLE3 currently only supports 1 layer\") up to "
                                 "0.5.11; kimi_k25_eagle3.py (MLA) in every release")],
        "Check the deployed release (eagle3-tui sglang-info): serve a multi-layer draft on SGLang >= 0.5.12.")


def _issues(f: Facts, kind: str) -> list:
    return [i for i in (f.checkpoint_issues or []) if i.kind == kind and loader_keeps(f, i)]


def draft_embedding(f: Facts) -> Finding | None:
    """The embedding SGLang serves is not the one the draft was trained with."""
    issues = _issues(f, "embedding")
    if not issues:
        return None
    missing = any("stays random" in i.message for i in issues)
    return Finding(
        DRAFT_EMBEDDING, "error" if missing else "warning",
        "the draft's embedding as served is not the one it was trained with",
        [Evidence(_ckpt(f), i.message) for i in issues],
        "Save embed_tokens.weight in the checkpoint (the draft keeps its own embedding when its width differs "
        "from the target's)" if missing else
        "SGLang always swaps in the target's embedding when the widths match: serve a draft trained with the "
        "embedding frozen (embed_requires_grad false), or retrain it so.")


def aux_config(f: Facts) -> Finding | None:
    """The aux-state settings of the draft config that SGLang reads differently from training."""
    issues = _issues(f, "aux-config")
    if not issues:
        return None
    hard = any("use_aux_hidden_state" in i.tensor or "aux layers" in i.message for i in issues)
    fixes = []
    if any("use_aux_hidden_state" in i.tensor for i in issues):
        fixes.append("remove eagle_config.use_aux_hidden_state (or set it true)")
    if any("aux layers" in i.message for i in issues):
        fixes.append("serve the draft where fc is sized from the ids (SGLang >= 0.5.12) or list as many ids as fc takes")
    if any("rope_parameters" in i.tensor for i in issues):
        fixes.append("copy rope_theta (and rope_scaling) from rope_parameters to the top level of the draft config")
    return Finding(AUX_CONFIG, "error" if hard else "warning",
                   "the draft config's settings are read differently by SGLang than in training",
                   [Evidence(_src(f), i.message) for i in issues], "; ".join(fixes).capitalize() + ".")


def d2t(f: Facts) -> Finding | None:
    """The draft-to-target vocabulary map: missing, or values SGLang cannot use."""
    missing = [i for i in (f.checkpoint_issues or []) if i.kind == "missing" and i.tensor == "d2t"]
    bad = _issues(f, "d2t-range")
    if not missing and not bad:
        return None
    ev = [Evidence(_ckpt(f), i.message) for i in (*missing, *bad)]
    if missing:
        return Finding(
            D2T, "error", "the checkpoint has no d2t: SGLang reads draft ids as target ids",
            ev,
            "Export the training's vocabulary map into the checkpoint as d2t (int64 offsets, d2t[i] = target id "
            "of draft id i - i; SpecForge and speculators save it with the draft). Renaming tensors does not help.")
    absolute = any("absolute" in i.message for i in bad)
    zeros = any("all zero" in i.message for i in bad)
    if absolute:
        fix = "Store offsets: d2t[i] = target_id[i] - i (SGLang adds d2t to the draft id), not the target ids."
    elif zeros:
        fix = ("Export the vocabulary map the draft was trained with: a zero d2t is the trainer's initial buffer, "
               "so every draft id is served as the same-numbered target id.")
    else:
        fix = "Re-export d2t from the training's vocabulary map (offsets within the target vocabulary)."
    return Finding(D2T, "error", "d2t holds values SGLang cannot serve: draft tokens become the wrong target tokens",
                   ev, fix)


# --- the context window ---------------------------------------------------------------------------------


def derived_context(config: dict[str, Any]) -> tuple[int, str] | None:
    """(context length, how) as SGLang's `get_context_length` derives it from a config (None: no key)."""
    rs = config.get("rope_scaling")
    factor: float = 1.0
    how = ""
    if isinstance(rs, dict):
        raw = rs.get("factor", 1)
        factor = float(raw) if isinstance(raw, (int, float)) and not isinstance(raw, bool) else 1.0
        if "original_max_position_embeddings" in rs or rs.get("rope_type", rs.get("type")) == "llama3":
            factor = 1.0
        if factor != 1.0:
            how = f" x rope_scaling factor {factor:g}"
    for key in CONTEXT_KEYS:
        v = config.get(key)
        if isinstance(v, int) and not isinstance(v, bool):
            return int(factor * v), f"{key} {v}{how}"
    return None


def _text_config(cfg: dict[str, Any]) -> dict[str, Any]:
    tc = cfg.get("text_config")
    return tc if isinstance(tc, dict) else cfg


def draft_context(f: Facts) -> Finding | None:
    """The draft's context window against the served one: both engines run the draft over the target's
    positions (SGLang's eagle_worker.py sets the draft's context_length to the target's; vLLM's proposer feeds
    positions up to the target's max_model_len). What a longer request then does depends on the engine and its
    release: SGLang refuses to start, crashes, or runs the draft past its window; vLLM before 0.26 crashes."""
    c = f.draft_config
    if c is None:
        return None
    got = derived_context(flat_config(c.raw))
    if got is None:
        return None
    d_ctx, d_how = got
    engine = get_engine(f.engine)
    given = f.served_launch.numerics.context_length if f.served_launch is not None else None
    served: int | None = None
    if given is not None:
        served, s_how, s_src = given, f"{engine.context_flag} {given}", f.launch_source
    elif f.target_config is not None:
        t = derived_context(_text_config(f.target_config))
        if t is not None:
            served, s_how, s_src = t[0], f"the target's window, {t[1]}", f.target_config_path or "target config"
    if served is None or served <= d_ctx:
        return None
    ev = [Evidence(_src(f), f"the draft's window is {d_ctx} ({d_how})"),
          Evidence(s_src, f"the target's context length is {served} ({s_how}); the draft runs with it")]
    shorter = f"{engine.context_flag} {d_ctx}"
    if f.engine == "vllm":
        return _vllm_context(f, d_ctx, served, ev, shorter)
    r = release_of(f)
    env_value = (f.server_env or {}).get(OVERWRITE_ENV)
    allowed = parse_bool(env_value) if env_value is not None else None
    if env_value is not None:
        ev.append(Evidence("server environment", f"{OVERWRITE_ENV}={env_value}"))
    scaling = "give the draft config the rope_scaling it was trained with"
    if r is not None:
        ev += path_evidence(r, "context length", "max_position_embeddings")
        refused = r.path.context_check == CONTEXT_REFUSED and not allowed
        if refused:
            return Finding(
                DRAFT_CONTEXT, "error",
                f"this server will not start on {release_label(r)}: the target's context length {served} exceeds "
                f"the draft's window {d_ctx}",
                ev,
                f"Set {OVERWRITE_ENV}=1 (the draft then runs past its window), serve {shorter}, or {scaling}.")
        if r.path.draft_window_stretched is False:
            return Finding(
                DRAFT_CONTEXT, "error",
                f"requests past {d_ctx} tokens crash the server on {release_label(r)}: the draft's RoPE cache "
                f"has {d_ctx} positions",
                [*ev, Evidence("sglang issue #10713", "illegal memory access once a draft position passes "
                                                      "max_position_embeddings; fixed in 0.5.3 (PR #10787)")],
                f"Upgrade to SGLang >= 0.5.3 (it stretches the draft's window), serve {shorter}, or {scaling}.")
    return Finding(
        DRAFT_CONTEXT, "warning",
        f"requests past {d_ctx} tokens run the draft beyond its window (the target serves {served})",
        [*ev, Evidence("sglang issue #6783", "accept length falls on inputs longer than the draft's window")],
        f"Expect accept length to fall on requests longer than {d_ctx} tokens (the live view's #token buckets "
        f"show it); {scaling}, or serve a draft trained on longer sequences.")


def _vllm_context(f: Facts, d_ctx: int, served: int, ev: list[Evidence], shorter: str) -> Finding:
    """vLLM: before 0.26 the draft's rotary cache has d_ctx rows and a longer request indexes past it (issue
    #48894: a device-side assert under torch.compile, garbage reads with --enforce-eager); from 0.26 the draft's
    max_position_embeddings is raised to max_model_len and the draft runs past its trained window."""
    release = f.engine_release
    stretched = vllm_diagnose.draft_window_stretched(release)
    fixed = ".".join(map(str, vllm_diagnose.DRAFT_WINDOW_FIXED))
    who = f"vLLM {release}" if release else "vLLM"
    issue = Evidence("vllm issue #48894", f"a draft position past max_position_embeddings ({d_ctx}) indexes the "
                                          "draft's rotary cos_sin_cache out of bounds: a device-side assert "
                                          "(Triton `index out of bounds`) under torch.compile, silent garbage "
                                          f"reads with --enforce-eager; fixed by PR #49343 ({fixed}+)")
    raise_window = (f"or set \"max_position_embeddings\": {served} in the draft's config.json (what vLLM {fixed}+ "
                    "does itself)")
    if stretched:
        ev.append(Evidence(f"{who} config/speculative.py", "_maybe_override_draft_max_position_embeddings raises "
                                                           f"the draft's window to max_model_len {served}"))
        return Finding(DRAFT_CONTEXT, "warning",
                       f"requests past {d_ctx} tokens run the draft beyond the window it was trained on ({who} "
                       f"stretches it to {served}; no crash)", ev,
                       f"Expect accept length to fall on requests longer than {d_ctx} tokens; serve {shorter} if "
                       "no request needs more, or a draft trained on longer sequences.")
    eager = f.served_launch is not None and get_engine(f.engine).eager_flag in f.served_launch.argv
    if eager:
        title = (f"requests past {d_ctx} tokens read past the draft's RoPE cache on {who} with --enforce-eager: "
                 "garbage draft positions, accept length falls without a crash")
    else:
        title = (f"requests past {d_ctx} tokens crash {who}{'' if stretched is False else f' before {fixed}'}: "
                 "device-side assert in the draft's RoPE cache")
    return Finding(DRAFT_CONTEXT, "error" if stretched is False else "warning", title, [*ev, issue],
                   f"Serve {shorter} (vLLM's flag; it bounds every request), {raise_window}, or upgrade to vLLM "
                   f">= {fixed}.")


# --- target numerics ------------------------------------------------------------------------------------


def _verifier(f: Facts) -> str | None:
    c = f.draft_config
    if c is None:
        return None
    sc = c.raw.get("speculators_config")
    v = sc.get("verifier") if isinstance(sc, dict) else None
    name = v.get("name_or_path") if isinstance(v, dict) else None
    return name if isinstance(name, str) and name else None


def target_numerics(f: Facts) -> Finding | None:
    """The target's quantization, dtype and KV cache against what the draft was trained on."""
    judged: list[tuple[Severity, Evidence]] = []
    tsrc = f.target_config_path or "target config"
    tc = f.target_config or {}
    qc = tc.get("quantization_config") or _text_config(tc).get("quantization_config")
    files: dict[str, Any] = {f"{tsrc} quantization_config": qc} if isinstance(qc, dict) else {}
    files.update(f.target_quant_files or {})
    for d in quantization.describe(files, tuple(f.target_rotation_files)):
        if d.rotation is not None:
            judged.append(("warning", Evidence(d.source, f"{d.method} carries a rotation ({d.rotation}): the residual "
                                                         "stream, and so every hidden state the draft is fed, is in a "
                                                         "rotated basis")))
        else:
            judged.append(("info", Evidence(d.source, f"{d.method} (the hidden states differ slightly from a bf16 "
                                                      "target's)")))
    if f.served_launch is not None:
        n = f.served_launch.numerics
        q = n.quantization
        if q:
            judged.append(("info", Evidence(f.launch_source, f"--quantization {q}: the target is quantized at load")))
        kv = n.kv_cache_dtype
        if kv and kv != "auto":
            judged.append(("info", Evidence(f.launch_source, f"--kv-cache-dtype {kv}: the draft's KV cache is {kv} "
                                                             "too (it shares the server's setting)")))
        dt = n.dtype
        trained = f.draft_config.raw.get("torch_dtype") if f.draft_config is not None else None
        if dt and dt != "auto" and isinstance(trained, str) and _norm_dtype(dt) != _norm_dtype(trained):
            judged.append(("info", Evidence(f.launch_source, f"--dtype {dt}, the draft was saved in {trained}")))
    if not judged:
        return None
    judged.sort(key=lambda x: severity_rank(x[0]))
    worst = judged[0][0]
    ev = [e for _, e in judged]
    verifier = _verifier(f)
    if verifier is not None:
        ev.append(Evidence(_src(f), f"trained against {verifier} (speculators_config.verifier)"))
    if worst == "warning":
        return Finding(TARGET_NUMERICS, worst, "the target is rotated: a draft trained on the unrotated model sees "
                                               "hidden states in another basis (accept length near 1)", ev,
                       "Serve a draft trained on this rotated target's own hidden states, or the unrotated target.")
    return Finding(TARGET_NUMERICS, "info", "the target runs with other numerics than a bf16 checkpoint", ev,
                   "Nothing to fix unless the draft was trained on another precision: then compare the offline check "
                   "run on this target's hidden states with the live accept length.")


def _norm_dtype(name: str) -> str:
    n = name.lower().removeprefix("torch.")
    return {"half": "float16", "fp16": "float16", "bf16": "bfloat16", "float": "float32", "fp32": "float32"}.get(n, n)

