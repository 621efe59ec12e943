"""parse_line and LogReader against every log variant of research/sglang.md §1.

Lines are built here the way SGLang's own f-strings build them (one helper per era), not with the
package's synthetic-log writer, so the parser is checked against the format description.
"""

from __future__ import annotations

import calendar

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eagle3_tui.sglang.logline import (
    DecodeStats,
    Failure,
    HttpAccess,
    LogReader,
    Other,
    PrefillStats,
    ServerArgs,
    ServerReady,
    ServerWarning,
    parse_line,
)

T0 = calendar.timegm((2025, 12, 9, 10, 0, 0, 0, 0, 0))


def prefix(ranks: str = "", ms: str = "") -> str:
    # configure_logger: f"[%(asctime)s{maybe_ms}{prefix}] %(message)s", datefmt "%Y-%m-%d %H:%M:%S"
    return f"[2025-12-09 10:00:00{ms}{ranks}] "


def decode(line: str) -> DecodeStats:
    ev = parse_line(line)
    assert isinstance(ev, DecodeStats), ev
    return ev


# --- decode line eras (§1.2, §1.5) -------------------------------------------------------------


def test_head_0_5_6_decode_line() -> None:
    num_running_reqs, num_used, token_usage = 1, 412, 0.0
    spec_accept_length, spec_accept_rate, can_run_cuda_graph = 2.05, 0.5125, True
    last_gen_throughput, waiting = 188.6812, 0
    msg = f"Decode batch, #running-req: {num_running_reqs}, #token: {num_used}, token usage: {token_usage:.2f}, "
    msg += f"accept len: {spec_accept_length:.2f}, accept rate: {spec_accept_rate:.2f}, "
    msg += (
        f"{'cuda graph'}: {can_run_cuda_graph}, "
        f"gen throughput (token/s): {last_gen_throughput:.2f}, "
        f"#queue-req: {waiting}, "
    )
    ev = decode(prefix(" TP0") + msg)
    assert ev.timestamp == T0
    assert ev.ranks == {"TP": 0}
    assert (ev.running_req, ev.num_token, ev.token_usage) == (1, 412, 0.0)
    assert (ev.accept_len, ev.accept_rate) == (2.05, 0.51)
    assert ev.graph is True and ev.graph_backend == "cuda graph"
    assert ev.gen_throughput == 188.68
    assert ev.queue_req == 0
    assert ev.extra == {}
    assert ev.iteration is None


def test_oldest_decode_line_without_spec_fields() -> None:
    # <= 0.4.1.post6: no accept len even with EAGLE, no trailing comma, always " TP0"
    line = prefix(" TP0") + (
        f"Decode batch. #running-req: {3}, #token: {900}, token usage: {0.01:.2f}, "
        f"gen throughput (token/s): {55.5:.2f}, #queue-req: {2}"
    )
    ev = decode(line)
    assert ev.accept_len is None and ev.accept_rate is None and ev.graph is None
    assert (ev.running_req, ev.queue_req, ev.gen_throughput) == (3, 2, 55.5)


def test_first_accept_len_0_4_1_post7() -> None:
    accept_length, gen_throughput = 1.5, 20.0
    line = prefix(" TP0") + (
        f"Decode batch. "
        f"#running-req: {1}, "
        f"#token: {2}, "
        f"token usage: {2 / 1000:.2f}, "
        f"accept len: {accept_length:.2f}, "
        f"gen throughput (token/s): {gen_throughput:.2f}, "
        f"#queue-req: {0}"
    )
    ev = decode(line)
    assert ev.accept_len == 1.5 and ev.gen_throughput == 20.0 and ev.queue_req == 0


