"""One small pure rule per failure mode (DESIGN.md's doctor table). Each takes the `Facts` and
returns a `Finding` or None; a rule missing the facts it needs says nothing.

Rule ids are stable: the UI, the JSON output and the tests key on them. `RULES` is the whole list in
tie-break order; the families live in their own modules: `release_rules` (capture as the installed release
does it), `path_rules` (its speculative path beyond capture: spec v2, graphs, switches), `draft_rules` (the
draft's class, layers, d2t, embedding, context window; the target's numerics), `checkpoint_rules` (tensors).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from eagle3_tui.doctor import draft_rules as dr
from eagle3_tui.doctor import path_rules as pr
from eagle3_tui.doctor import release_rules as rel
from eagle3_tui.doctor.chat_rules import CHAT_RULES
from eagle3_tui.doctor.checkpoint_rules import (
    CHECKPOINT_SHAPES,
    FC_WIDTH,
    IGNORED_NORMS,
    UNKNOWN_WEIGHTS,
    checkpoint_shapes,
    fc_width,
    ignored_norms,
    unknown_weights,
)
from eagle3_tui.doctor.facts import Facts
from eagle3_tui.doctor.findings import Evidence, Finding
from eagle3_tui.doctor.load_rules import LOAD_RULES
from eagle3_tui.eagle import wiring
from eagle3_tui.engines import get_engine
from eagle3_tui.sglang.launch import EffectiveSpec, effective

if TYPE_CHECKING:
    from eagle3_tui.sglang.installed import Answer

# Rule ids, in the order of DESIGN.md's table (also the tie-break order within a severity).
STEPS_OVERRIDE = "steps-override"
SPEC_FLAGS_INCOMPLETE = "spec-flags-incomplete"
CONFIG_KEY_IGNORED = "config-key-ignored"
EXPLICIT_DEFAULT_SHIFT = "explicit-default-shift"
EMBED_NEEDS_PATCH = "embed-needs-patch"
LAYER_OUT_OF_RANGE = "layer-out-of-range"
ROPE_THETA = "rope-theta"
WIRING_MISMATCH = "wiring-mismatch"
SPEC_SLOWER = "spec-slower-than-baseline"
ONLINE_OFFLINE_GAP = "online-offline-gap"
NO_ACCEPT_STATS = "no-accept-stats"

IDS_PATH = "eagle_config.eagle_aux_hidden_state_layer_ids"
# online-offline-gap: the live accept length realises less than this share of the extra tokens
# the check predicts (predicted - 1), and the gap is at least GAP_MIN_TOKENS.
GAP_SHARE = 0.6
GAP_MIN_TOKENS = 0.25


def _b(boundaries: Sequence[int] | None) -> str:
    return wiring.format_boundaries(boundaries)


def _ids(ids: Sequence[int]) -> str:
    return "[" + ", ".join(str(i) for i in ids) + "]"


def _config_source(f: Facts) -> str:
    return f.draft_config_path or "draft config"


def _spec(f: Facts) -> EffectiveSpec | None:
    if f.effective is not None:
        return f.effective
    if f.launch is not None:
        auto = f.installed.auto_spec if f.installed is not None else None
        return effective(f.launch, target_arch=f.target_arch, auto=auto)
    return None


def speculative_on(f: Facts) -> bool | None:
    """Whether the server speculates (None: unknown)."""
    spec = _spec(f)
    if spec is not None:
        return spec.speculative
    if f.server_args is not None:
        return f.server_args.get("speculative_algorithm") is not None
    return None


def served_boundaries(f: Facts) -> tuple[tuple[int, ...], str] | None:
    """(boundaries, how we know) of what the server feeds the draft."""
    if f.served_boundaries is not None:
        return tuple(f.served_boundaries), "reported"
    if f.engine != "sglang":
        if f.draft_config is None or f.target_num_layers is None:
            return None
        cap = get_engine(f.engine).captures(f.draft_config.raw, f.target_num_layers)
        how = f"{f.engine}'s default" if cap.ids is None else f"{cap.source} = {_ids(cap.ids)}, {f.engine}'s ids"
        return cap.boundaries, how
    a = rel.installed_for_ids(f)
    if a is not None and a.captures is not None and f.draft_config is not None:
        ids = f.draft_config.sglang_layer_ids
        what = f"no {IDS_PATH}: the default" if ids is None else f"{IDS_PATH} = {_ids(ids)}"
        return a.captures, f"{what}, as {rel.release_name(a)} captures it ({a.source})"
    if f.draft_config is not None and f.target_num_layers is not None:
        ids = f.draft_config.sglang_layer_ids
        b = f.draft_config.served_boundaries(f.target_num_layers)
        if ids is None:
            return b, f"SGLang's default for a {f.target_num_layers}-layer target (no {IDS_PATH})"
        return b, f"{IDS_PATH} = {_ids(ids)}, +1 each"
    return None


_SLICE = re.compile(r"^\s*\[\s*(-?\d+)?\s*:\s*(-?\d+)?\s*\]\s*$")


def trained_boundaries(f: Facts) -> tuple[tuple[int, ...], str] | None:
    """(boundaries, how we know) of what the trainer fed fc, from the data's slots and convention."""
    slots = f.data_slot_boundaries
    if not slots:
        return None
    num_aux = f.draft_config.num_aux if f.draft_config is not None else 3
    conv = f.training_convention
    if conv is None:
        if len(slots) == num_aux:
            conv, how = "[:]", "all slots (as many as the fc takes)"
        elif len(slots) == num_aux + 1:
            conv, how = "[:-1]", "assumed speculators' [:-1] (the last slot is the verifier's)"
        else:
            return None
    else:
        how = f"training convention {conv}"
    m = _SLICE.match(conv)
    if m is None:
        return None
    lo = int(m.group(1)) if m.group(1) else None
    hi = int(m.group(2)) if m.group(2) else None
    chosen = tuple(slots[lo:hi])
    return (chosen, how) if chosen else None


