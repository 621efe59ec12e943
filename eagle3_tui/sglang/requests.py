"""Per-request accept length: summaries by prompt set, and the requests a server logged as they finished.

SGLang's `/generate` answers carry each request's `spec_verify_ct` and `spec_accept_length` in meta_info
(research/sglang.md §5.4). A server run with `--log-requests` writes the same meta_info for every request
it finishes, the operator's real traffic included: `Finish: obj=GenerateReqInput(...), out={'meta_info':
{... 'completion_tokens': 14, ... 'spec_accept_length': 3.5, 'spec_verify_ct': 4 ...}}` (text format,
`utils/request_logger.py` `log_finished_request`), or one JSON object with `"event": "request.finished"` and
`out.meta_info` (`--log-requests-format json`). Pure: lines in, numbers out.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

ALL = "all"
MARKER = b"spec_verify_ct"
"""Only lines holding this can carry a request's spec fields: a byte search skips the rest."""

_TEXT_META = re.compile(r"'meta_info': \{")
_TEXT_FIELD = re.compile(r"'(completion_tokens|spec_verify_ct|spec_accept_length)': ([0-9.eE+-]+)")


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear-interpolated percentile (q in 0..100), as numpy's default; None for no values."""
    if not values:
        return None
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass(frozen=True)
class SetAccept:
    """Per-request accept length over one prompt set: how many requests reported it, mean and spread."""

    name: str
    requests: int
    mean: float
    p10: float
    p50: float
    p90: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def accept_by_set(pairs: Sequence[tuple[str, float]]) -> list[SetAccept]:
    """(set, per-request accept length) -> one summary per set, in the order the sets first appear; the
    whole run as "all" first when there are several sets."""
    groups: dict[str, list[float]] = {}
    for name, v in pairs:
        groups.setdefault(name, []).append(v)
    if len(groups) > 1:
        groups = {ALL: [v for _, v in pairs], **{k: v for k, v in groups.items() if k != ALL}}
    out = []
    for name, vals in groups.items():
        p10, p50, p90 = (percentile(vals, q) for q in (10, 50, 90))
        assert p10 is not None and p50 is not None and p90 is not None
        out.append(SetAccept(name, len(vals), sum(vals) / len(vals), p10, p50, p90))
    return out


def request_accept_length(meta: dict[str, Any]) -> float | None:
    """One request's accept length from its meta_info: `spec_accept_length`, else completion tokens per
    verify step (builds before 2025-10 sent only `spec_verify_ct`); None without verify steps."""
    ct = meta.get("spec_verify_ct")
    if not isinstance(ct, (int, float)) or isinstance(ct, bool) or ct <= 0:
        return None
    v = meta.get("spec_accept_length")
    if isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0:
        return float(v)
    done = meta.get("completion_tokens")
    return float(done) / ct if isinstance(done, (int, float)) and done > 0 else None


def _json_metas(line: str) -> list[dict[str, Any]]:
    start = line.find("{")
    try:
        doc = json.loads(line[start:]) if start >= 0 else None
    except ValueError:
        return []
    if not isinstance(doc, dict) or doc.get("event") != "request.finished":
        return []
    out = doc.get("out")
    items = out if isinstance(out, list) else [out]
    return [i["meta_info"] for i in items if isinstance(i, dict) and isinstance(i.get("meta_info"), dict)]


def _text_metas(line: str) -> list[dict[str, Any]]:
    at = line.find(", out=")
    if "Finish: obj=" not in line or at < 0:
        return []
    out = line[at:]
    starts = [m.end() for m in _TEXT_META.finditer(out)]
    metas = []
    for i, s in enumerate(starts):
        chunk = out[s:starts[i + 1] if i + 1 < len(starts) else len(out)]
        meta: dict[str, Any] = {}
        for key, value in _TEXT_FIELD.findall(chunk):
            try:
                meta.setdefault(key, float(value) if "." in value or "e" in value.lower() else int(value))
            except ValueError:
                continue
        metas.append(meta)
    return metas


def finished_accept_lengths(line: str) -> list[float]:
    """The accept length of each request a `--log-requests` finish line reports (text or JSON format)."""
    if "spec_verify_ct" not in line:
        return []
    metas = _json_metas(line) if '"request.finished"' in line else _text_metas(line)
    return [v for v in (request_accept_length(m) for m in metas) if v is not None]


def logged_requests(lines: Iterable[bytes]) -> list[float]:
    """Every finished request's accept length in a log's lines (bytes, as read)."""
    out: list[float] = []
    for raw in lines:
        if MARKER in raw:
            out += finished_accept_lengths(raw.decode("utf-8", errors="replace"))
    return out