def test_largest_len_and_trailing_comma_0_4_3_post3() -> None:
    line = prefix(" TP0") + (
        f"Decode batch. #running-req: {4}, #token: {10}, token usage: {0.0:.2f}, accept len: {3.25:.2f}, "
        f"gen throughput (token/s): {99.0:.2f}, largest-len: {8191}, #queue-req: {1}, "
    )
    ev = decode(line)
    assert ev.extra == {"largest-len": "8191"}
    assert ev.queue_req == 1 and ev.accept_len == 3.25


def test_cuda_graph_with_dp_ranks_0_4_6_post4() -> None:
    # real line, fixture 6081
    line = (
        "[2025-05-31 18:31:21 DP0 TP0] Decode batch. #running-req: 8, #token: 37217, token usage: 0.13, "
        "accept len: 2.90, cuda graph: True, gen throughput (token/s): 171.01, #queue-req: 0"
    )
    ev = decode(line)
    assert ev.ranks == {"DP": 0, "TP": 0}
    assert ev.timestamp == calendar.timegm((2025, 5, 31, 18, 31, 21, 0, 0, 0))
    assert (ev.accept_len, ev.graph, ev.gen_throughput) == (2.9, True, 171.01)


def test_timestamp_suffix_0_4_9() -> None:
    iso = "2025-07-18T15:32:52.498932"
    body = f"Decode batch. #running-req: {1}, #token: {5}, token usage: {0.0:.2f}, accept len: {2.0:.2f}, "
    body += f"cuda graph: {False}, gen throughput (token/s): {10.0:.2f}, #queue-req: {0}, timestamp: {iso}"
    ev = decode(prefix(" TP0") + body)
    assert ev.timestamp == T0  # the prefix wins
    assert ev.extra == {"timestamp": iso}
    assert ev.graph is False
    bare = decode(body)  # no prefix at all: the suffix gives the time
    assert bare.timestamp == pytest.approx(calendar.timegm((2025, 7, 18, 15, 32, 52, 0, 0, 0)) + 0.498932)


def test_iteration_counter_0_5_4() -> None:
    forward_ct = 123456
    line = prefix() + f"Decode batch [{forward_ct}], #running-req: {2}, #token: {7}, token usage: {0.5:.2f}, "
    line += f"accept len: {1.8:.2f}, accept rate: {0.45:.2f}, cuda graph: True, gen throughput (token/s): {12.3:.2f}, #queue-req: {0}, "
    ev = decode(line)
    assert ev.iteration == forward_ct and ev.ranks == {} and ev.token_usage == 0.5


@pytest.mark.parametrize("device, label", [("cpu", "cpu graph"), ("npu", "npu graph"), ("musa", "musa graph")])
def test_2026_graph_labels_and_no_trailing_comma(device: str, label: str) -> None:
    graph_backend = {"cpu": "cpu graph", "npu": "npu graph", "musa": "musa graph"}
    msg = f"Decode batch, #running-req: {1}, #token: {3}, token usage: {0.0:.2f}, "
    msg += f"accept len: {3.05:.2f}, accept rate: {0.68:.2f}, "
    msg += f"{graph_backend[device]}: {False}, gen throughput (token/s): {40.0:.2f}, #queue-req: {5}"
    ev = decode("[2026-07-21 15:00:13 TP0 EP0] " + msg)
    assert ev.graph_backend == label and ev.graph is False
    assert ev.queue_req == 5 and ev.ranks == {"TP": 0, "EP": 0}


def test_2026_optional_suffixes_are_kept() -> None:
    msg = (
        f"Decode batch, #running-req: {1}, #token: {3}, token usage: {0.0:.2f}, accept len: {2.0:.2f}, "
        f"accept rate: {0.33:.2f}, cuda graph: True, gen throughput (token/s): {40.0:.2f}, #queue-req: {0}"
        f", est. decode TFLOPS/s (per GPU): {12.5:.2f}, est. read BW (GB/s per GPU): {800.0:.2f}"
        f", fwd occupancy: {85.1:.1f}%"
    )
    ev = decode(prefix() + msg)
    assert ev.extra == {
        "est. decode TFLOPS/s (per GPU)": "12.50",
        "est. read BW (GB/s per GPU)": "800.00",
        "fwd occupancy": "85.1%",
    }


