"""`eagle3-tui replay`: the fast block scanner agrees with parse_line, runs are split right, and the
command reads plain, gzip and stdin logs and refuses what is not a log."""

from __future__ import annotations

import gzip
import io
import json
import random
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eagle3_tui.cli import main
from eagle3_tui.commands.replay import sample_log_path
from eagle3_tui.sglang.logline import LogReader
from eagle3_tui.sglang.logmix import LINE_CLASSES, RANKS, make_line
from eagle3_tui.sglang.logsynth import RunPlan, sample_plans, write_log
from eagle3_tui.sglang.scan import ENGINES, best_engine, scan
from eagle3_tui.telemetry.runs import RunSplitter, RunSummary

PLANS = [
    RunPlan(decode_lines=400, spec=False, mean_tps=90.0, style="0.5.6"),
    RunPlan(decode_lines=500, steps=1, draft_tokens=2, requested_draft_tokens=16, mean_accept=1.4, crash=True),
    RunPlan(decode_lines=300, steps=5, draft_tokens=6, mean_accept=2.8, style="2026", ranks=" TP0 EP0"),
    RunPlan(decode_lines=300, steps=3, draft_tokens=4, mean_accept=2.2, style="0.5.4", ranks=" DP0 TP0"),
    RunPlan(decode_lines=200, steps=3, draft_tokens=4, mean_accept=2.4, style="0.4.6", ranks=""),
]


# The fast scanners built here (the compiled one where a C compiler was at install), each held
# against the reference (`fast=False`: every line through LogReader).
FAST_ENGINES = [e for e in ENGINES[:2] if e != "native" or best_engine() == "native"]


@pytest.fixture(scope="module")
def multirun(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, object]:
    buf = io.StringIO()
    truth = write_log(buf, PLANS, seed=7)
    return buf.getvalue().encode(), truth


def _replay(data: bytes, *, fast: bool, block_size: int = 1 << 20, engine: str | None = None) -> list[RunSummary]:
    sp = RunSplitter()
    res = scan(io.BytesIO(data), sp, fast=fast, engine=engine, block_size=block_size)
    assert res.recognized
    return sp.finish()