def uncapturable(f: Facts, boundaries: Sequence[int]) -> tuple[list[int], str] | None:
    """(the boundaries no id list captures, what captures what) on the installed release (else SGLang's
    generic loop over layers 0..N-1), or None when all can be captured or the target is unknown."""
    n = f.target_num_layers
    a = f.installed if f.installed is not None and f.installed.num_layers == n else None
    if n is None:
        return None
    top = a.max_boundary if a is not None else n - 1
    bad = [b for b in boundaries if b < 0 or b > top]
    if not bad:
        return None
    who = rel.release_name(a) if a is not None else "SGLang"
    return bad, f"{who} captures boundaries 0..{top} of this {n}-layer target"


def _unservable_fix(bad: list[int], how: str) -> str:
    shown = ", ".join(wiring.format_boundaries([b]) for b in bad)
    return (f"No layer-id list serves {shown}: {how}. Serve a draft trained on capturable boundaries (or a release "
            "whose model file captures the last layer's output).")


# --- the rules ------------------------------------------------------------------------------------


def steps_override(f: Facts) -> Finding | None:
    """topk 1 with num_draft_tokens != num_steps + 1: SGLang silently drafts num_steps + 1."""
    ev: list[Evidence] = []
    title = ""
    fix = ""
    a = f.launch
    if a is not None and a.eagle_topk == 1 and a.num_steps is not None and a.num_draft_tokens is not None:
        if a.num_draft_tokens != a.num_steps + 1:
            d, s = a.num_draft_tokens, a.num_steps
            ev.append(Evidence(f.launch_source, f"--speculative-num-steps {s} --speculative-eagle-topk 1 "
                                                f"--speculative-num-draft-tokens {d}"))
            ev.append(Evidence("SGLang rule", f"with topk 1 the draft tokens are forced to steps + 1 = {s + 1}"))
            title = f"--speculative-num-draft-tokens {d} is silently replaced by {s + 1} (topk 1)"
            fix = (f"With topk 1 SGLang drafts a chain of num_steps tokens: set --speculative-num-steps {d - 1} "
                   f"to draft {d} tokens, or --speculative-num-draft-tokens {s + 1} to say what really runs.")
    if f.server_args is not None and ev:
        got = f.server_args.get("speculative_num_draft_tokens")
        if got is not None:
            ev.append(Evidence("/server_info", f"speculative_num_draft_tokens = {got}"))
    warned = [w for w in f.log_warnings if "adjusted to speculative_num_steps + 1" in w]
    if warned:
        ev.append(Evidence(f.log_path or "server log", warned[0].strip()))
        if not title:
            title = "SGLang replaced --speculative-num-draft-tokens by num_steps + 1 (topk 1)"
            fix = ("With topk 1 SGLang drafts a chain of num_steps tokens: raise --speculative-num-steps "
                   "to draft more tokens, and set --speculative-num-draft-tokens to steps + 1.")
    if not title:
        return None
    return Finding(STEPS_OVERRIDE, "warning", title, ev, fix)