def test_disaggregation_decode_fields() -> None:
    msg = f"Decode batch, #running-req: {6}, #token: {100}, token usage: {0.25:.2f}, "
    msg += f"accept len: {2.2:.2f}, accept rate: {0.55:.2f}, "
    msg += f"pre-allocated usage: {0.1:.2f}, "
    msg += f"#prealloc-req: {2}, "
    msg += f"#transfer-req: {1}, "
    msg += f"#retracted-req: {0}, "
    msg += f"cuda graph: True, gen throughput (token/s): {300.0:.2f}, #queue-req: {0}, "
    ev = decode(prefix(" DP1 TP1") + msg)
    assert ev.extra == {"pre-allocated usage": "0.10", "#prealloc-req": "2", "#transfer-req": "1", "#retracted-req": "0"}
    assert ev.ranks == {"DP": 1, "TP": 1} and ev.accept_len == 2.2


@pytest.mark.parametrize(
    "usage_msg, usage, keys",
    [
        (
            f"#full token: {10}, full token usage: {0.2:.2f}, #swa token: {5}, swa token usage: {0.1:.2f}, ",
            0.2,
            {"#full token", "full token usage", "#swa token", "swa token usage"},
        ),
        (
            f"#full token: {10}, full token usage: {0.3:.2f}, mamba num: {3}, mamba usage: {0.05:.2f}, ",
            0.3,
            {"#full token", "full token usage", "mamba num", "mamba usage"},
        ),
        (
            f"#gpu-token: {7}, gpu token usage: {0.4:.2f}, #cpu-token: {9}, cpu token usage: {0.01:.2f}, ",
            0.4,
            {"#gpu-token", "gpu token usage", "#cpu-token", "cpu token usage"},
        ),
    ],
    ids=["swa", "mamba", "hisparse"],
)
def test_hybrid_token_fields(usage_msg: str, usage: float, keys: set[str]) -> None:
    msg = f"Decode batch, #running-req: {1}, {usage_msg}accept len: {1.9:.2f}, accept rate: {0.47:.2f}, "
    msg += f"cuda graph: True, gen throughput (token/s): {20.0:.2f}, #queue-req: {0}, "
    ev = decode(prefix() + msg)
    assert ev.token_usage == usage and set(ev.extra) == keys and ev.num_token is None


# --- prefixes and wrappers (§1.8) ----------------------------------------------------------------

BODY = "Decode batch, #running-req: 1, #token: 2, token usage: 0.00, accept len: 2.50, accept rate: 0.62, cuda graph: True, gen throughput (token/s): 30.00, #queue-req: 0, "


