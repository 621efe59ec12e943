"""Accept length that is low, or falling, once the wiring is right: the draft's own quality on the traffic
served, a fall over hours, and how to isolate an engine bug when nothing in the setup explains it.

* `draft-domain`: the benchmark's per-request accept length by prompt set against the accept length the
  draft's authors published (its config.json or model card). Far below on one set while near it on another
  is the draft's training data, not the serving: too little of that kind of text. Retraining with more
  in-domain data closes it; more steps on the same data do not.
* `accept-drift`: accept length falling over hours at the same load (ten-minute slices of the log, the
  current run only). A cache that goes stale is the known cause (engine_bugs: vLLM's prefix caching); a
  restart that restores it says so.
* `compare-to-isolate`: when no setup rule finds anything wrong but accept length is low, the commands that
  separate an engine bug from the draft: the same launch with CUDA graphs off, and the release before.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from eagle3_tui.doctor.engine_bugs import KNOWN_ENGINE_BUG, bug_evidence, known_engine_bug, matching
from eagle3_tui.doctor.facts import Facts
from eagle3_tui.doctor.findings import Evidence, Finding
from eagle3_tui.engines import get_engine
from eagle3_tui.sglang.installed.source import version_key

DRAFT_DOMAIN = "draft-domain"
ACCEPT_DRIFT = "accept-drift"
COMPARE_TO_ISOLATE = "compare-to-isolate"

ALL_SET = "all"
FAR_SHARE = 0.6
"""A set realises at most this share of the published extra tokens (published - 1): far below."""
NEAR_SHARE = 0.85
"""At least this share: near the published figure."""
MIN_REQUESTS = 8
"""Requests a set needs before its mean says anything about the draft."""

DRIFT_MIN_SPAN_S = 2 * 3600.0
DRIFT_EDGE_S = 3600.0
"""The first and the last hour of the run are compared."""
DRIFT_DROP = 0.15
"""A fall of at least this share of the early extra tokens (early accept - 1)..."""
DRIFT_MIN_TOKENS = 0.1
"""...and at least this many tokens per step."""
SAME_LOAD = 0.25
"""Slices whose running requests are within this share of the run's median load are compared."""

LOW_EXTRA_SHARE = 0.2
"""Accept length is low when the accepted draft tokens are under this share of the tokens drafted per step."""

SYMPTOMS = frozenset({"online-offline-gap", "spec-slower-than-baseline", DRAFT_DOMAIN, ACCEPT_DRIFT,
                      "multistep-decay", "better-flags", "tree-low-load", "tree-too-wide", "bench-load",
                      "no-accept-stats", "known-engine-bug", "target-numerics", COMPARE_TO_ISOLATE})
"""Findings that describe the numbers rather than a fault in the setup: they do not count as a failed check."""


# --- draft quality by prompt set --------------------------------------------------------------------------


def _share(accept: float, published: float) -> float:
    return (accept - 1.0) / (published - 1.0)


def domain_gap(f: Facts) -> tuple[list[tuple[str, int, float]], list[tuple[str, int, float]]] | None:
    """(sets far below the published accept length, sets near it), each (name, requests, mean); None when the
    published figure or the per-set numbers are missing."""
    pub = f.published_accept_len
    if pub is None or pub <= 1.0 or not f.accept_by_set:
        return None
    sets = [(s.name, s.requests, s.mean) for s in f.accept_by_set
            if s.name != ALL_SET and s.requests >= MIN_REQUESTS and s.mean >= 1.0]
    if not sets:  # one set only: the summary is named "all"
        sets = [(s.name, s.requests, s.mean) for s in f.accept_by_set if s.requests >= MIN_REQUESTS and s.mean >= 1.0]
    far = [s for s in sets if _share(s[2], pub) <= FAR_SHARE]
    near = [s for s in sets if _share(s[2], pub) >= NEAR_SHARE]
    return far, near