def spec_flags_incomplete(f: Facts) -> Finding | None:
    """topk or draft tokens without num_steps: SGLang's auto-choice asserts and the server never starts."""
    spec = _spec(f)
    a = f.launch
    if spec is None or a is None:
        return None
    if spec.error is None:
        return _steps_without_topk(f)
    given = [f"{flag} {v}" for flag, v in (("--speculative-eagle-topk", a.eagle_topk),
                                           ("--speculative-num-draft-tokens", a.num_draft_tokens)) if v is not None]
    return Finding(
        SPEC_FLAGS_INCOMPLETE,
        "error",
        "SGLang refuses these speculative flags: --speculative-num-steps is missing",
        [Evidence(f.launch_source, " ".join(given) + " without --speculative-num-steps"), Evidence("SGLang rule", spec.error)],
        "Give --speculative-num-steps as well (with topk 1: draft tokens - 1), or drop all three to let SGLang choose.",
    )


def _steps_without_topk(f: Facts) -> Finding | None:
    """--speculative-num-steps without topk where the release is unknown (known: will-not-start decides)."""
    a = f.launch
    if a is None or a.algorithm is None or a.num_steps is None or a.eagle_topk is not None:
        return None
    if f.release is not None or f.installed is not None:
        return None
    return Finding(
        SPEC_FLAGS_INCOMPLETE,
        "warning",
        "--speculative-num-steps without --speculative-eagle-topk: SGLang 0.5.2 and later refuse to start",
        [Evidence(f.launch_source, f"--speculative-num-steps {a.num_steps} without --speculative-eagle-topk"),
         Evidence("SGLang versions", "from 0.5.2 the flag handling compares `speculative_eagle_topk > 1` with topk "
                                     "None (TypeError at start-up); the installed release is unknown here")],
        "Give --speculative-eagle-topk too (1 for a chain, with --speculative-num-draft-tokens = steps + 1).",
    )


def config_key_ignored(f: Facts) -> Finding | None:
    """Layer ids where SGLang does not look (top level, or malformed under eagle_config)."""
    c = f.draft_config
    if c is None or c.sglang_layer_ids is not None:
        return None
    src = _config_source(f)
    if c.top_level_layer_ids is None and not c.problems:
        return None
    ev: list[Evidence] = []
    severity = "error"
    fix_ids: tuple[int, ...] | None = None
    meant: tuple[int, ...] = ()
    needs_patch = False
    if c.top_level_layer_ids is not None:
        top = c.top_level_layer_ids
        ev.append(Evidence(src, f"top-level eagle_aux_hidden_state_layer_ids = {_ids(top)} (vLLM/speculators style)"))
        ev.append(Evidence(src, f"no {IDS_PATH}: SGLang reads only that key and falls back to its default"))
        meant = tuple(wiring.ids_to_boundaries("vllm", top))
        fix_ids, needs_patch = rel.ids_for(f, meant)
        n = f.target_num_layers
        if n is not None:
            default = wiring.sglang_default_boundaries(n)
            ev.append(Evidence("SGLang", f"serves boundaries {_b(default)} instead of {_b(meant)} (vLLM counting)"))
            if tuple(sorted(meant)) == default:
                severity = "info"
    for p in c.problems:
        ev.append(Evidence(src, p))
    title = "the draft's layer ids are not where SGLang reads them; it serves its default layers"
    if severity == "info":
        title = "the draft's layer ids are top-level (ignored by SGLang), but they equal SGLang's default"
    beyond = uncapturable(f, meant) if c.top_level_layer_ids is not None else None
    if beyond is not None:
        fix = _unservable_fix(*beyond)
    elif fix_ids is not None:
        patch = " with the embed-capture patch for -1" if needs_patch else ""
        fix = (f"Write the ids as {IDS_PATH} = {_ids(fix_ids)} (the same boundaries as SGLang counts them)"
               f"{patch}, or apply a preset.")
    else:
        fix = f"Write the ids as a list of integers under {IDS_PATH}, or apply a preset."
    return Finding(CONFIG_KEY_IGNORED, severity, title, ev, fix)  # type: ignore[arg-type]