@pytest.mark.parametrize(
    "line, ts, ranks",
    [
        (f"[2025-12-09 10:00:00] {BODY}", T0, {}),
        (f"[2025-12-09 10:00:00.250] {BODY}", T0 + 0.25, {}),
        (f"[2025-12-09 10:00:00.250 TP3] {BODY}", T0 + 0.25, {"TP": 3}),
        (f"[2025-12-09 10:00:00 DP0 TP0] {BODY}", T0, {"DP": 0, "TP": 0}),
        (f"[2025-12-09 10:00:00 TP0 EP0] {BODY}", T0, {"TP": 0, "EP": 0}),
        (f"[2025-12-09 10:00:00 DP2 PP1 TP5 EP5] {BODY}", T0, {"DP": 2, "PP": 1, "TP": 5, "EP": 5}),
        (f"(SGLangEngine pid=952, ip=127.0.0.1) [2025-12-09 10:00:00 TP0] {BODY}", T0, {"TP": 0}),
        (
            f"[2025-12-09T18:00:00+08:00] sglang-0 >> (SGLangEngine pid=1, ip=127.0.0.1) [2025-12-09 10:00:00 TP0] {BODY}",
            T0,
            {"TP": 0},
        ),
        (f"[2025-12-09 19:00:00] [2025-12-09 10:00:00 TP0] {BODY}", T0, {"TP": 0}),  # double timestamps
        (f"2025-12-09 10:00:00 INFO 151972 [scheduler_metrics_mixin.py:287] {BODY}", T0, {}),
        (f"2025-12-09 10:00:00,659 [INFO] sglang.srt.managers.scheduler_metrics_mixin: {BODY}", T0 + 0.659, {}),
        (BODY, None, {}),
    ],
    ids=["plain", "ms", "ms-tp", "dp-tp", "tp-ep", "all-ranks", "ray", "k8s", "double", "pylogging", "omni", "bare"],
)
def test_prefix_variants(line: str, ts: float | None, ranks: dict[str, int]) -> None:
    ev = decode(line)
    assert ev.timestamp == (pytest.approx(ts) if ts is not None else None)
    assert ev.ranks == ranks
    assert ev.accept_len == 2.5 and ev.gen_throughput == 30.0 and ev.line == line


# --- prefill lines (§1.3, §1.4) ------------------------------------------------------------------


def test_prefill_head() -> None:
    f = (
        f"Prefill batch, "
        f"#new-seq: {2}, "
        f"#new-token: {1024}, "
        f"#cached-token: {512}, "
        f"token usage: {0.12:.2f}, "
        f"#running-req: {3}, "
        f"#queue-req: {4}, "
    )
    ev = parse_line(prefix(" TP0") + f)
    assert isinstance(ev, PrefillStats)
    assert (ev.new_seq, ev.new_token, ev.cached_token, ev.token_usage, ev.running_req, ev.queue_req) == (
        2, 1024, 512, 0.12, 3, 4,
    )
    assert ev.extra == {} and ev.ranks == {"TP": 0}


def test_prefill_disaggregated_and_2026_variants() -> None:
    pd = f"Prefill batch [{9}], #new-seq: {1}, #new-token: {8}, #cached-token: {0}, token usage: {0.0:.2f}, "
    pd += f"#running-req: {0}, #queue-req: {0}, #prealloc-req: {1}, #inflight-req: {2}, input throughput (token/s): {5.0:.2f}, "
    ev = parse_line(prefix() + pd)
    assert isinstance(ev, PrefillStats) and ev.iteration == 9
    assert ev.extra == {"#prealloc-req": "1", "#inflight-req": "2", "input throughput (token/s)": "5.00"}
    late = (
        f"Prefill batch, #new-seq: {1}, #new-token: {8}, #cached-token: {0}, token usage: {0.0:.2f}, "
        f"#running-req: {0}, #queue-req: {0}, #pending-token: {16}, cuda graph: {True}, "
        f"input throughput (token/s): {1234.5:.2f}"
    )
    ev2 = parse_line(prefix() + late)
    assert isinstance(ev2, PrefillStats)
    assert ev2.extra == {"#pending-token": "16", "cuda graph": "True", "input throughput (token/s)": "1234.50"}


# --- other events (§1.9) --------------------------------------------------------------------------


