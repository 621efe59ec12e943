"""Rules on the installed release's speculative path beyond layer capture (`Release.path`, read from its
source or the version table): spec v2 with trees, the expert-distribution recorder in draft graphs, the
draft-extend graph's width, a missing draft path, and the `SGLANG_*` switches the server runs with.

None of these needs the target's architecture: a release known by its version alone is enough.
"""

from __future__ import annotations

from collections.abc import Callable

from eagle3_tui.doctor.facts import Facts
from eagle3_tui.doctor.findings import Evidence, Finding, Severity, severity_rank
from eagle3_tui.sglang.installed import Release
from eagle3_tui.sglang.installed import table as release_table
from eagle3_tui.sglang.installed.multimodal import LOST, NO_SETTER
from eagle3_tui.sglang.installed.specpath import (
    OLD_SIMULATE,
    SIMULATE,
    SPEC_V2_ENV,
    TOPK_FALLS_BACK,
    TOPK_REFUSED,
    TOPK_UNCHECKED,
    V2_DEFAULT,
    V2_ONLY,
    V2_OPT_IN,
    WIDTH_DRAFT,
    parse_bool,
)
from eagle3_tui.sglang.launch import EAGLE_FAMILY, EffectiveSpec, effective

SPEC_V2_TOPK = "spec-v2-topk"
EXPERT_METRICS_STEPS = "expert-metrics-steps"
DRAFT_EXTEND_WIDTH = "draft-extend-width"
NO_DRAFT_PATH = "no-draft-path"
SERVER_ENV = "server-env"
MULTIMODAL_CAPTURE = "multimodal-capture"

DISABLE_GRAPH = "--disable-cuda-graph"
NO_OVERLAP = "--disable-overlap-schedule"
EXPERT_FLAGS = ("--enable-expert-distribution-metrics", "--expert-distribution-recorder-mode")
DRAFT_EXTEND_GRAPH_ENV = "SGLANG_DISABLE_DRAFT_EXTEND_CUDA_GRAPH"


def release_of(f: Facts) -> Release | None:
    """The installed release (without a target), when known."""
    if f.release is not None:
        return f.release
    return f.installed.release if f.installed is not None else None


def release_label(r: Release) -> str:
    return f"SGLang {r.version or '(unknown release)'}"


def path_evidence(r: Release, *keys: str) -> list[Evidence]:
    """The release's speculative-path notes that mention one of `keys`, saying how each is known."""
    return [Evidence(f"{release_label(r)} {n.source}", f"{n.detail} ({n.how})")
            for n in r.path.notes if any(k in n.detail for k in keys)]


def spec_of(f: Facts) -> EffectiveSpec | None:
    if f.effective is not None:
        return f.effective
    if f.launch is None:
        return None
    auto = f.installed.auto_spec if f.installed is not None else None
    return effective(f.launch, target_arch=f.target_arch, auto=auto)


def graphs_on(f: Facts) -> bool:
    return f.launch is not None and not f.launch.has_flag(DISABLE_GRAPH)


def _env_shown(f: Facts, name: str) -> str:
    value = (f.server_env or {}).get(name)
    return f"{name}={value}" if value is not None else f"{name} unset"


