"""SGLang 0.5.6's own Decode and Prefill lines, rendered from the release's f-strings
(`srt/managers/scheduler_metrics_mixin.py` read from the wheel), read by the one-match fast path of
parse_line and by every replay engine: the shapes our parser expects are the ones the release prints,
not only the ones our sim writes."""

from __future__ import annotations

import ast
import io
from types import SimpleNamespace
from typing import Any

from eagle3_tui.sglang.logline import (
    _PLAIN_DECODE,
    _PLAIN_PREFILL,
    _STATS_HEADER,
    DecodeStats,
    PrefillStats,
    parse_line,
)
from eagle3_tui.sglang.scan import ENGINES, best_engine, scan
from eagle3_tui.telemetry.runs import RunSplitter
from tests.sglang_wheels import reader

MIXIN = "srt/managers/scheduler_metrics_mixin.py"


def _fstrings() -> list[ast.JoinedStr]:
    source = reader("0.5.6")(MIXIN)
    assert source is not None, f"sglang 0.5.6 has no {MIXIN}"
    return [n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.JoinedStr)]


def _eval(node: ast.JoinedStr, names: dict[str, Any]) -> str:
    return str(eval(compile(ast.Expression(node), MIXIN, "eval"), {"len": len}, names))


def _one(nodes: list[ast.JoinedStr], holds: str) -> ast.JoinedStr:
    """The release's one f-string that starts with `holds` (or, failing that, holds it)."""
    def text(n: ast.JoinedStr) -> list[str]:
        return [str(v.value) for v in n.values if isinstance(v, ast.Constant)]

    hits = [n for n in nodes if text(n) and text(n)[0].startswith(holds) and isinstance(n.values[0], ast.Constant)]
    hits = hits or [n for n in nodes if any(holds in t for t in text(n))]
    assert len(hits) == 1, f"{len(hits)} f-strings of sglang 0.5.6 hold {holds!r}"
    return hits[0]


def _lines() -> tuple[str, str]:
    """A Decode and a Prefill line as sglang 0.5.6 prints them (no --log-forward-iters, CUDA, spec on)."""
    nodes = _fstrings()
    names: dict[str, Any] = {
        "self": SimpleNamespace(device="cuda", last_gen_throughput=141.736, waiting_queue=[1, 2, 3]),
        "iter_msg": "", "num_running_reqs": 17, "num_used": 61923, "token_usage": 0.5012,
        "spec_accept_length": 2.7531, "spec_accept_rate": 0.6883, "can_run_cuda_graph": True,
        "can_run_list": [1], "adder": SimpleNamespace(log_input_tokens=512, log_hit_tokens=128), "running_bs": 16,
    }
    names["token_usage_msg"] = _eval(_one(nodes, "#token: "), names)
    decode = "".join(
        _eval(_one(nodes, holds), names) for holds in ("Decode batch", "accept len: ", "gen throughput (token/s): ")
    )
    names["token_usage_msg"] = _eval(_one(nodes, "token usage: "), names)
    prefill = _eval(_one(nodes, "Prefill batch"), names)
    return "[2026-04-05 20:00:00 TP0] " + decode, "[2026-04-05 20:00:01 TP0] " + prefill


def test_the_releases_lines_take_the_one_match_and_read_as_printed() -> None:
    decode, prefill = _lines()
    assert decode.endswith("gen throughput (token/s): 141.74, #queue-req: 3, "), decode
    for line, plain in ((decode, _PLAIN_DECODE), (prefill, _PLAIN_PREFILL)):
        m = _STATS_HEADER.search(line)
        assert m is not None and plain.fullmatch(line, m.end()), line
    d, p = parse_line(decode), parse_line(prefill)
    assert isinstance(d, DecodeStats) and isinstance(p, PrefillStats)
    assert (d.running_req, d.num_token, d.token_usage, d.accept_len, d.accept_rate) == (17, 61923, 0.5, 2.75, 0.69)
    assert (d.graph, d.graph_backend, d.gen_throughput, d.queue_req, d.extra) == (True, "cuda graph", 141.74, 3, {})
    assert (p.new_seq, p.new_token, p.cached_token, p.token_usage, p.running_req, p.queue_req) == (1, 512, 128, 0.5, 16, 3)


def test_every_replay_engine_counts_the_releases_decode_lines() -> None:
    decode, prefill = _lines()
    data = ("\n".join([decode, prefill] * 50) + "\n").encode()
    results = []
    for engine in [e for e in ENGINES if e != "native" or best_engine() == "native"]:
        sink = RunSplitter()
        scan(io.BytesIO(data), sink, engine=engine)
        results.append(sink.finish())
    assert all(r == results[-1] for r in results)
    run = results[-1][0]
    assert run.decode_lines == 50 and run.accept_len is not None and run.accept_len.mean == 2.75