def test_ready_args_access_and_other() -> None:
    ready = parse_line(prefix() + "The server is fired up and ready to roll!")
    assert isinstance(ready, ServerReady) and ready.timestamp == T0
    args = parse_line(
        prefix() + "server_args=ServerArgs(model_path='/m', speculative_algorithm='EAGLE3', "
        "speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4, "
        "json_model_override_args='{}', cuda_graph_bs=[1, 2, 4])"
    )
    assert isinstance(args, ServerArgs)
    assert args.get_str("speculative_algorithm") == "EAGLE3"
    assert (args.get_int("speculative_num_steps"), args.get_int("speculative_num_draft_tokens")) == (3, 4)
    assert args.get_int("speculative_token_map") is None
    acc = parse_line('[2026-04-05 20:02:51] INFO:     127.0.0.1:40052 - "POST /v1/chat/completions HTTP/1.1" 200 OK')
    assert isinstance(acc, HttpAccess)
    assert (acc.client, acc.method, acc.path, acc.status) == ("127.0.0.1:40052", "POST", "/v1/chat/completions", 200)
    v6 = parse_line('INFO:     [::1]:5000 - "GET /health HTTP/1.1" 503 Service Unavailable')
    assert isinstance(v6, HttpAccess) and v6.client == "[::1]:5000" and v6.status == 503 and v6.timestamp is None
    assert isinstance(parse_line(prefix(" TP0") + "Load weight begin. avail mem=78.12 GB"), Other)
    # request payloads are data: text inside them is not taken for a status line
    req = prefix() + "Receive: obj=GenerateReqInput(text='Decode batch, accept len: 3.00 Traceback (most recent call last)')"
    assert isinstance(parse_line(req), Other)


@pytest.mark.parametrize(
    "text",
    [
        "Max running requests is reset to 48 for speculative decoding. You can override this by explicitly setting --max-running-requests.",
        "Overlap scheduler is disabled because of using eagle3 or standalone speculative decoding.",
        "Beta spec is enabled for eagle speculative decoding and overlap schedule is turned on.",
        "Mixed chunked prefill is disabled because of using eagle speculative decoding.",
        "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1",
        "Speculative token map specified, but EAGLE3 models already have this. Ignoring the specified token map.",
        "SGLANG_ENABLE_SPEC_V2 has been removed: speculative decoding always runs the V2 worker. Use --disable-overlap-schedule to select the non-overlap (synchronous) path.",
        "Non-overlap (synchronous) spec v2 is used for eagle/eagle3/standalone speculative decoding.",
    ],
)
def test_spec_warnings(text: str) -> None:
    ev = parse_line(prefix() + text)
    assert isinstance(ev, ServerWarning) and ev.message == text and ev.timestamp == T0


def test_leveled_warnings() -> None:
    ev = parse_line("2025-12-04 20:35:53 WARNING 1 [server_args.py:1] something odd")
    assert isinstance(ev, ServerWarning) and ev.message == "something odd"
    ev2 = parse_line("/usr/lib/python3/dist-packages/torch/x.py:12: UserWarning: TypedStorage is deprecated")
    assert isinstance(ev2, ServerWarning)
    ev3 = parse_line("[2025-12-09 10:00:00] WARNING:  Invalid HTTP request received.")
    assert isinstance(ev3, ServerWarning) and ev3.message == "Invalid HTTP request received."


@pytest.mark.parametrize(
    "text, kind",
    [
        ("Scheduler hit an exception: Traceback (most recent call last):", "scheduler-exception"),
        ("Received sigquit from a child process. It usually means the child failed.", "sigquit"),
        ("Initialization failed. warmup error: Traceback (most recent call last):", "init-failed"),
        ("Health check failed. Server couldn't get a response from detokenizer for last 20 seconds.", "health-check"),
        ("RuntimeError: CUDA error: an illegal memory access was encountered", "cuda-error"),
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "oom"),
        ("Fatal Python error: Segmentation fault", "segfault"),
        ("Traceback (most recent call last):", "traceback"),
    ],
)
def test_failure_kinds(text: str, kind: str) -> None:
    ev = parse_line(prefix(" TP0") + text)
    assert isinstance(ev, Failure) and ev.kind == kind and ev.message == text and ev.timestamp == T0


# --- LogReader ------------------------------------------------------------------------------------

CRASH = [
    prefix(" TP0") + "Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 2740, in run_scheduler_process',
    "    scheduler.event_loop_overlap()",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "CUDA kernel errors might be asynchronously reported at some other API call.",
    "",
    "[2025-12-09 10:00:01] Received sigquit from a child process. It usually means the child failed.",
]