def spec_v2_topk(f: Facts) -> Finding | None:
    """topk > 1 where the release's spec v2 drafts only chains. Read from each release's server_args.py:
    0.5.4 (`--enable-beta-spec`) and 0.5.5-0.5.6 (the environment switch) do not check it and the chain-only
    `EAGLEWorkerV2` dies on the first decode with a tensor size error that names no flag (the case worth an
    error); 0.5.7-0.5.10 refuse it at start-up with their own clear ValueError (said as info, with the way
    out); 0.5.11-0.5.12 run the tree on spec v1."""
    r, spec = release_of(f), spec_of(f)
    if r is None or spec is None or spec.algorithm not in EAGLE_FAMILY or not spec.topk or spec.topk <= 1:
        return None
    rule, flag = r.path.spec_v2_topk, r.path.spec_v2_flag
    on = (f.launch is not None and f.launch.has_flag(flag)) if flag else r.path.spec_v2_on(f.server_env)
    if rule is None or on is not True:
        return None
    if rule == TOPK_UNCHECKED and f.launch is not None and f.launch.has_flag(NO_OVERLAP):
        return None  # spec_info builds the v1 worker when the overlap scheduler is off
    switch = (Evidence(f.launch_source, f"{flag}: spec v2 on") if flag else
              Evidence("server environment", _env_shown(f, SPEC_V2_ENV)
                       + (" (the release's default is on)" if r.path.spec_v2 == V2_DEFAULT else "")))
    ev = [Evidence(f.launch_source, f"--speculative-eagle-topk {spec.topk} (a tree)"), switch,
          *path_evidence(r, "topk > 1", "whatever the topk", "keeps the overlap scheduler on")]
    name = flag or SPEC_V2_ENV
    off = f"Drop {flag}" if flag else f"Unset {SPEC_V2_ENV}"
    chain = "--speculative-eagle-topk 1 with --speculative-num-draft-tokens = steps + 1"
    if rule == TOPK_UNCHECKED:
        ev.append(Evidence("sglang issues #11690, #13352, #14077", "--enable-beta-spec or SGLANG_ENABLE_SPEC_V2=1 "
                                                                   "with topk 4: \"Scheduler hit an exception\" ... "
                                                                   "llama_eagle3.py forward, torch.cat: \"RuntimeError: "
                                                                   "Sizes of tensors must match except in dimension 1\""))
        return Finding(
            SPEC_V2_TOPK, "error",
            f"spec v2 ({name}) in {release_label(r)} drafts topk {spec.topk} on its chain-only worker: the "
            "scheduler dies on the first decode with a tensor size error",
            ev,
            f"{off} (spec v1 drafts trees), add {NO_OVERLAP}, or serve a chain: {chain}. "
            "From SGLang 0.5.7 the release refuses this at start-up; from 0.5.13 spec v2 drafts trees.")
    if rule == TOPK_REFUSED:
        return Finding(
            SPEC_V2_TOPK, "info",
            f"{release_label(r)} refuses topk {spec.topk} under spec v2 at start-up, saying so itself "
            "(\"Spec v2 currently only supports topk = 1\")",
            ev,
            f"Unset {SPEC_V2_ENV} (spec v1 drafts trees), or serve a chain: {chain}.")
    if rule == TOPK_FALLS_BACK:
        return Finding(
            SPEC_V2_TOPK, "info",
            f"topk {spec.topk} runs on spec v1 in {release_label(r)}: the overlap scheduler is off",
            ev,
            "Benchmark a chain (--speculative-eagle-topk 1, draft tokens = steps + 1), which keeps spec v2's "
            "overlap scheduling, against this tree; from SGLang 0.5.13 spec v2 drafts trees too.")
    return None


def expert_metrics_steps(f: Facts) -> Finding | None:
    """The expert-distribution recorder's pass boundary inside the draft's CUDA-graph capture (steps >= 2)."""
    spec, launch = spec_of(f), f.launch
    if spec is None or launch is None or not spec.speculative or spec.steps is None or spec.steps < 2:
        return None
    flags = [flag for flag in EXPERT_FLAGS if launch.has_flag(flag)]
    if not flags or not graphs_on(f):
        return None
    r = release_of(f)
    if r is not None and r.path.expert_recorder_capture_safe is not False:
        return None
    ev = [Evidence(f.launch_source, f"{' '.join(flags)} with --speculative-num-steps {spec.steps} and CUDA graphs on"),
          Evidence("sglang issue #32105", "the recorder's forward-pass boundary (reset, collect, a collective and a "
                                          "host sync) runs inside the draft's CUDA-graph capture when steps >= 2: "
                                          "the scheduler dies at start-up and the server crash-loops")]
    if r is not None:
        ev.append(Evidence(release_label(r), "eplb/expert_distribution.py _on_forward_pass_start has no "
                                             f"capture check ({r.path.notes[0].how if r.path.notes else 'read'})"))
    return Finding(
        EXPERT_METRICS_STEPS, "error" if r is not None else "warning",
        f"{flags[0]} with --speculative-num-steps {spec.steps} crash-loops at start-up (draft CUDA-graph capture)",
        ev,
        f"Drop {flags[0]} while speculating, or use --speculative-num-steps 1, or add {DISABLE_GRAPH}.")