def test_runs_match_what_was_written(multirun: tuple[bytes, object]) -> None:
    data, truth = multirun
    runs = _replay(data, fast=True)
    assert len(runs) == len(PLANS)
    assert [r.decode_lines for r in runs] == truth.decode_lines  # type: ignore[attr-defined]
    for run, lens, tps, plan in zip(runs, truth.accept_lens, truth.tps, PLANS, strict=True):  # type: ignore[attr-defined]
        assert run.started_by == "server-args" and run.ready_at is not None
        if plan.spec:
            assert run.accept_len is not None
            assert run.accept_len.mean == pytest.approx(statistics.fmean(lens), abs=1e-9)
            assert run.accept_len.p50 == sorted(lens)[(len(lens) + 1) // 2 - 1]
            assert run.spec is not None and run.spec["num_steps"] == plan.steps
            assert run.accept_rate_tool == pytest.approx((statistics.fmean(lens) - 1) / plan.steps)
        else:
            assert run.accept_len is None and run.spec == {
                "algorithm": None, "num_steps": None, "topk": None, "num_draft_tokens": None,
            }
        assert run.gen_tps is not None and run.gen_tps.n == len(tps)
        assert run.gen_tps.mean == pytest.approx(statistics.fmean(tps), abs=0.051)  # 0.1 tok/s bins
    assert [r.rate_guess.definition if r.rate_guess else None for r in runs] == [
        None, "bonus-included", "bonus-excluded", "bonus-included", None,
    ]
    assert runs[2].rate_guess is not None and runs[2].rate_guess.num_draft_tokens == 6
    assert [f.kind for f in runs[1].failures] == ["scheduler-exception", "sigquit"]
    assert runs[1].failures[0].last_line == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert [len(r.warnings) for r in runs] == [0, 1, 0, 0, 0]
    assert all(r.failures_total == 0 for i, r in enumerate(runs) if i != 1)


@pytest.mark.parametrize("engine", FAST_ENGINES)
@pytest.mark.parametrize("block_size", [97, 4096, 65536, 1 << 20])
def test_fast_path_agrees_with_parse_line(multirun: tuple[bytes, object], block_size: int, engine: str) -> None:
    data, _ = multirun
    assert _replay(data, fast=True, block_size=block_size, engine=engine) == _replay(data, fast=False)


MESSY = [
    "(SGLangEngine pid=952, ip=127.0.0.1) [2025-12-09 10:00:01 TP0] Decode batch, #running-req: 1, #token: 2, "
    "token usage: 0.00, accept len: 2.50, accept rate: 0.62, cuda graph: True, gen throughput (token/s): 30.00, #queue-req: 0, ",
    "2025-12-09 10:00:02 INFO 1 [scheduler_metrics_mixin.py:287] Decode batch. #running-req: 1, #token: 2, token usage: 0.00, "
    "accept len: 3.50, cuda graph: True, gen throughput (token/s): 31.00, #queue-req: 0",
    "[2025-12-09 10:00:03] Receive: obj=GenerateReqInput(text='Decode batch, accept len: 9.99, gen throughput (token/s): 1.00 WARN')",
    "[2025-12-09 10:00:03 TP0] Decode batch, #running-req: 1, #token: 2, token usage: 0.00, accept len: nan, "
    "accept rate: x, cuda graph: True, gen throughput (token/s): -5.00, #queue-req: 0\r",
    "[2025-12-09 10:00:04 TP0] Decode batch, #running-req: 1, gen throughput (token/s): 12.34, #queue-req: 0",
    "",
    "\x00\x00 binary \x00",
    "\x00" * 3000 + "[2025-12-09 10:00:04 TP0] Decode batch, #running-req: 1, accept len: 1.50, "
    "gen throughput (token/s): 9.99, #queue-req: 0",  # after a copytruncate: NULs, then the line
    "[rank0]: Traceback (most recent call last):",
    '[rank0]:   File "x.py", line 1, in <module>',
    "[rank0]: torch.OutOfMemoryError: CUDA out of memory.",
    "[2025-12-09 10:00:05] WARNING:  Invalid HTTP request received.",
    "[2025-12-09 10:00:06] The server is fired up and ready to roll!",
]


def test_fast_path_agrees_on_messy_lines() -> None:
    rows = []
    for i in range(300):
        rows.append(MESSY[i % len(MESSY)].encode())
        if i % 50 == 7:
            rows.append(b"\xff\xfe invalid utf-8 \xc3\x28")
        if i % 90 == 3:
            rows.append(b"x" * 300_000)
    data = b"\n".join(rows) + b"\n"
    slow = _replay(data, fast=False)
    stat_rows = [MESSY[i % len(MESSY)] for i in range(300)]
    expected = sum(1 for r in stat_rows if "Decode batch, #running" in r or "Decode batch. #running" in r)
    assert sum(r.decode_lines for r in slow) == expected  # the NUL-prefixed line counts, the prompt does not
    for bs in (333, 8192, 1 << 20):
        for engine in FAST_ENGINES:
            assert _replay(data, fast=True, block_size=bs, engine=engine) == slow


LINES = [
    "[2025-12-09 10:00:{s:02d} TP0] Decode batch, #running-req: 3, #token: 10, token usage: 0.10, accept len: {a:.2f}, "
    "accept rate: {r:.2f}, cuda graph: True, gen throughput (token/s): {t:.2f}, #queue-req: 0, ",
    "[2025-12-09 10:00:{s:02d} TP0] Prefill batch, #new-seq: 1, #new-token: 5, #cached-token: 0, token usage: 0.10, "
    "#running-req: 3, #queue-req: 0, ",
    '[2025-12-09 10:00:{s:02d}] INFO:     127.0.0.1:4000 - "POST /generate HTTP/1.1" 200 OK',
    "[2025-12-09 10:00:{s:02d}] server_args=ServerArgs(speculative_algorithm='EAGLE3', speculative_num_steps=3, "
    "speculative_eagle_topk=1, speculative_num_draft_tokens=4)",
    "[2025-12-09 10:00:{s:02d}] The server is fired up and ready to roll!",
    "[2025-12-09 10:00:{s:02d} TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "x.py", line {s}, in f',
    "RuntimeError: boom {s}",
    "[2025-12-09 10:00:{s:02d}] Max running requests is reset to 48 for speculative decoding.",
    "[2025-12-09 10:00:{s:02d}] Receive: obj=GenerateReqInput(rid='{s}')",
    "[2025-12-09 10:00:{s:02d}] Cache flushed successfully!",
    "garbage {s} \x00 \udcff",
    "",
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(st.integers(0, len(LINES) - 1), st.integers(0, 59), st.floats(1, 4), st.floats(0.5, 300)), max_size=120),
    st.integers(16, 2048),
)
def test_fast_equals_slow_on_shuffled_log_lines(rows: list[tuple[int, int, float, float]], block_size: int) -> None:
    text = "\n".join(LINES[i].format(s=s, a=a, r=a / 4, t=t) for i, s, a, t in rows)
    _both_paths(text.encode("utf-8", "surrogateescape"), block_size)


@settings(max_examples=80, deadline=None)
@given(st.binary(max_size=3000), st.integers(1, 512))
def test_scan_never_raises_on_random_bytes(data: bytes, block_size: int) -> None:
    for engine in (*FAST_ENGINES, "reference"):
        sp = RunSplitter()
        scan(io.BytesIO(data), sp, engine=engine, block_size=block_size)
        sp.finish()


@pytest.mark.timeout(60)
def test_adversarial_long_lines_do_not_hang() -> None:
    head = b"[2025-12-09 10:00:00 TP0] Decode batch, "
    lines = [
        head + b"accept len: 1, " * 50_000,  # a plain-looking decode line of 750 KB
        b"x" * 3_000_000,  # over MAX_LONG_LINE: dropped unread
        head + b"gen throughput (token/s): " * 30_000,
        b"[" * 500_000,
    ]
    data = b"\n".join(lines) + b"\n" + LINES[0].format(s=1, a=2, r=0.5, t=10).encode() + b"\n"
    out = []
    for engine in (*FAST_ENGINES, "reference"):  # past 4 MiB of lines that are no log records (over MAX_LINE)
        sp = RunSplitter()
        assert scan(io.BytesIO(data), sp, engine=engine, block_size=1 << 16, probe_bytes=1 << 30).recognized
        out.append(sp.finish())
    assert all(o == out[-1] for o in out) and out[0][-1].decode_lines == 1