def explicit_default_shift(f: Facts) -> Finding | None:
    """Explicit ids equal to SGLang's default boundaries: the +1 makes them capture other layers."""
    c, n = f.draft_config, f.target_num_layers
    if c is None or n is None or c.sglang_layer_ids is None:
        return None
    default = wiring.sglang_default_boundaries(n)
    ids = c.sglang_layer_ids
    if tuple(sorted(set(ids))) != default:
        return None
    a = rel.installed_for_ids(f)
    if a is not None:
        if a.captures is None or tuple(a.captures) == default:
            return None  # the release takes these ids verbatim (or fails: will-not-start says so)
        got = tuple(a.captures)
        rule_ev = [Evidence(rel.release_name(a), f"captures {_b(got)} for these ids, not the default {_b(default)} "
                                                 "that the same numbers mean without the key"),
                   *rel.evidence(a, rel.capture_notes(a)[:1])]
    else:
        got = wiring.sglang_ids_to_boundaries(ids, n)
        rule_ev = [
            Evidence("SGLang rule", f"explicit ids are shifted by +1: boundaries {_b(got)}, "
                                    f"not the default {_b(default)} that the same numbers mean without the key"),
            Evidence("SGLang versions", "from 0.5.13 deepseek_v2.py and glm4_moe_lite.py skip the +1 when the "
                                        "first id is not 1; check the deployed release (eagle3-tui sglang-info)"),
        ]
    want_ids, _ = rel.ids_for(f, default)
    return Finding(
        EXPLICIT_DEFAULT_SHIFT,
        "warning",
        f"layer ids {_ids(ids)} look like SGLang's default but capture boundaries {_b(got)}",
        [Evidence(_config_source(f), f"{IDS_PATH} = {_ids(ids)}"), *rule_ev],
        f"Write {_ids(want_ids)} (SGLang's default in its +1 counting) or remove the key, "
        f"unless the draft was trained on {_b(got)}.",
    )


def embed_needs_patch(f: Facts) -> Finding | None:
    """-1 (the embedding) in the ids, but the server's model file cannot capture it."""
    c = f.draft_config
    if c is None or c.sglang_layer_ids is None or -1 not in c.sglang_layer_ids:
        return None
    if f.embed_capture_supported:
        return None
    ev = [Evidence(_config_source(f), f"{IDS_PATH} = {_ids(c.sglang_layer_ids)}: -1 asks for the embedding output")]
    a = rel.installed_for_ids(f)
    if a is not None and f.embed_capture_supported is None:
        return _embed_by_release(a, ev)
    if f.embed_capture_supported is None:
        ev.append(Evidence("server model file", f.embed_capture_evidence or "could not be read to check for embedding capture"))
        return Finding(
            EMBED_NEEDS_PATCH,
            "info",
            "layer id -1 needs the embed-capture patch; whether the server has it is unknown",
            ev,
            "Check that the server's model file captures the embedding for id -1 (stock SGLang crashes on it).",
        )
    ev.append(Evidence("server model file", f.embed_capture_evidence or "no embedding capture for id -1"))
    ev.append(Evidence("SGLang", "stock model files turn -1 into loop index 0 and fail on `hidden_states + None`"))
    return Finding(
        EMBED_NEEDS_PATCH,
        "error",
        "layer id -1 (the embedding) is configured but the server's model file cannot capture it",
        ev,
        "Apply the embed-capture patch to the server's model file (append the embedding output before the "
        "layer loop when -1 is listed), or use ids without -1.",
    )