def _read(lines: list[str]) -> list[object]:
    r = LogReader()
    out: list[object] = []
    for line in lines:
        out += r.feed(line + "\n")
    return out + r.flush()


def test_reader_groups_traceback_into_failure() -> None:
    events = _read([prefix(" TP0") + BODY, *CRASH])
    assert [type(e).__name__ for e in events] == ["DecodeStats", "Failure", "Failure"]
    crash, sigquit = events[1], events[2]
    assert isinstance(crash, Failure) and isinstance(sigquit, Failure)
    assert crash.kind == "scheduler-exception" and crash.traceback == tuple(CRASH[1:6])
    assert crash.last_line == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert sigquit.kind == "sigquit" and sigquit.traceback == ()


def test_reader_holds_failure_until_next_record_and_flushes() -> None:
    r = LogReader()
    assert r.feed(CRASH[0]) == []
    assert r.feed(CRASH[1]) == [] and r.pending is not None
    done = r.flush()
    assert len(done) == 1 and isinstance(done[0], Failure) and done[0].traceback == (CRASH[1],)
    assert r.pending is None and r.flush() == []


def test_reader_bare_traceback_and_chained_exception() -> None:
    lines = [
        "Traceback (most recent call last):",
        '  File "a.py", line 1, in <module>',
        "KeyError: 'x'",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "a.py", line 3, in <module>',
        "ValueError: boom",
        prefix() + "The server is fired up and ready to roll!",
    ]
    events = _read(lines)
    assert [type(e).__name__ for e in events] == ["Failure", "ServerReady"]
    f = events[0]
    assert isinstance(f, Failure) and f.kind == "traceback"
    assert f.message == "ValueError: boom" and f.last_line == "ValueError: boom"
    assert len(f.traceback) == 8


def test_reader_strips_ray_wrapper_from_traceback_lines() -> None:
    w = "(SGLangEngine pid=952, ip=127.0.0.1) "
    events = _read([w + CRASH[0], w + CRASH[1], w + CRASH[3], w + prefix() + "The server is fired up and ready to roll!"])
    f = events[0]
    assert isinstance(f, Failure) and f.traceback == (CRASH[1], CRASH[3])
    assert isinstance(events[1], ServerReady)


def test_reader_bounds_a_huge_traceback() -> None:
    r = LogReader()
    r.feed(CRASH[0])
    for i in range(100_000):
        r.feed(f'  File "f{i}.py", line {i}, in g')
    r.feed("RuntimeError: last")
    (f,) = r.flush()
    assert isinstance(f, Failure)
    assert len(f.traceback) < 100 and f.last_line == "RuntimeError: last"
    assert any("left out" in t for t in f.traceback)


# --- garbage never raises, never hangs ------------------------------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=400))
def test_parse_line_never_raises_on_text(text: str) -> None:
    ev = parse_line(text)
    assert ev.line == text.rstrip("\r\n")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from([BODY, "Decode batch", ", ", ": ", "accept len", "[", "]", " TP0", "2025-12-09 10:00:00",
                                 "Traceback (most recent call last)", "\x00", "server_args=ServerArgs(", "a=", "'", "(",
                                 "pid=1", ") ", " - \"GET / HTTP/1.1\" 200", "WARN", "9" * 30, "nan", "-"]), max_size=40))
def test_parse_line_never_raises_on_near_misses(parts: list[str]) -> None:
    text = "".join(parts)
    ev = parse_line(text)
    assert ev.line == text.rstrip("\r\n")
    r = LogReader()
    r.feed(text)
    r.flush()