# --- the command ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sample_bytes() -> bytes:
    return Path(sample_log_path()).read_bytes()


def test_bundled_sample_is_the_reproducible_story(sample_bytes: bytes) -> None:
    buf = io.StringIO()
    write_log(buf, sample_plans(), seed=2026)
    assert buf.getvalue().encode() == sample_bytes


def test_replay_text_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", "--sample"]) == 0
    out = capsys.readouterr().out
    assert "4 runs" in out and out.count("\nrun ") == 4
    assert "speculation   off" in out
    assert "speculation   EAGLE3  steps 1  topk 1  draft tokens 2" in out
    assert "1× speculative_num_draft_tokens is adjusted" in out
    assert "scheduler-exception: RuntimeError: CUDA error: an illegal memory access was encountered" in out
    assert "accept len    mean " in out and "gen tok/s     mean " in out and " p10 " in out and " median " in out
    assert "SGLang rate   accept len / num_draft_tokens" in out
    assert "tool rate     " in out


def test_replay_json_plain_and_gzip(tmp_path: Path, sample_bytes: bytes, capsys: pytest.CaptureFixture[str]) -> None:
    plain = tmp_path / "server.log"
    plain.write_bytes(sample_bytes)
    gz = tmp_path / "server.log.1"  # compressed, without a .gz name: found by its magic bytes
    gz.write_bytes(gzip.compress(sample_bytes))
    assert main(["replay", "--json", str(plain), str(gz)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["errors"] == []
    a, b = doc["logs"]
    assert a["runs"] == b["runs"] and a["bytes"] == b["bytes"] == len(sample_bytes)
    runs = a["runs"]
    assert [r["decode_lines"] for r in runs] == [60, 60, 60, 60]
    assert runs[0]["accept_len"] is None and runs[0]["gen_tps"]["n"] == 60
    assert runs[1]["rate_guess"]["definition"] == "bonus-included" and runs[1]["spec"]["num_draft_tokens"] == 2
    assert runs[1]["failures"][0]["kind"] == "scheduler-exception"
    assert runs[1]["warnings"][0]["count"] == 1
    assert set(runs[3]["accept_len"]) == {"n", "mean", "p10", "p50", "p90", "lo", "hi"}
    assert runs[3]["start_clock"] == "2025-12-09 10:02:32" and runs[3]["span_s"] > 0
    assert runs[3]["accept_len"]["mean"] > runs[2]["accept_len"]["mean"]  # the wiring fix shows


def test_replay_stdin_plain_and_gzip(
    monkeypatch: pytest.MonkeyPatch, sample_bytes: bytes, capsys: pytest.CaptureFixture[str]
) -> None:
    for data in (sample_bytes, gzip.compress(sample_bytes)):
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
        assert main(["replay", "--json", "-"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["logs"][0]["path"] == "-" and len(doc["logs"][0]["runs"]) == 4


@pytest.mark.parametrize(
    "content, message",
    [
        (b"", "is empty"),
        (b"hello\nthis is a README, not a server log\n" * 50, "does not look like an SGLang server log"),
        (bytes(range(256)) * 100, "does not look like an SGLang server log"),
        (gzip.compress(b"plain words\n")[:-8] + b"\0" * 8, "broken gzip data"),
    ],
    ids=["empty", "text", "binary", "bad-gzip"],
)
def test_not_a_log_is_one_line_and_non_zero(
    tmp_path: Path, content: bytes, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "thing"
    f.write_bytes(content)
    assert main(["replay", str(f)]) == 2
    cap = capsys.readouterr()
    assert cap.out == ""
    assert cap.err.count("\n") == 1 and cap.err.startswith("eagle3-tui: ") and message in cap.err


def test_missing_file_directory_and_partial_success(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", str(tmp_path / "nope.log")]) == 2
    assert "no such file" in capsys.readouterr().err
    assert main(["replay", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert main(["replay", "--sample", str(tmp_path / "nope.log")]) == 2  # the good one is still reported
    cap = capsys.readouterr()
    assert "4 runs" in cap.out and cap.err.count("\n") == 1
    assert main(["replay"]) == 2
    assert "needs a LOG file" in capsys.readouterr().err


def test_console_script_reads_a_pipe_and_imports_nothing_heavy(sample_bytes: bytes) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "eagle3_tui", "replay", "-"], input=gzip.compress(sample_bytes), capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert b"4 runs" in proc.stdout
    probe = (
        "import sys, eagle3_tui.cli as c; c.build_parser(); import eagle3_tui.commands.replay as r; "
        "r.replay_path(r.sample_log_path()); "
        "print(sorted(m for m in ('torch', 'textual', 'safetensors', 'numpy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


# --- several worker processes (scan.parallel) ------------------------------------------------------
# Workers are forked only from a single-threaded process (the CLI); a test runner may hold other
# threads, so these run in a fresh interpreter.

WORKER_PROBE = """
import io, pickle, random, sys
import eagle3_tui.sglang.scan.parallel as par
from eagle3_tui.sglang.scan import scan
from eagle3_tui.telemetry.runs import RunSplitter
mode, path, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3])
if len(sys.argv) > 4:
    par.MAX_LEADING_LINES = int(sys.argv[4])
def both(p, j):
    sp = RunSplitter()
    res = par.scan_path(p, sp, jobs=j, min_bytes=0)
    ref = RunSplitter()
    ref_res = scan(io.BytesIO(open(p, "rb").read()), ref, fast=False)
    return res, sp.finish(), ref_res, ref.finish()
if mode == "one":
    res, runs, ref_res, ref = both(path, jobs)
    sys.stdout.buffer.write(pickle.dumps((res.workers, res.recognized, runs, ref_res.recognized, ref)))
else:  # "random": many shuffled logs, seeded; prints the first disagreement
    lines = [l for l in open(path, encoding="utf-8", errors="surrogateescape").read().split("\\n")]
    rng = random.Random(5)
    cases = int(mode.split(":")[1])
    parallel = 0
    for case in range(cases):
        rows = [rng.choice(lines) for _ in range(rng.randint(0, 400))]
        with open(path + ".case", "w", encoding="utf-8", errors="surrogateescape") as f:
            f.write("\\n".join(rows))
        res, runs, ref_res, ref = both(path + ".case", rng.randint(2, 6))
        parallel += res.workers > 1
        if (res.recognized, runs) != (ref_res.recognized, ref):
            print("DISAGREE", case, repr(rows)[:2000])
            break
    else:
        print("ok" if parallel > cases // 2 else f"only {parallel} of {cases} cases used workers")
"""


def _probe(*args: str) -> bytes:
    proc = subprocess.run([sys.executable, "-c", WORKER_PROBE, *args], capture_output=True, timeout=300)
    assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    return proc.stdout


def _replay_workers(path: Path, jobs: int, *extra: str) -> tuple[int, bool, list[RunSummary], bool, list[RunSummary]]:
    import pickle

    return pickle.loads(_probe("one", str(path), str(jobs), *extra))


def test_workers_agree_with_one_reader(tmp_path: Path, multirun: tuple[bytes, object]) -> None:
    data, _ = multirun
    crash_at = data.index(b"Scheduler hit an exception")
    # a traceback long enough that cuts fall inside it, and whole ranges are nothing but traceback
    tb = b"".join(b'  File "f%d.py", line %d, in g\n' % (i, i) for i in range(6000))
    eol = data.index(b"\n", crash_at) + 1
    f = tmp_path / "big.log"
    f.write_bytes(data[:eol] + tb + data[eol:])
    for jobs in (2, 7):
        workers, recognized, runs, ref_recognized, ref = _replay_workers(f, jobs)
        assert workers == jobs and recognized and ref_recognized
        assert runs == ref and len(runs) == len(PLANS)
        assert runs[1].failures[0].last_line.startswith("RuntimeError: CUDA error")  # the tail survived
    messy = tmp_path / "messy.log"
    messy.write_bytes(b"\n".join(m.encode() for m in MESSY * 40) + b"\n")
    workers, _, runs, _, ref = _replay_workers(messy, 4)
    assert workers == 4 and runs == ref


def test_workers_fall_back_when_a_cut_lands_in_a_huge_traceback(tmp_path: Path) -> None:
    lines = [LINES[5].format(s=1), *(f'  File "x.py", line {i}, in f' for i in range(500)), "RuntimeError: deep"]
    lines += [LINES[0].format(s=2, a=2.0, r=0.5, t=50.0)] * 20
    f = tmp_path / "tb.log"
    f.write_text("\n".join(lines) + "\n")
    workers, recognized, runs, _, ref = _replay_workers(f, 3, "10")  # at most 10 lines before a record
    assert workers == 1 and recognized and runs == ref
    assert runs[0].failures[0].last_line == "RuntimeError: deep" and runs[0].decode_lines == 20


def test_workers_equal_one_reader_on_shuffled_lines(tmp_path: Path) -> None:
    f = tmp_path / "lines.txt"
    rows = [LINES[i].format(s=s, a=1 + s / 20, r=(1 + s / 20) / 4, t=10 + s) for i in range(len(LINES)) for s in (3, 7)]
    f.write_text("\n".join(rows), encoding="utf-8", errors="surrogateescape")
    assert _probe("random:100", str(f), "0").decode().strip() == "ok"


def test_replay_command_uses_workers_on_big_files(tmp_path: Path, multirun: tuple[bytes, object]) -> None:
    data, _ = multirun
    f = tmp_path / "server.log"
    f.write_bytes(data)
    code = (
        "import sys, eagle3_tui.sglang.scan.parallel as p; p.MIN_PARALLEL_BYTES.update(native=1, regex=1); "
        "from eagle3_tui.cli import main; raise SystemExit(main(sys.argv[1:]))"
    )
    outs = []
    for jobs in ("1", "3"):
        proc = subprocess.run([sys.executable, "-c", code, "replay", "--json", "-j", jobs, str(f)], capture_output=True, timeout=120)
        assert proc.returncode == 0, proc.stderr
        outs.append(json.loads(proc.stdout))
    assert outs[0] == outs[1] and len(outs[0]["logs"][0]["runs"]) == len(PLANS)


# --- a busy server's line mix (logmix) on both paths ---------------------------------------------


# Lines next to the mix's classes that a scanner could get wrong: stat-looking text in places
# where it is no stat line, stat lines in unusual shapes, wrapped lines, failures and the lines
# after them, the 0.5.20 start line, values that are no numbers.
ODD_LINES = [
    "[2026-04-05 20:00:01] Finish: obj=GenerateReqInput(rid='x'), out={'text': ', accept len: 9.99, accept rate: 0.1, "
    "gen throughput (token/s): 1.00, Decode batch, #running-req: 1'}",
    "[2026-04-05 20:00:01] Receive: obj=GenerateReqInput(text='[2026-04-05 20:00:01 TP0] Decode batch, #running-req: 1, "
    "accept len: 3.00, gen throughput (token/s): 2.00, #queue-req: 0', rid='y')",
    '[2026-04-05 20:00:01] INFO:     127.0.0.1:5 - "GET /Scheduler%20hit%20an%20exception HTTP/1.1" 404 Not Found',
    "(SGLangEngine pid=952, ip=127.0.0.1) [2026-04-05 20:00:02 TP0] Decode batch, #running-req: 1, #token: 2, token usage: "
    "0.00, accept len: 2.50, accept rate: 0.62, cuda graph: True, gen throughput (token/s): 30.00, #queue-req: 0, ",
    "2026-04-05 20:00:02,659 [INFO] sglang.srt.managers.scheduler_metrics_mixin: Decode batch, #running-req: 1, "
    "accept len: 1.75, gen throughput (token/s): 12.50, #queue-req: 0",
    "[2026-04-05 20:00:03 TP0] Decode batch, #running-req: 1, accept len: nan, accept rate: x, cuda graph: True, "
    "gen throughput (token/s): -5.00, #queue-req: 0\r",
    "[2026-04-05 20:00:03 DP1 TP8] Decode batch [12], #running-req: 2, #full token: 9, full token usage: 0.10, "
    "#swa token: 3, swa token usage: 0.05, accept len: 2,5, accept rate: 0.4, npu graph: False, "
    "gen throughput (token/s): 77.125, #queue-req: 0",
    "[2026-04-05 20:00:04 TP1] Decode batch, #running-req: 1, gen throughput (token/s): 12.34, #queue-req: 0",
    "[2026-04-05 20:00:04 TP0] Decode batch, #running-req: 1, token usage: 0.10, accept len: 2.25, accept rate: 0.42, "
    "cuda graph: True, gen throughput (token/s): 88.10, #queue-req: 0, est. decode TFLOPS/s (per GPU): 3.1, fwd occupancy: 80%",
    "[2026-04-05 20:00:05 TP0] Decode batch, #running-req: 1, gen throughput (token/s), #queue-req: 0",
    "[2026-13-45 99:00:05 TP0] Decode batch, #running-req: 1, accept len: 3.25, gen throughput (token/s): 9.00, #queue-req: 0",
    "[2026-04-05 20:00:06] server_args={'model_path': '/m', 'speculative_algorithm': 'EAGLE3', "
    "'speculative_num_steps': 2, 'speculative_eagle_topk': 1, 'speculative_num_draft_tokens': 3}",
    "[2026-04-05 20:00:06] server_args=ServerArgs(speculative_algorithm='EAGLE3', speculative_num_steps=4, "
    "speculative_eagle_topk=1, speculative_num_draft_tokens=5)",
    "[2026-04-05 20:00:07] The server is fired up and ready to roll!",
    "[2026-04-05 20:00:08 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 2740, in run_scheduler_process',
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "[2026-04-05 20:00:09] Received sigquit from a child process. It usually means the child failed.",
    "[rank0]: torch.OutOfMemoryError: CUDA out of memory.",
    "[2026-04-05 20:00:10] Max running requests is reset to 48 for speculative decoding.",
    "[2026-04-05 20:00:10] WARNING:  Invalid HTTP request received.",
    "[2026-04-05 20:00:11 TP0] Decode out of memory happened. #retracted_reqs: 1, #new_token_ratio: 0.5 -> 1.0",
    "[2026-04-05 20:00:12] KV cache pool is full. Retract requests. #retracted_reqs: 1, #new_token_ratio: 0.5925 -> 1.0000 (WARN)",
    "[2026-04-05 20:00:12] Cache flushed successfully! Health check failed",
    "[2026-04-05 20:00:12] INFO:     Waiting for application startup.",
    "[1, 2, 3,",
    "",
    "\x00\x00 binary \x00",
]


def _both_paths(data: bytes, block_size: int) -> None:
    """Every fast scanner built here gives the reference's result."""
    slow = RunSplitter()
    rs = scan(io.BytesIO(data), slow, fast=False, block_size=block_size)
    expected = slow.finish()
    for engine in FAST_ENGINES:
        fast = RunSplitter()
        rf = scan(io.BytesIO(data), fast, engine=engine, block_size=block_size)
        assert rf.recognized == rs.recognized, engine
        assert fast.finish() == expected, engine


def _mix_line(rng: random.Random, kind: int, t: float) -> str:
    names = sorted(LINE_CLASSES)
    if kind < len(names):
        return make_line(names[kind], rng, t, style=rng.choice(("0.4.6", "0.5.3", "0.5.4", "0.5.6", "2026")))
    return ODD_LINES[(kind - len(names)) % len(ODD_LINES)]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.integers(0, len(LINE_CLASSES) + len(ODD_LINES) - 1), max_size=160),
    st.integers(0, 2**32),
    st.sampled_from([64, 301, 4096, 1 << 20]),
)
def test_fast_equals_slow_on_a_busy_servers_line_mix(kinds: list[int], seed: int, block_size: int) -> None:
    rng = random.Random(seed)
    text = "\n".join(_mix_line(rng, k, 1775419200.0 + i * 0.25) for i, k in enumerate(kinds))
    _both_paths(text.encode("utf-8", "surrogateescape"), block_size)


def test_every_mix_class_and_odd_line_in_a_long_log() -> None:
    rng = random.Random(11)
    names = sorted(LINE_CLASSES)
    rows = [_mix_line(rng, rng.randrange(len(names) + len(ODD_LINES)), 1775419200.0 + i) for i in range(6000)]
    data = ("\n".join(rows) + "\n").encode()
    for bs in (997, 65536, 1 << 20):
        _both_paths(data, bs)


def test_megabyte_line_tqdm_carriage_returns_and_interleaved_ranks() -> None:
    rng = random.Random(3)
    decode = [make_line("decode", rng, 1775419200.0 + i) for i in range(400)]
    assert {r.strip() for r in RANKS} <= {d.split("]")[0].split(":")[-1][3:].strip() for d in decode}
    tqdm = make_line("tqdm", rng, 1775419200.0)
    assert "\r" in tqdm and "█" in tqdm
    huge_decode = decode[0] + ", pad: " + "x" * ((1 << 20) - len(decode[0]) - 10)  # a 1 MiB stat line: Other
    huge_garbage = "y" * ((1 << 20) - 1)
    failure = "[2026-04-05 20:10:00 TP0] Scheduler hit an exception: Traceback (most recent call last):"
    lines = [
        decode[0], tqdm, *decode[1:200], huge_decode, tqdm + "\r", *decode[200:300],
        failure, '  File "x.py", line 1, in f', huge_garbage, "RuntimeError: boom",
        *decode[300:], tqdm,
    ]
    data = ("\n".join(lines) + "\n").encode()
    assert len(huge_decode.encode()) >= 1 << 20 - 16 and len(huge_decode.encode()) <= 1 << 20
    for bs in (4096, 1 << 16, 1 << 20, 3 << 20):
        _both_paths(data, bs)
    runs = _replay(data, fast=True)
    assert sum(r.decode_lines for r in runs) == 400  # the 1 MiB line is no stat line; all ranks count
    assert runs[-1].failures[0].last_line == "RuntimeError: boom"  # the 1 MiB line went into the traceback
    # the same events, line by line, on the reference path: LogReader on the same lines
    reader = LogReader()
    events = [ev for line in lines for ev in reader.feed(line)] + reader.flush()
    kinds = [type(ev).__name__ for ev in events]
    assert kinds.count("DecodeStats") == 400 and kinds.count("Failure") == 1
    assert {type(reader.feed(t)[0]).__name__ for t in (tqdm, tqdm + "\r", huge_decode)} == {"Other"}


def test_start_lines_of_every_release_split_runs_also_past_max_line() -> None:
    """SGLang <= 0.5.19 logs `server_args=ServerArgs(...)`, 0.5.20+ `server_args={...}` (sglang 0.5.20
    srt/entrypoints/engine.py); a real one runs past 16 KiB. Each starts a run with its flags, on both paths."""
    from eagle3_tui.sglang.logsynth import decode_line

    fields = {"model_path": "/models/Qwen3-8B", "speculative_algorithm": "EAGLE3", "speculative_num_steps": 3,
              "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 4, "chat_template": "x" * 30_000}
    old = "[2026-04-05 20:00:00] server_args=ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in fields.items()) + ")"
    new = "[2026-04-05 21:00:00] server_args=" + repr(fields)
    stat = decode_line("0.5.6", running=1, used=10, usage=0.01, accept_len=2.5, num_draft_tokens=4, tps=50.0, queue=0)
    lines = [new[:200] + "}", stat, old, stat, stat, new, stat]
    data = ("\n".join(lines) + "\n").encode()
    for bs in (4096, 1 << 20):
        _both_paths(data, bs)
    runs = _replay(data, fast=True)
    assert [r.decode_lines for r in runs] == [1, 2, 1]
    assert all(r.spec is not None and r.spec["num_steps"] == 3 and r.spec["num_draft_tokens"] == 4 for r in runs[1:])


def test_accept_len_values_out_of_the_plain_shape_agree_on_both_paths() -> None:
    """The fast path reads `accept len: d.dd, ` values by slicing; 2-digit, 1-decimal, 3-decimal
    and non-numeric values (and a repeated key) make it read the stretch by the general patterns."""
    from eagle3_tui.sglang.scan.regex import plain_lens

    head = "[2026-04-05 20:00:0{s} TP0] Decode batch, #running-req: 1, #token: 9, token usage: 0.01, "
    tail = "accept rate: 0.50, cuda graph: True, gen throughput (token/s): 50.25, #queue-req: 0, "
    for odd in ("10.00", "2.5", "2.125", "nan", "2.00, accept len: 3.00"):
        lines = [head.format(s=i % 10) + f"accept len: {odd if i == 7 else '2.40'}, " + tail for i in range(20)]
        _both_paths(("\n".join(lines) + "\n").encode(), 1 << 20)
    assert plain_lens(b"1, accept len: 2.40, x\n1, accept len: 3.05, y\n", 2) == [b"2.40", b"3.05"]
    assert plain_lens(b"1, accept len: 12.40, x\n", 1) == []
    assert plain_lens(b"1, accept len: 2.4, x\n", 1) == []


# Decode rows the compiled scanner cuts itself next to ones it must hand to LogReader: a value
# ending in `\r` at the line end, 2-decimal tok/s ending a line, keys spelled or repeated otherwise,
# a row without tok/s between rows with it (RunSplitter drops it, its accept len too), a clock no
# prefix parser reads, keys at the body's start, a Prefill row with an iteration number, lines in
# other loggers' wrappers (one holding a needle itself, one over MAX_LINE with its wrapper).
EDGE_ROWS = [
    "[2026-04-05 20:00:01 TP0] Decode batch, #running-req: 1, accept len: 2.40\r",
    "[2026-04-05 20:00:01 TP0] Decode batch, #running-req: 1, accept len: 2.40, gen throughput (token/s): 126.74\r",
    "[2026-04-05 20:00:01 TP0] Decode batch, #running-req: 1, accept len: 2.40, gen throughput (token/s): 126.74 , x: 1",
    "[2026-04-05 20:00:02 TP0] Decode batch, #running-req: 1, accept len: 3.10, #queue-req: 0, ",
    "[2026-04-05 20:00:02 TP0] Decode batch, #running-req: 1, accept len:2.10, gen throughput (token/s): 10.00, ",
    "[2026-04-05 20:00:02 TP0] Decode batch, #running-req: 1,  accept len: 2.20, gen throughput (token/s): 11.00, ",
    "[2026-04-05 20:00:02 TP0] Decode batch, #running-req: 1, accept len: 2.30, gen throughput (token/s): 12.00, "
    "gen throughput (token/s): 13.00",
    "[2026-04-05 20:00:03 TP0] Decode batch, #running-req: accept len: 2.50, gen throughput (token/s): 14.00, ",
    "[2026-04-05 20:00:03 TP0] Decode batch, #running-req: 1, accept len: 2.60, accept rate: 0.40, accept rate: 0.50, "
    "gen throughput (token/s): 15.00, ",
    "[2026-04-05 20:00:03 TP0] Decode batch, #running-req: 1, accept rate: 0.40, gen throughput (token/s): 16.00, ",
    "[2026-04-05 20:00:03 TP0] Decode batch, #running-req: 1, accept len: 2.70, gen throughput (token/s): 1234567890123.45, ",
    "[2026-04-05 20:00:03 TP0] Decode batch, #running-req: 1, accept len: 2.70, gen throughput (token/s): 17.5,, ",
    "[at the start of time, ranks X] Decode batch, #running-req: 1, accept len: 2.80, gen throughput (token/s): 18.00, ",
    "[2026-04-05 20:00:04 TP0] Decode batch [123456789012], #running-req: 1, accept len: 2.90, "
    "gen throughput (token/s): 19.00, ",
    "[2026-04-05 20:00:04 TP0] Decode batch [1234567890123], #running-req: 1, accept len: 2.90, "
    "gen throughput (token/s): 19.00, ",
    "[2026-04-05 20:00:04 TP0] Prefill batch [77], #new-seq: 1, #new-token: 5, #cached-token: 0, token usage: 0.10, ",
    "[2026-04-05 20:00:05] KV cache pool is full. Retract requests. #retracted_reqs: 2, #aborted_retracted_reqs: 1, "
    "#new_token_ratio: 0.5 -> 1.0\r",
    "[2026-04-05 20:00:05] Cache flushed successfully!\r\r",
    "[2026-04-05 20:00:05] server_args=ServerArgs(speculative_algorithm='EAGLE3', speculative_num_steps=2, "
    "speculative_eagle_topk=1, speculative_num_draft_tokens=3)",
    "[2026-04-05 20:00:06 TP0] Decode batch, #running-req: 1, token usage: 0.10, accept len: 2.25, accept rate: 0.42, "
    "cuda graph: True, gen throughput (token/s): 88.10, #queue-req: 0, ",
    # other loggers' wrappers (Ray, a log shipper), read as parse_line reads them
    "(SGLangEngine pid=952, ip=127.0.0.1) [2026-04-05 20:00:07 TP0] Decode batch, #running-req: 1, accept len: 3.40, "
    "accept rate: 0.60, gen throughput (token/s): 40.25, #queue-req: 0, ",
    "[2026-04-05T20:00:07.123Z] pod-0 >> (raylet pid=7) [2026-04-05 20:00:07 DP1 TP8] Decode batch, #running-req: 1, "
    "accept len: 3.50, gen throughput (token/s): 41.00, #queue-req: 0, ",
    "(SGLangEngine pid=952) [2026-04-05 20:00:07] Receive: obj=GenerateReqInput(text='Scheduler hit an exception')",
    '(SGLangEngine pid=952) [2026-04-05 20:00:07] INFO:     127.0.0.1:5 - "POST /generate HTTP/1.1" 200 OK',
    "(WARN pid=1) [2026-04-05 20:00:08 TP0] Decode batch, #running-req: 1, accept len: 3.60, "
    "gen throughput (token/s): 42.00, #queue-req: 0, ",
    "(a (nested) pid=1) [2026-04-05 20:00:08 TP0] Decode batch, #running-req: 1, accept len: 3.70, "
    "gen throughput (token/s): 43.00, #queue-req: 0, ",
    "(no pid here) [2026-04-05 20:00:08 TP0] Decode batch, #running-req: 1, accept len: 3.80, "
    "gen throughput (token/s): 44.00, #queue-req: 0, ",
    "(SGLangEngine pid=952) [2026-04-05 20:00:09 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    "(SGLangEngine pid=952)   File \"x.py\", line 1, in f",
    "(SGLangEngine pid=952) RuntimeError: boom",
    "(SGLangEngine pid=952) [2026-04-05 20:00:10 TP0] Decode batch, #running-req: 1, accept len: 2.10, "
    "gen throughput (token/s): 45.00, #queue-req: 0, " + "x" * 16_400,
]


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.integers(0, len(EDGE_ROWS) - 1), max_size=80), st.sampled_from([64, 333, 1 << 20]))
def test_edge_decode_rows_agree_with_the_reference(rows: list[int], block_size: int) -> None:
    _both_paths(("\n".join(EDGE_ROWS[i] for i in rows) + "\n").encode(), block_size)


def test_every_edge_row_in_order_agrees_and_counts_what_logreader_counts() -> None:
    data = ("\n".join(EDGE_ROWS * 3) + "\n").encode()
    for bs in (128, 1 << 20):
        _both_paths(data, bs)
    reader = LogReader()
    events = [ev for row in EDGE_ROWS * 3 for ev in reader.feed(row)]
    counted = [ev for ev in events if type(ev).__name__ == "DecodeStats" and "gen throughput (token/s)" in ev.line]
    assert sum(r.decode_lines for r in _replay(data, fast=True)) == len(counted)


def test_the_compiled_scanner_is_built_where_ci_requires_it() -> None:
    """`.ci/run` installs a C compiler and sets EAGLE3_TUI_REQUIRE_NATIVE: there the compiled scanner
    must have been built (elsewhere the regex scanner stands in, and says so in `replay`)."""
    import os

    if not os.environ.get("EAGLE3_TUI_REQUIRE_NATIVE"):
        pytest.skip("EAGLE3_TUI_REQUIRE_NATIVE is not set")
    assert best_engine() == "native"


def test_an_unbuilt_engine_is_refused_in_one_sentence() -> None:
    with pytest.raises(ValueError, match="no fastest scanner here"):
        scan(io.BytesIO(b"x\n"), RunSplitter(), engine="fastest")


@pytest.mark.skipif(best_engine() != "native", reason="the compiled scanner is not built here")
def test_the_compiled_scanner_refuses_bad_arguments_in_one_sentence() -> None:
    from eagle3_tui.sglang import _linescan
    from eagle3_tui.sglang.logline import MAX_LINE

    assert _linescan.MAX_LINE == MAX_LINE  # the bound on a stat line LogReader reads, in both
    data = b"\n[2026-04-05 20:00:00] The server is fired up and ready to roll!\n"
    assert _linescan.scan(data, 0, len(data), (b"fired up",), False)[:2] == (0, len(data) - 1)  # stops at it
    for args, message in [
        ((data, 0, len(data) + 1, (b"ab",), False), "pos and end must lie in the buffer"),
        ((data, 5, 5, (b"ab",), False), "pos < end"),
        ((data, 0, len(data), (b"a",), False), "two bytes or more"),
        ((data, 0, len(data), ("text",), False), "must be bytes"),
        ((data, 0, len(data), tuple(b"n%02d" % i for i in range(65)), False), "at most 64 needles"),
    ]:
        with pytest.raises(ValueError, match=message):
            _linescan.scan(*args)
    with pytest.raises(TypeError):
        _linescan.scan("not bytes", 0, 1, (b"ab",), False)  # type: ignore[arg-type]


def test_without_the_compiled_scanner_replay_reads_the_same_and_says_so() -> None:
    """An install with no C compiler (the module blocked here) replays with the regex scanner."""
    code = (
        "import sys; sys.modules['eagle3_tui.sglang._linescan'] = None; "
        "from eagle3_tui.cli import main; raise SystemExit(main(sys.argv[1:]))"
    )
    blocked = subprocess.run([sys.executable, "-c", code, "replay", "--json", "--sample"], capture_output=True, timeout=120)
    plain = subprocess.run([sys.executable, "-m", "eagle3_tui", "replay", "--json", "--sample"], capture_output=True, timeout=120)
    assert blocked.returncode == 0 == plain.returncode, blocked.stderr
    a, b = json.loads(blocked.stdout)["logs"][0], json.loads(plain.stdout)["logs"][0]
    assert a["scanner"] == "regex" and b["scanner"] == best_engine()
    assert a["runs"] == b["runs"]
    text = subprocess.run([sys.executable, "-c", code, "replay", "--sample"], capture_output=True, text=True, timeout=120)
    assert "regex scanner: the compiled one is not built here" in text.stdout.splitlines()[0]
