"""Engine bugs that lower accept length without crashing: a table of release x feature, each row from the
release's own source or its tracker, and the rule that names the rows a deployment runs into.

A row applies when the server's engine and release fall in its range and the deployment has the feature on
(read from the launch through the seam). What each row says was checked where it could be:

* `sglang-radix-bigram`: SGLang keyed its radix cache by target tokens while the EAGLE draft's sequence is
  one token shifted, so a prefix-cache hit gave the draft KV cached for other token pairs. PR #10846
  (merged 2025-09-24) measured accept 2.26 with the radix cache against 2.39 without on MT-Bench, and added
  `_convert_to_bigram_key` to mem_cache/radix_cache.py; the wheels show it absent in 0.4.9, 0.4.10, 0.5.2
  and present from 0.5.3 (imported from mem_cache/utils.py by 0.5.6; tests/test_doctor_quality.py reads them).
* `vllm-prefix-cache-drift`: vllm issue #41838: with prefix caching (on by default), accept length falls
  smoothly over hours on the highest-volume prompt types and only a restart restores it; reported on
  0.17.1 and 0.19.1, a fix proposed in PR #42359 (a race on full-attention blocks). No release is known to
  carry the fix, so the row stays open past the last release it was seen on and says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from eagle3_tui.doctor.facts import Facts
from eagle3_tui.doctor.findings import Evidence, Finding, Severity
from eagle3_tui.engines import get_engine
from eagle3_tui.sglang.installed.source import version_key

KNOWN_ENGINE_BUG = "known-engine-bug"


@dataclass(frozen=True)
class KnownBug:
    key: str
    engine: str
    first: str | None
    """The first release affected (None: every release before `fixed` that has the feature)."""
    fixed: str | None
    """The first release with the fix (None: no release known to carry it)."""
    seen_on: str
    """The releases it was reported or read on, for the evidence."""
    feature: str
    effect: str
    source: str
    workaround: str
    applies: Callable[[Facts], bool]
    """Whether the deployment has the feature on (from its launch; True when the launch is unknown)."""
    drift: bool = False
    """Whether the bug shows as a fall over time (the drift rule names it)."""


def _flag_absent(flag: str) -> Callable[[Facts], bool]:
    def check(f: Facts) -> bool:
        return f.served_launch is None or flag not in f.served_launch.argv

    return check


def _eagle_family(f: Facts) -> bool:
    method = f.served_launch.method if f.served_launch is not None else None
    return method is None or method.upper() in ("EAGLE", "EAGLE3")


KNOWN_BUGS: tuple[KnownBug, ...] = (
    KnownBug(
        "sglang-radix-bigram", "sglang", None, "0.5.3", "read in 0.4.9, 0.4.10, 0.5.2 (absent) and 0.5.3 (fixed)",
        "the radix cache on (no --disable-radix-cache) with EAGLE",
        "on a prefix-cache hit the draft reuses KV cached under the target's token keys, one token off: accept "
        "length falls (2.39 -> 2.26 on MT-Bench in the fix's measurement), no crash",
        "sglang PR #10846 (mem_cache/radix_cache.py _convert_to_bigram_key, from 0.5.3)",
        "Upgrade to SGLang >= 0.5.3, or serve with --disable-radix-cache",
        lambda f: _eagle_family(f) and _flag_absent("--disable-radix-cache")(f)),
    KnownBug(
        "vllm-prefix-cache-drift", "vllm", "0.17.1", None, "reported on 0.17.1 and 0.19.1; later releases unverified",
        "prefix caching on (vLLM's default; off with --no-enable-prefix-caching)",
        "accept length falls smoothly over hours on the busiest prompt types and only a restart restores it, "
        "no crash",
        "vllm issue #41838 (fix proposed in PR #42359, a full-attention block race)",
        "Restart to confirm it recovers; compare a run with --no-enable-prefix-caching",
        _flag_absent("--no-enable-prefix-caching"), drift=True),
)


def in_range(bug: KnownBug, release: str | None) -> bool | None:
    """Whether `release` is in the bug's range (None: release unknown or unreadable)."""
    if not release:
        return None
    key = version_key(release)
    if key[0] < 0:
        return None
    if bug.first is not None and key < version_key(bug.first):
        return False
    return not (bug.fixed is not None and key >= version_key(bug.fixed))


def matching(f: Facts) -> list[KnownBug]:
    """The rows this deployment runs into: its engine, a release in range, the feature on."""
    release = f.engine_release if f.engine != "sglang" else _sglang_release(f)
    return [b for b in KNOWN_BUGS if b.engine == f.engine and in_range(b, release) and b.applies(f)]


def _sglang_release(f: Facts) -> str | None:
    if f.release is not None and f.release.version:
        return f.release.version
    if f.installed is not None and f.installed.version:
        return f.installed.version
    return f.engine_release


def bug_evidence(b: KnownBug, release: str | None) -> Evidence:
    label = get_engine(b.engine).label
    span = (f"{label} {'>= ' + b.first if b.first else ''}{' and ' if b.first and b.fixed else ''}"
            f"{'< ' + b.fixed if b.fixed else '(no fixed release known)'}").replace("  ", " ")
    return Evidence(b.source, f"{span}, {b.feature}: {b.effect} ({b.seen_on}; this server: {release or '?'})")


def known_engine_bug(f: Facts) -> Finding | None:
    """The known release x feature problems this deployment runs into. A bug that shows only as a fall over
    time is said by the drift rule when it is seen; here it is info."""
    hits = matching(f)
    if not hits:
        return None
    release = f.engine_release if f.engine != "sglang" else _sglang_release(f)
    steady = [b for b in hits if not b.drift]
    severity: Severity = "warning" if steady else "info"
    first = (steady or hits)[0]
    label = get_engine(f.engine).label
    title = (f"{label} {release} has a known bug that lowers accept length without crashing: {first.effect.split(':')[0]}"
             if severity == "warning" else
             f"{label} {release} is in the range of a known accept-length drift ({first.key}); watch accept over hours")
    return Finding(KNOWN_ENGINE_BUG, severity, title, [bug_evidence(b, release) for b in hits],
                   "; ".join(f"{b.key}: {b.workaround}" for b in hits) + ".")