def draft_extend_width(f: Facts) -> Finding | None:
    """A draft whose target_hidden_size differs from its hidden_size, on a release whose draft-extend graph
    buffer is the draft's hidden_size x 3."""
    r, c = release_of(f), f.draft_config
    if r is None or c is None or r.path.extend_graph_width != WIDTH_DRAFT or not graphs_on(f):
        return None
    th, h = c.target_hidden_size, c.hidden_size
    if th is None or h is None or th == h:
        return None
    return Finding(
        DRAFT_EXTEND_WIDTH, "error",
        f"this server will not start on {release_label(r)}: the draft-extend CUDA graph is sized for hidden "
        f"{h} x 3, the target feeds {th} x 3",
        [Evidence(f.draft_config_path or "draft config", f"hidden_size = {h}, target_hidden_size = {th}"),
         *path_evidence(r, "draft-extend"),
         Evidence("sglang issue #7011", "capturing the draft-extend CUDA graph fails for drafts whose "
                                        "target_hidden_size differs (e.g. a 70B target); fixed by PR #8163 in 0.4.10")],
        f"Upgrade to SGLang >= 0.4.10 (it sizes the buffer from target_hidden_size), or add {DISABLE_GRAPH}.")


def no_draft_path(f: Facts) -> Finding | None:
    """EAGLE3 without --speculative-draft-model-path: SGLang builds the draft worker's model config from
    `model_path or server_args.model_path` (configs/model_config.py), so the target itself is loaded as the
    draft (for the MTP targets server_args names, its own MTP/NextN layer)."""
    launch = f.launch
    if launch is None or launch.algorithm is None or launch.algorithm.upper() != "EAGLE3":
        return None
    if launch.draft_model_path is not None or launch.model_path is None:
        return None  # without --model-path this is not a whole command (a profile's fragment)
    r = release_of(f)
    target = launch.model_path
    ev = [Evidence(f.launch_source, "--speculative-algorithm EAGLE3 without --speculative-draft-model-path")]
    arch = f.target_arch
    if r is not None and arch is not None and arch in r.path.draft_path_from_target:
        ev.append(Evidence(f"{release_label(r)} server_args", f"for {arch} a missing draft path becomes the target's "
                                                              "own checkpoint (its MTP/NextN layer, read from source)"))
        title = "EAGLE3 without a draft path: SGLang loads the target's own MTP layer as the EAGLE-3 draft"
    else:
        if r is not None and r.path.draft_defaults_to_target:
            ev += path_evidence(r, "the target is loaded as the draft")
        else:
            ev.append(Evidence("SGLang rule", "configs/model_config.py builds the draft worker's model from "
                                              "`model_path or server_args.model_path` (0.5.4-0.5.7 read): the target's"))
        title = (f"EAGLE3 without --speculative-draft-model-path: SGLang loads the target ({target}) as the draft, "
                 "not an EAGLE-3 draft")
    return Finding(NO_DRAFT_PATH, "error", title, ev,
                   "Add --speculative-draft-model-path <the EAGLE-3 draft's directory> (or use "
                   "--speculative-algorithm EAGLE for the target's own MTP layer).")


def multimodal_capture(f: Facts) -> Finding | None:
    """A multimodal target whose wrapper does not bring the draft's ids to its language model."""
    r, arch = release_of(f), f.target_arch
    if r is None or arch is None or f.launch is None or (f.launch.algorithm or "").upper() != "EAGLE3":
        return None
    got = r.multimodal(arch)
    if got is None or got.status not in (NO_SETTER, LOST):
        return None
    fixed = release_table.first_captured(arch, r.version)
    why = ("it has no set_eagle3_layers_to_capture" if got.status == NO_SETTER else
           "its wrapper loses the aux states (none reach the draft)")
    return Finding(
        MULTIMODAL_CAPTURE, "error",
        f"this server will not start on {release_label(r)}: the multimodal target {arch} {why}",
        [Evidence(f.target_config_path or "target config", f"architectures = [{arch}]"),
         Evidence(f"{release_label(r)} {got.note.source}", f"{got.note.detail} ({got.note.how})")],
        (f"Upgrade to SGLang >= {fixed}, which passes the ids to the language model." if fixed else
         "Serve the text-only language model of this target, or a release that captures its aux states."))


# --- the switches ---------------------------------------------------------------------------------------