@pytest.mark.timeout(20)
@pytest.mark.parametrize(
    "text",
    [
        "a" * 1_000_000,
        "x" * 16_000 + " - \"GET",
        "w" * 16_000 + "=",
        "Warning" * 2_000,
        prefix() + "Decode batch, " + "k: v, " * 2_500,
        prefix() + "server_args=ServerArgs(" + "a" * 15_000,
        "\x00" * 1000 + BODY,
        "\udcff\udcfe" + BODY,  # what invalid UTF-8 becomes with surrogateescape
    ],
    ids=["1MB", "access-backtrack", "arg-backtrack", "warning-backtrack", "many-pairs", "args-long", "nul", "surrogates"],
)
def test_pathological_lines_are_quick_and_safe(text: str) -> None:
    ev = parse_line(text)
    assert ev.line == text
    r = LogReader()
    r.feed(CRASH[0])
    out = r.feed(text) + r.flush()
    assert any(isinstance(e, Failure) and e.kind == "scheduler-exception" for e in out)


# Texts from SGLang's own source: 0.5.6/0.5.23 configs/model_config.py `_derive_context_length`,
# 0.5.6 managers/scheduler_runtime_checker_mixin.py and 0.5.23 utils/watchdog.py.
CONTEXT_WARNING = (
    "Warning: Target model's context_length (40960) is greater than the derived context_length (2048). "
    "This may lead to incorrect model outputs or CUDA errors. Note that the derived context_length may "
    "differ from max_position_embeddings in the model's config."
)


def test_the_context_length_warning_of_every_eagle3_start_is_a_warning_not_a_cuda_error():
    ev = parse_line(f"[2026-12-01 10:00:00] {CONTEXT_WARNING}")
    assert isinstance(ev, ServerWarning) and "context_length (40960)" in ev.message
    refused = parse_line(f"ValueError: {CONTEXT_WARNING} To allow overriding this maximum, set the env var "
                         "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1")
    assert isinstance(refused, Failure) and refused.kind == "context-length"
    real = parse_line("[2026-12-01 10:00:00 TP0] CUDA error: an illegal memory access was encountered")
    assert isinstance(real, Failure) and real.kind == "cuda-error"


def test_watchdog_timeouts_are_named_before_the_sigquit_they_cause():
    old = parse_line("[2026-12-01 10:00:00 TP0] Watchdog timeout (self.watchdog_timeout=300)")
    new = parse_line("[2026-12-01 10:00:00 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)")
    assert isinstance(old, Failure) and isinstance(new, Failure)
    assert old.kind == new.kind == "watchdog-timeout"
    help_text = parse_line("  --watchdog-timeout WATCHDOG_TIMEOUT  Set watchdog timeout in seconds.")
    assert not isinstance(help_text, Failure)


def _split_prefix_by_definition(text: str, end: int) -> tuple[float | None, dict[str, int], int] | None:
    """The last SGLang bracket before `end`, read with epoch_of (split_prefix takes shortcuts)."""
    from eagle3_tui.sglang.logline import _SGLANG_PREFIX, _ranks, epoch_of

    last = None
    for m in _SGLANG_PREFIX.finditer(text, 0, end):
        last = m
    if last is None:
        return None
    return epoch_of(*last.group(1, 2, 3, 4, 5)), _ranks(last.group(6)), last.end()