def draft_domain(f: Facts) -> Finding | None:
    """Per-request accept length on one prompt set far below the draft's published figure."""
    got = domain_gap(f)
    if got is None or not got[0]:
        return None
    far, near = got
    pub = f.published_accept_len or 0.0
    names = ", ".join(n for n, _, _ in far)
    ev = [Evidence(f.published_source or "published", f"the draft's authors publish accept length {pub:.2f}")]
    ev += [Evidence(f.bench_source, f"set {n}: {r} requests, mean accept length {m:.2f} "
                                    f"({max(_share(m, pub), 0.0):.0%} of the published extra tokens)")
           for n, r, m in (*far, *near)]
    if near:
        title = (f"accept length on {names} is far below the draft's published {pub:.2f} while "
                 f"{', '.join(n for n, _, _ in near)} is near it: the draft saw too little text like {names}")
        fix = (f"Retrain the draft with more in-domain data for {names} (the target's own answers to such "
               "prompts); more training steps on the same data will not close this.")
        return Finding(DRAFT_DOMAIN, "warning", title, ev, fix)
    title = (f"accept length on {names} is far below the draft's published {pub:.2f}"
             + (" on every prompt set" if len(far) > 1 else ""))
    fix = ("If the setup checks pass (template, wiring, flags), retrain the draft with more in-domain data for "
           f"{names}; more training steps on the same data will not close this.")
    return Finding(DRAFT_DOMAIN, "warning", title, ev, fix)


# --- drift ------------------------------------------------------------------------------------------------


def _median(values: Sequence[float]) -> float:
    v = sorted(values)
    mid = len(v) // 2
    return v[mid] if len(v) % 2 else (v[mid - 1] + v[mid]) / 2


def accept_drift(f: Facts) -> Finding | None:
    """Accept length falling over hours at the same load."""
    pts = [p for p in f.accept_history if p.accept_len >= 1.0]
    if len(pts) < 3 or pts[-1].t - pts[0].t < DRIFT_MIN_SPAN_S:
        return None
    loads = [p.running for p in pts if p.running is not None]
    if loads:
        median = _median(loads)
        pts = [p for p in pts if p.running is None or abs(p.running - median) <= SAME_LOAD * max(median, 1.0)]
    if len(pts) < 3:
        return None
    early = [p for p in pts if p.t < pts[0].t + DRIFT_EDGE_S]
    late = [p for p in pts if p.t > pts[-1].t - DRIFT_EDGE_S]
    if not early or not late or early[-1].t >= late[0].t:
        return None
    e = sum(p.accept_len * p.lines for p in early) / sum(p.lines for p in early)
    la = sum(p.accept_len * p.lines for p in late) / sum(p.lines for p in late)
    drop = e - la
    if drop < DRIFT_MIN_TOKENS or drop < DRIFT_DROP * (e - 1.0):
        return None
    hours = (pts[-1].t - pts[0].t) / 3600.0
    load = f"~{_median(loads):.0f} requests in flight" if loads else "load not logged"
    ev = [Evidence(f.live_source, f"accept length {e:.2f} in the run's first hour, {la:.2f} in its last "
                                  f"({hours:.1f} h, {len(pts)} ten-minute slices at the same load, {load})"),
          Evidence(f.live_source, "per slice: " + ", ".join(f"{p.accept_len:.2f}" for p in pts[-8:])
                   + (" (the newest eight)" if len(pts) > 8 else "")),
          Evidence("prompt mix", "the server log does not record it: a change of traffic also moves accept length")]
    engine = get_engine(f.engine)
    bugs = [b for b in matching(f) if b.drift]
    ev += [bug_evidence(b, f.engine_release) for b in bugs]
    cmd = _with_flag(f, engine.prefix_cache_off_flag)
    compare = f"; compare a run with prefix caching off: `{cmd}`" if cmd else ""
    return Finding(ACCEPT_DRIFT, "warning",
                   f"accept length fell from {e:.2f} to {la:.2f} over {hours:.1f} h at the same load"
                   + (f" ({bugs[0].key}, a known {engine.label} bug)" if bugs else ""),
                   ev,
                   f"Restart the server: if accept length comes back, a cache was going stale{compare}. If it "
                   "does not, the traffic changed (benchmark the same prompts again).")