def _embed_by_release(a: Answer, ev: list[Evidence]) -> Finding | None:
    """embed-needs-patch as the installed release decides it: silent where -1 is captured."""
    if a.embed_capture:
        return None
    ev += rel.evidence(a, rel.capture_notes(a)[:2])
    if a.fails:
        ev.append(Evidence(rel.release_name(a), a.fails))
    if a.embed_id is not None:
        fix = (f"{rel.release_name(a)} captures the embedding for id {a.embed_id}: write {a.embed_id} instead of -1 "
               "(it takes ids verbatim unless the first is 1).")
    else:
        fix = ("Apply the embed-capture patch to the server's model file (append the embedding output before the "
               "layer loop when -1 is listed), upgrade to a release that captures it, or use ids without -1.")
    title = "layer id -1 (the embedding) is configured but " + (
        "the server will not start: its model file cannot capture it" if a.fails else "it is never captured")
    return Finding(EMBED_NEEDS_PATCH, "error", title, ev, fix)


def layer_out_of_range(f: Facts) -> Finding | None:
    """An id whose boundary SGLang's layer loop never reaches."""
    c, n = f.draft_config, f.target_num_layers
    if c is None or n is None or c.sglang_layer_ids is None:
        return None
    ids = c.sglang_layer_ids
    pairs = _requested_pairs(f, ids)
    rule = Evidence("SGLang rule", f"id j captures boundary j+1, the input of layer j+1; layers are 0..{n - 1}, "
                                   f"so ids -1..{n - 2} are the only ones captured")
    a = rel.installed_for_ids(f)
    if pairs is not None and a is not None:
        top = a.max_boundary
        bad_pairs = [(i, b) for i, b in pairs if i != -1 and (b < 0 or b > top)]
        rule = Evidence(rel.release_name(a), f"captures boundaries 0..{top} of this {n}-layer target "
                                             f"(ids map as read from its source, {a.source})")
    else:
        bad_pairs = [(i, i + 1) for i in ids if i < -1 or i + 1 >= n]
    bad = [i for i, _ in bad_pairs]
    if not bad:
        return None
    ev = [
        Evidence(_config_source(f), f"{IDS_PATH} = {_ids(ids)}"),
        Evidence(f.target_config_path or "target config", f"num_hidden_layers = {n}"),
        rule,
    ]
    for i, b in bad_pairs:
        ev.append(Evidence("out of range", f"id {i} -> boundary {b}: never captured"))
    return Finding(
        LAYER_OUT_OF_RANGE,
        "error",
        f"layer id{'s' if len(bad) > 1 else ''} {', '.join(map(str, bad))} {'are' if len(bad) > 1 else 'is'} "
        f"outside the {n}-layer target: fewer hidden states reach the draft's fc",
        ev,
        f"Use ids between -1 and {n - 2} (boundaries 0..{n - 1}), such as SGLang's default {_ids(wiring.default_ids('sglang', n))}.",
    )


def _requested_pairs(f: Facts, ids: Sequence[int]) -> list[tuple[int, int]] | None:
    """(id, boundary the installed release asks for) pairs, when the answer maps ids one to one."""
    a = rel.installed_for_ids(f)
    if a is None or a.requested is None or a.patched or len(a.requested) != len(ids):
        return None
    return list(zip(ids, a.requested, strict=True))


def rope_theta(f: Facts) -> Finding | None:
    """Draft config without a top-level rope_theta: SGLang's draft uses 10000."""
    c = f.draft_config
    if c is None or c.rope_theta is not None:
        return None
    # The draft's RoPE comes from its own config, never from the target's: the fallback is harmless
    # when the value the draft was trained with (its nested config, else the target's) is 10000.
    trained = c.nested_rope_theta if c.nested_rope_theta is not None else f.target_rope_theta
    if trained is not None and float(trained) == 10000.0:
        return None
    ev = [Evidence(_config_source(f), "no top-level rope_theta: SGLang's draft falls back to 10000")]
    want = c.nested_rope_theta
    if c.nested_rope_theta is not None:
        ev.append(Evidence(_config_source(f), f"transformer_layer_config.rope_theta = {c.nested_rope_theta:g} "
                                              "(speculators style; SGLang does not read it)"))
    if f.target_rope_theta is not None:
        ev.append(Evidence(f.target_config_path or "target config", f"rope_theta = {f.target_rope_theta:g}"))
        want = want if want is not None else f.target_rope_theta
    value = f"{want:g}" if want is not None else "the value the draft was trained with"
    return Finding(
        ROPE_THETA,
        "warning",
        "the draft config has no rope_theta, so SGLang runs the draft with 10000",
        ev,
        f"Add \"rope_theta\": {value} at the top level of the draft config.",
    )