_PREFIX_PARTS = st.sampled_from(
    ["[2026-04-05 20:00:01] ", "[2026-04-05 20:00:01.250 TP0] ", "[2026-04-05 20:00:01,5 DP1 TP8] ", "[2026-13-05 20:00:01] ",
     "[2026-04-05 25:00:01] ", "(Ray pid=3) ", "[x] ", "[", "Decode batch, #running-req: 1", " text ", "]"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(_PREFIX_PARTS, max_size=6), st.integers(0, 200))
def test_split_prefix_reads_the_last_sglang_bracket_as_defined(parts: list[str], cut: int) -> None:
    from eagle3_tui.sglang.logline import split_prefix

    text = "".join(parts)
    end = min(cut, len(text))
    expected = _split_prefix_by_definition(text, end)
    got = split_prefix(text, end)
    if expected is not None:
        assert got == expected
    # the same second read twice (the cache) gives the same time
    assert split_prefix(text, end) == got


_NUM = st.one_of(st.integers(0, 10**7).map(str), st.sampled_from(["007", "0", "1e3", "-1", "nan", "", " 5", "5 "]))
_FLOAT = st.one_of(
    st.floats(0, 1e6, allow_nan=False).map(lambda x: f"{x:.2f}"), st.sampled_from(["0.5", "1.", ".5", "nan", "2,5", "x"])
)


@st.composite
def _stat_lines(draw: st.DrawFn) -> str:
    """SGLang's decode and prefill lines in every release's shape, and near misses of them."""
    head = draw(st.sampled_from(["Decode batch, ", "Decode batch. ", "Decode batch [12], ", "Prefill batch, ", "Prefill batch. "]))
    if head.startswith("Decode"):
        spec = draw(st.sampled_from(["", f"accept len: {draw(_FLOAT)}, ", f"accept len: {draw(_FLOAT)}, accept rate: {draw(_FLOAT)}, "]))
        body = (
            f"#running-req: {draw(_NUM)}, #token: {draw(_NUM)}, token usage: {draw(_FLOAT)}, {spec}"
            f"{draw(st.sampled_from(['cuda', 'npu', 'cpu', 'musa', 'tpu']))} graph: {draw(st.sampled_from(['True', 'False', 'x']))}, "
            f"gen throughput (token/s): {draw(_FLOAT)}, #queue-req: {draw(_NUM)}"
        )
    else:
        body = (
            f"#new-seq: {draw(_NUM)}, #new-token: {draw(_NUM)}, #cached-token: {draw(_NUM)}, token usage: {draw(_FLOAT)}, "
            f"#running-req: {draw(_NUM)}, #queue-req: {draw(_NUM)}"
        )
    tail = draw(st.sampled_from(["", ", ", ",", " ", ", ,", "\r", ", est. decode TFLOPS/s (per GPU): 3.1", ", timestamp: 2026-04-05T20:00:00"]))
    prefix = draw(st.sampled_from(["[2026-04-05 20:00:01 TP0] ", "[2026-04-05 20:00:01.25 DP1 TP8] ", "", "(Ray pid=1) [2026-04-05 20:00:01] "]))
    return prefix + head + body + tail


@settings(max_examples=400, deadline=None)
@given(_stat_lines())
def test_plain_stat_lines_read_by_one_match_as_by_pairs(text: str) -> None:
    """_stats reads SGLang's plain shape with one match; it must give what reading the pairs gives."""
    from eagle3_tui.sglang.logline import _STATS_HEADER, _stats, _stats_by_pairs

    m = _STATS_HEADER.search(text)
    assert m is not None
    assert repr(_stats(text, m)) == repr(_stats_by_pairs(text, m))  # repr: nan == nan


def test_the_plain_shape_of_each_release_takes_the_one_match() -> None:
    from eagle3_tui.sglang.logline import _PLAIN_DECODE, _PLAIN_PREFILL, _STATS_HEADER
    from eagle3_tui.sglang.logsynth import decode_line, prefill_line

    for style in ("0.4.6", "0.5.3", "0.5.4", "0.5.6", "2026"):
        for accept in (None, 2.5):
            d = decode_line(style, running=3, used=9, usage=0.5, accept_len=accept, num_draft_tokens=4, tps=50.12, queue=1)
            assert _PLAIN_DECODE.fullmatch(d, _STATS_HEADER.search(d).end()), d  # type: ignore[union-attr]
        p = prefill_line(new_seq=1, new_token=5, cached=0, usage=0.1, running=3, queue=0, style=style)
        assert _PLAIN_PREFILL.fullmatch(p, _STATS_HEADER.search(p).end()), p  # type: ignore[union-attr]