def server_env(f: Facts) -> Finding | None:
    """The `SGLANG_*` switches the server runs with, judged against the release that reads them."""
    env = f.server_env
    if not env:
        return None
    r = release_of(f)
    judged: list[tuple[Severity, Evidence]] = []
    judged += _simulate(env, r)
    judged += _spec_v2_switch(env, r)
    judged += _unparsable(env, r)
    if r is not None and r.path.env_default(DRAFT_EXTEND_GRAPH_ENV) is not None:
        if parse_bool(env.get(DRAFT_EXTEND_GRAPH_ENV, "false")):
            judged.append(("info", Evidence("server environment", f"{DRAFT_EXTEND_GRAPH_ENV}={env[DRAFT_EXTEND_GRAPH_ENV]}: "
                                                                  "the draft-extend step runs eagerly (slower)")))
    if not judged:
        return None
    judged.sort(key=lambda x: severity_rank(x[0]))
    worst = judged[0][0]
    titles = {"error": "a SGLANG_* switch stops the server or fakes the speculation it reports",
              "warning": "a SGLANG_* switch changes what speculation measures or runs",
              "info": "SGLANG_* switches that change the speculative path (or do nothing on this release)"}
    fixes = {"error": "Unset the switches the evidence names (or give them a value the release parses) and restart.",
             "warning": "Unset the switches the evidence names before measuring the draft.",
             "info": "Nothing to fix unless the evidence names a switch you meant to take effect."}
    return Finding(SERVER_ENV, worst, titles[worst], [e for _, e in judged], fixes[worst])


def _simulate(env: dict[str, str], r: Release | None) -> list[tuple[Severity, Evidence]]:
    out: list[tuple[Severity, Evidence]] = []
    reads = r.path.simulate_env if r is not None else None
    for name in (SIMULATE, OLD_SIMULATE):
        raw = env.get(name)
        if raw is None:
            continue
        try:
            value = float(raw)
        except ValueError:
            value = None
        if r is not None and reads != name:
            out.append(("info", Evidence("server environment", f"{name}={raw}: {release_label(r)} does not read it "
                                                               f"({'it reads ' + reads if reads else 'no simulation'})")))
        elif value is not None and value > 0:
            out.append(("warning", Evidence("server environment", f"{name}={raw}: the verifier accepts a simulated "
                                                                  f"length of about {value:g}; the accept length the "
                                                                  "server reports is not the draft's")))
    return out


def _spec_v2_switch(env: dict[str, str], r: Release | None) -> list[tuple[Severity, Evidence]]:
    raw = env.get(SPEC_V2_ENV)
    if raw is None or r is None:
        return []
    declared = r.path.env_default(SPEC_V2_ENV)
    if declared is None:
        what = ("spec v2 is the only path" if r.path.spec_v2 == V2_ONLY else
                f"its spec v2 switch is the launch flag {r.path.spec_v2_flag}" if r.path.spec_v2_flag else
                "it has no spec v2")
        return [("info", Evidence("server environment", f"{SPEC_V2_ENV}={raw}: {release_label(r)} does not declare "
                                                        f"it ({what}); it has no effect"))]
    on = parse_bool(raw)
    if on is None:
        return []  # _unparsable says it
    if r.path.spec_v2 == V2_ONLY and not on:
        return [("info", Evidence("server environment", f"{SPEC_V2_ENV}={raw}: {release_label(r)} runs the "
                                                        "synchronous spec v2 worker (no overlap scheduling)"))]
    if r.path.spec_v2 == V2_OPT_IN and on:
        return [("info", Evidence("server environment", f"{SPEC_V2_ENV}={raw}: spec v2 (experimental in "
                                                        f"{release_label(r)}) drafts with the overlap scheduler"))]
    if r.path.spec_v2 == V2_DEFAULT and not on:
        return [("info", Evidence("server environment", f"{SPEC_V2_ENV}={raw}: spec v1 instead of "
                                                        f"{release_label(r)}'s default spec v2 (overlap scheduler off)"))]
    return []


_PARSERS: dict[str, Callable[[str], object]] = {"EnvBool": parse_bool, "EnvInt": int, "EnvFloat": float}


def _unparsable(env: dict[str, str], r: Release | None) -> list[tuple[Severity, Evidence]]:
    """Declared switches set to a value their Env type's parse raises on (the server fails reading them)."""
    if r is None:
        return []
    out: list[tuple[Severity, Evidence]] = []
    for name, kind, _ in r.path.env:
        raw = env.get(name)
        parse = _PARSERS.get(kind)
        if raw is None or parse is None:
            continue
        try:
            ok = parse(raw) is not None
        except ValueError:
            ok = False
        if not ok:
            out.append(("error", Evidence("server environment", f"{name}={raw!r}: {release_label(r)} declares it "
                                                                f"{kind} and raises ValueError reading that value")))
    return out


PATH_RULES = (
    (NO_DRAFT_PATH, no_draft_path),
    (MULTIMODAL_CAPTURE, multimodal_capture),
    (SPEC_V2_TOPK, spec_v2_topk),
    (EXPERT_METRICS_STEPS, expert_metrics_steps),
    (DRAFT_EXTEND_WIDTH, draft_extend_width),
    (SERVER_ENV, server_env),
)