# --- isolating an engine bug ------------------------------------------------------------------------------


def _with_flag(f: Facts, flag: str) -> str | None:
    """The served launch command with `flag` added, shell-quoted; None without a launch or with it already."""
    launch = f.served_launch
    if launch is None or flag in launch.argv:
        return None
    return shlex.join([*launch.argv, flag])


def _release_before(release: str | None) -> str | None:
    """The release before `release` by its version number (x.y.z-1, else x.y-1.0)."""
    if not release:
        return None
    major, minor, patch, _ = version_key(release)
    if major < 0:
        return None
    if patch > 0:
        return f"{major}.{minor}.{patch - 1}"
    return f"{major}.{minor - 1}.0" if minor > 0 else None


def low_accept(f: Facts) -> tuple[str, Evidence] | None:
    """(why accept length counts as low, its evidence), from the prediction, the published figure or the draft
    tokens; None when it is not low or nothing says."""
    live, source = f.live_accept_len, f.live_source
    if live is None and f.server_info_accept_len is not None:
        live, source = f.server_info_accept_len, "/server_info avg_spec_accept_length"
    if live is None:
        return None
    pred = f.predicted_accept_len
    if pred is not None and pred > 1.0 and _share(live, pred) <= FAR_SHARE:
        return "below the prediction", Evidence(source, f"accept length {live:.2f}, the check predicts {pred:.2f}")
    pub = f.published_accept_len
    if pub is not None and pub > 1.0 and _share(live, pub) <= FAR_SHARE:
        return "below the published figure", Evidence(source, f"accept length {live:.2f}, the draft's authors "
                                                               f"publish {pub:.2f} ({f.published_source or '?'})")
    drafted = f.served_config.steps if f.served_config is not None else (
        f.effective.steps if f.effective is not None else None)
    if drafted and live - 1.0 < LOW_EXTRA_SHARE * drafted:
        return "few drafted tokens accepted", Evidence(source, f"accept length {live:.2f} with {drafted} tokens "
                                                               "drafted per step")
    return None


def compare_to_isolate(f: Facts, found: Sequence[Finding]) -> Finding | None:
    """Accept length low while no setup rule found anything: compare with CUDA graphs off and the release
    before, the exact commands given. Runs after the other rules (it reads their findings)."""
    if any(x.severity in ("error", "warning") and x.rule_id not in SYMPTOMS for x in found):
        return None
    low = low_accept(f)
    if low is None:
        return None
    why, ev0 = low
    engine = get_engine(f.engine)
    release = f.engine_release if f.engine != "sglang" else (
        (f.release.version if f.release is not None else None)
        or (f.installed.version if f.installed is not None else None))
    ev = [ev0, Evidence("doctor", "no setup rule found a fault (wiring, flags, checkpoint, template, release)")]
    steps: list[str] = []
    graphs_off = _with_flag(f, engine.eager_flag)
    if graphs_off:
        steps.append(f"CUDA graphs off: `{graphs_off}`")
    before = _release_before(release)
    if before:
        steps.append(f"the release before: `pip install '{engine.package}=={before}'` and the same launch")
    if not steps:
        steps.append(f"the same launch with {engine.eager_flag}, and on another {engine.label} release")
    ev += [bug_evidence(b, release) for b in matching(f)]
    return Finding(COMPARE_TO_ISOLATE, "info",
                   f"accept length is low ({why}) and every setup check passes: compare to isolate an engine bug",
                   ev,
                   "Benchmark the same prompts (`eagle3-tui bench`) under " + "; then under ".join(steps)
                   + ". Accept length that recovers points at the engine (report it with both numbers); one that "
                     "does not points at the draft.")


QUALITY_RULES = ((KNOWN_ENGINE_BUG, known_engine_bug), (DRAFT_DOMAIN, draft_domain), (ACCEPT_DRIFT, accept_drift))
"""Engine-neutral: they run on every engine (compare-to-isolate runs after all rules, in `engine.diagnose`)."""