def wiring_mismatch(f: Facts) -> Finding | None:
    """The boundaries the draft was trained on differ from the boundaries served."""
    trained = trained_boundaries(f)
    served = served_boundaries(f)
    if trained is None or served is None:
        return None
    (tb, how_t), (sb, how_s) = trained, served
    if tuple(sorted(tb)) == tuple(sorted(sb)):
        return None
    if f.engine != "sglang":  # the ids in that engine's meaning (vLLM's are the boundaries)
        engine = get_engine(f.engine)
        ev = [Evidence(f.data_source or "training data", f"slots hold boundaries {_b(f.data_slot_boundaries)}; "
                                                         f"the trainer fed {_b(tb)} ({how_t})"),
              Evidence(_config_source(f) if f.draft_config is not None else "server", f"served: {_b(sb)} ({how_s})")]
        never = engine.uncaptured(sorted(tb), f.target_num_layers or max(tb))
        fix = (f"{engine.name} never captures boundaries {_b(never)}: retrain on boundaries it serves." if never else
               f"Set the top-level {engine.ids_key} to {_ids(engine.boundaries_to_ids(sorted(tb)))} "
               f"({engine.name}'s ids are the boundaries {_b(sorted(tb))}) and restart the server.")
        return Finding(WIRING_MISMATCH, "error", f"the draft was trained on {_b(tb)} but is served {_b(sb)}", ev, fix)
    ids, needs_patch = rel.ids_for(f, sorted(tb))
    ev = [
        Evidence(f.data_source or "training data", f"slots hold boundaries {_b(f.data_slot_boundaries)}; "
                                                   f"the trainer fed {_b(tb)} ({how_t})"),
        Evidence(_config_source(f) if f.draft_config is not None else "server", f"served: {_b(sb)} ({how_s})"),
    ]
    if f.installed is not None and not needs_patch:
        ev.append(Evidence(rel.release_name(f.installed), f"captures {_b(sorted(tb))} for ids {_ids(ids)}"))
    patch = ""
    if needs_patch:
        patch = " with the embed-capture patch"
        if f.embed_capture_supported is False:
            ev.append(Evidence("server model file", f.embed_capture_evidence or "no embedding capture for id -1"))
    beyond = uncapturable(f, tb)
    fix = (_unservable_fix(*beyond) if beyond is not None else
           f"Set {IDS_PATH} to {_ids(ids)} (boundaries {_b(sorted(tb))}){patch} and restart the server.")
    return Finding(
        WIRING_MISMATCH,
        "error",
        f"the draft was trained on {_b(tb)} but is served {_b(sb)}",
        ev,
        fix,
    )


def spec_slower_than_baseline(f: Facts) -> Finding | None:
    """tok/s with speculation below the no-speculation baseline."""
    if f.live_gen_tps is None or f.baseline_tps is None or f.baseline_tps <= 0:
        return None
    if speculative_on(f) is False or f.live_gen_tps >= f.baseline_tps:
        return None
    ev = [
        Evidence(f.live_source, f"{f.live_gen_tps:.1f} tok/s with speculation"),
        Evidence("baseline", f"{f.baseline_tps:.1f} tok/s without speculation"),
        Evidence("speedup", f"{f.live_gen_tps / f.baseline_tps:.2f}x"),
    ]
    if f.live_accept_len is not None:
        ev.append(Evidence(f.live_source, f"accept length {f.live_accept_len:.2f}"))
    return Finding(
        SPEC_SLOWER,
        "warning",
        f"speculation is slower than no speculation ({f.live_gen_tps:.1f} vs {f.baseline_tps:.1f} tok/s)",
        ev,
        "Fix the wiring and flag findings first, then benchmark a few --speculative-num-steps values; "
        "if none beats the baseline, serve without speculation.",
    )


def online_offline_gap(f: Facts) -> Finding | None:
    """Live accept length far below what the offline check predicts for these flags."""
    pred = f.predicted_accept_len
    live, source = f.live_accept_len, f.live_source
    if live is None and f.server_info_accept_len is not None:
        live, source = f.server_info_accept_len, "/server_info avg_spec_accept_length"
    if pred is None or live is None or pred <= 1.0:
        return None
    if live > 1.0 + GAP_SHARE * (pred - 1.0) or pred - live < GAP_MIN_TOKENS:
        return None
    share = (live - 1.0) / (pred - 1.0)
    ev = [
        Evidence(source, f"accept length {live:.2f}"),
        Evidence(f.predicted_source, f"predicted accept length {pred:.2f} for the served wiring and flags"),
        Evidence("gap", f"the server realises {max(share, 0.0):.0%} of the predicted extra tokens per step"),
    ]
    spec = _spec(f)
    if spec is not None and spec.steps is not None:
        ev.append(Evidence("effective flags", f"steps {spec.steps}, topk {spec.topk}, draft tokens {spec.draft_tokens}"))
    return Finding(
        ONLINE_OFFLINE_GAP,
        "warning",
        f"live accept length {live:.2f} is far below the {pred:.2f} the offline check predicts",
        ev,
        "Compare what the server feeds the draft with what the check fed it: boundaries, embedding capture "
        "under tensor parallelism, norms and the draft config the server really loaded.",
    )


def no_accept_stats(f: Facts) -> Finding | None:
    """Speculation on, decode lines logged, none with an accept length (older SGLang)."""
    if f.log_has_accept_stats is not False or not f.log_decode_lines:
        return None
    if speculative_on(f) is not True:
        return None
    ev = [Evidence(f.log_path or "server log", f"{f.log_decode_lines} decode lines, none with `accept len`")]
    if f.server_info_accept_len is not None:
        ev.append(Evidence("/server_info", f"avg_spec_accept_length = {f.server_info_accept_len:.2f}"))
    return Finding(
        NO_ACCEPT_STATS,
        "info",
        "the server log has no accept length (older SGLang); the live chart uses /server_info instead",
        ev,
        "Read internal_states[0].avg_spec_accept_length from /server_info (the console polls it) or upgrade SGLang.",
    )


Rule = Callable[[Facts], "Finding | None"]

RULES: tuple[tuple[str, Rule], ...] = (
    (STEPS_OVERRIDE, steps_override),
    (SPEC_FLAGS_INCOMPLETE, spec_flags_incomplete),
    (rel.WILL_NOT_START, rel.will_not_start),
    (rel.EAGLE_NOT_EAGLE3, rel.eagle_not_eagle3),
    *pr.PATH_RULES,
    (dr.DRAFT_ARCHITECTURE, dr.draft_architecture),
    (dr.DRAFT_LAYERS, dr.draft_layers),
    (dr.D2T, dr.d2t),
    (CONFIG_KEY_IGNORED, config_key_ignored),
    (EXPLICIT_DEFAULT_SHIFT, explicit_default_shift),
    (EMBED_NEEDS_PATCH, embed_needs_patch),
    (LAYER_OUT_OF_RANGE, layer_out_of_range),
    (FC_WIDTH, fc_width),
    (UNKNOWN_WEIGHTS, unknown_weights),
    (IGNORED_NORMS, ignored_norms),
    (CHECKPOINT_SHAPES, checkpoint_shapes),
    (dr.DRAFT_EMBEDDING, dr.draft_embedding),
    (dr.AUX_CONFIG, dr.aux_config),
    (ROPE_THETA, rope_theta),
    (dr.DRAFT_CONTEXT, dr.draft_context),
    (dr.TARGET_NUMERICS, dr.target_numerics),
    (WIRING_MISMATCH, wiring_mismatch),
    *CHAT_RULES,
    (rel.IDS_PREFILL_ONLY, rel.ids_prefill_only),
    (SPEC_SLOWER, spec_slower_than_baseline),
    *LOAD_RULES,
    (ONLINE_OFFLINE_GAP, online_offline_gap),
    (NO_ACCEPT_STATS, no_accept_stats),
)
RULE_IDS: tuple[str, ...] = tuple(rule_id for rule_id, _ in RULES)
ENGINE_NEUTRAL = frozenset({dr.D2T, dr.DRAFT_CONTEXT, dr.TARGET_NUMERICS, WIRING_MISMATCH, SPEC_SLOWER,
                            ONLINE_OFFLINE_GAP})
"""The rules that hold on any engine (the others read SGLang's flags, ids or draft loader)."""

