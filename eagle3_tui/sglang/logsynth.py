"""Synthetic SGLang server logs, written the way SGLang's own f-strings write them.

Used by the replay benchmark (a seeded 1,000,000-line log), the tests (multi-run logs with known
numbers) and the bundled sample log. Formats follow research/sglang.md §1: `style` picks the
decode-line shape of one SGLang era.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TextIO

__all__ = [
    "RunPlan",
    "SynthTruth",
    "decode_line",
    "prefill_line",
    "prefix",
    "sample_plans",
    "synth_lines",
    "write_log",
]

# Decode-line shapes by SGLang era: the header after "Decode batch", whether `accept rate` follows
# `accept len` (and by which definition), the graph field, and whether the line ends with ", ".
STYLES = ("0.4.1", "0.4.6", "0.5.3", "0.5.4", "0.5.6", "2026")


@dataclass(frozen=True)
class _Shape:
    header: str  # "." | "," | " [N]," (the decode forward count)
    rate: str  # "" (no accept rate) | "len/draft" | "(len-1)/(draft-1)"
    graph: str  # "" (no field) | "cuda" (always "cuda graph") | "device" ("<device> graph")
    trailing: bool


_SHAPES = {
    "0.4.1": _Shape(".", "", "", False),  # the first release with accept len
    "0.4.6": _Shape(".", "", "cuda", False),  # 0.4.6.post4
    "0.5.3": _Shape(".", "len/draft", "device", True),
    "0.5.4": _Shape(" [N],", "len/draft", "device", True),
    "0.5.6": _Shape(",", "len/draft", "device", True),
    "2026": _Shape(",", "(len-1)/(draft-1)", "device", False),
}


def prefix(t: float, ranks: str = "", ms: bool = False, *, local: bool = False) -> str:
    """`[%(asctime)s{.msecs}{ranks}] `; the clock is read as UTC (see logline), or as local time
    (`local=True`, what a live server's `asctime` shows)."""
    text = time.strftime("%Y-%m-%d %H:%M:%S", (time.localtime if local else time.gmtime)(int(t)))
    if ms:
        text += f".{round((t % 1) * 1000) % 1000:03d}"
    return f"[{text}{ranks}] "


def _accept_rate(shape: _Shape, accept_len: float, num_draft_tokens: int) -> float:
    if shape.rate == "len/draft":
        return accept_len / num_draft_tokens
    return (accept_len - 1) / max(num_draft_tokens - 1, 1)


def decode_line(
    style: str,
    *,
    running: int,
    used: int,
    usage: float,
    accept_len: float | None,
    num_draft_tokens: int,
    tps: float,
    queue: int,
    forward_ct: int = 0,
    accept_rate: float | None = None,
    device: str = "cuda",
    graph: bool = True,
) -> str:
    """The message of one `Decode batch` line (without prefix) as the given SGLang era printed it.

    `accept_rate` defaults to the era's own definition over `num_draft_tokens`; `device` names the
    graph field where the era does (`cpu graph` on a CPU server), `graph` is its value.
    """
    shape = _SHAPES.get(style)
    if shape is None:
        raise ValueError(f"unknown style {style!r}")
    header = shape.header.replace("N", str(forward_ct))
    msg = f"Decode batch{header} #running-req: {running}, #token: {used}, token usage: {usage:.2f}, "
    if accept_len is not None:
        msg += f"accept len: {accept_len:.2f}, "
        if shape.rate:
            rate = _accept_rate(shape, accept_len, num_draft_tokens) if accept_rate is None else accept_rate
            msg += f"accept rate: {rate:.2f}, "
    if shape.graph:
        msg += f"{'cuda' if shape.graph == 'cuda' else device} graph: {graph}, "
    msg += f"gen throughput (token/s): {tps:.2f}, #queue-req: {queue}"
    return msg + (", " if shape.trailing else "")


def prefill_line(
    *, new_seq: int, new_token: int, cached: int, usage: float, running: int, queue: int, style: str = "0.5.6"
) -> str:
    """The message of one `Prefill batch` line; 0.4 eras used a period and no trailing comma."""
    old = style in ("0.4.1", "0.4.6")
    msg = (
        f"Prefill batch{'.' if old else ','} #new-seq: {new_seq}, #new-token: {new_token}, #cached-token: {cached}, "
        f"token usage: {usage:.2f}, #running-req: {running}, #queue-req: {queue}"
    )
    return msg + ("" if old else ", ")


@dataclass
class RunPlan:
    """One server run in a synthetic log."""

    decode_lines: int = 100
    steps: int = 3
    topk: int = 1
    draft_tokens: int = 4
    spec: bool = True
    mean_accept: float = 2.4
    mean_tps: float = 150.0
    requested_draft_tokens: int | None = None  # as launched; SGLang warns when topk 1 overrides it
    crash: bool = False
    ranks: str = " TP0"
    style: str = "0.5.6"
    other_every: int = 12  # one "other" line per this many lines


@dataclass
class SynthTruth:
    """What was written, per run, to check a replay against."""

    decode_lines: list[int] = field(default_factory=list)
    accept_lens: list[list[float]] = field(default_factory=list)
    tps: list[list[float]] = field(default_factory=list)
    crashed: list[bool] = field(default_factory=list)
    lines: int = 0


def _startup(t: float, plan: RunPlan, ranks: str) -> list[tuple[float, str]]:
    algo = "'EAGLE3'" if plan.spec else "None"
    steps = plan.steps if plan.spec else None
    topk = plan.topk if plan.spec else None
    draft = plan.draft_tokens if plan.spec else None
    lines = []
    requested = plan.requested_draft_tokens
    if plan.spec and plan.topk == 1 and requested is not None and requested != plan.steps + 1:
        lines.append(
            "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"
        )
    lines += [
        f"server_args=ServerArgs(model_path='/models/target', tokenizer_path='/models/target', "
        f"tp_size=1, speculative_algorithm={algo}, speculative_draft_model_path='/models/draft', "
        f"speculative_num_steps={steps}, speculative_eagle_topk={topk}, "
        f"speculative_num_draft_tokens={draft}, decode_log_interval=40, port=30000)",
    ]
    out = [(t, prefix(t) + text) for text in lines]
    t += 1.0
    out += [
        (t, prefix(t, ranks) + "Load weight begin. avail mem=78.12 GB"),
        (t + 4, prefix(t + 4, ranks) + "Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=62.40 GB, mem usage=15.72 GB."),
        (t + 5, prefix(t + 5, ranks) + "KV Cache is allocated. #tokens: 412000, K size: 20.10 GB, V size: 20.10 GB"),
        (t + 6, prefix(t + 6, ranks) + "Capture cuda graph begin. This can take up to several minutes. avail mem=21.00 GB"),
        (t + 9, prefix(t + 9) + "INFO:     Started server process [4242]"),
        (t + 9, prefix(t + 9) + "INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)"),
        (t + 10, prefix(t + 10) + 'INFO:     127.0.0.1:51234 - "GET /get_model_info HTTP/1.1" 200 OK'),
        (t + 11, prefix(t + 11) + "The server is fired up and ready to roll!"),
    ]
    return out


_OTHER = (
    "Receive: obj=GenerateReqInput(rid='{rid}', text_len={n}, sampling_params={{'max_new_tokens': 256}})",
    "Finish: obj=GenerateReqInput(rid='{rid}'), out={{'meta_info': {{'completion_tokens': {n}}}}}",
    "Cache flushed successfully!",
    "INFO:     Waiting for application startup.",
)

_CRASH = (
    "Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 2740, in run_scheduler_process',
    "    scheduler.event_loop_overlap()",
    '  File "/sgl/python/sglang/srt/speculative/eagle_worker.py", line 311, in forward_batch_speculative_generation',
    "    logits_output, verify_output, model_worker_batch = self.verify(batch, spec_info)",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "CUDA kernel errors might be asynchronously reported at some other API call.",
    "For debugging consider passing CUDA_LAUNCH_BLOCKING=1",
)


def synth_lines(plans: list[RunPlan], *, seed: int = 0, t0: float = 1765274400.0, truth: SynthTruth | None = None) -> Iterator[str]:
    """Lines (without newlines) of a log with one server run per plan."""
    rng = random.Random(seed)
    t = t0
    for plan in plans:
        als: list[float] = []
        tpss: list[float] = []
        for ts, text in _startup(t, plan, plan.ranks):
            t = ts
            yield text
        written = 0
        forward_ct = 0
        n = 0
        while written < plan.decode_lines:
            n += 1
            t += 0.05
            r = rng.random()
            if plan.other_every and n % plan.other_every == 0:
                tpl = _OTHER[rng.randrange(len(_OTHER))]
                yield prefix(t) + tpl.format(rid=f"{rng.getrandbits(64):016x}", n=rng.randint(1, 4000))
            elif r < 0.36:
                forward_ct += 40
                al = round(min(max(rng.gauss(plan.mean_accept, 0.35), 1.0), plan.steps + 1), 2) if plan.spec else None
                tps = round(max(rng.gauss(plan.mean_tps, 0.12 * plan.mean_tps), 0.5), 2)
                if al is not None:
                    als.append(al)
                tpss.append(tps)
                yield prefix(t, plan.ranks) + decode_line(
                    plan.style,
                    running=rng.randint(1, 48),
                    used=rng.randint(100, 400000),
                    usage=rng.random(),
                    accept_len=al,
                    num_draft_tokens=plan.draft_tokens,
                    tps=tps,
                    queue=rng.randint(0, 4),
                    forward_ct=forward_ct,
                )
                written += 1
            elif r < 0.68:
                yield prefix(t, plan.ranks) + prefill_line(
                    new_seq=rng.randint(1, 8),
                    new_token=rng.randint(1, 8000),
                    cached=rng.randint(0, 8000),
                    usage=rng.random(),
                    running=rng.randint(0, 48),
                    queue=rng.randint(0, 4),
                )
            else:
                yield prefix(t) + f'INFO:     127.0.0.1:{rng.randint(30000, 60999)} - "POST /generate HTTP/1.1" 200 OK'
        if plan.crash:
            t += 0.5
            yield prefix(t, plan.ranks) + _CRASH[0]
            yield from _CRASH[1:]
            yield ""
            t += 0.1
            yield prefix(t) + "Received sigquit from a child process. It usually means the child failed."
        t += 30.0
        if truth is not None:
            truth.decode_lines.append(written)
            truth.accept_lens.append(als)
            truth.tps.append(tpss)
            truth.crashed.append(plan.crash)


def write_log(out: TextIO, plans: list[RunPlan], *, seed: int = 0, t0: float = 1765274400.0) -> SynthTruth:
    """Write a synthetic log; returns what it holds."""
    truth = SynthTruth()
    buf: list[str] = []
    for line in synth_lines(plans, seed=seed, t0=t0, truth=truth):
        buf.append(line)
        truth.lines += 1
        if len(buf) >= 4096:
            out.write("\n".join(buf) + "\n")
            buf.clear()
    if buf:
        out.write("\n".join(buf) + "\n")
    return truth


def sample_plans() -> list[RunPlan]:
    """The bundled sample: the seeds' story in four server runs.

    A no-speculation baseline at 90 tok/s; EAGLE-3 with the broken flags (steps 1, draft tokens
    16 silently adjusted to 2) at 56.8 tok/s, ending in a crash; the steps fix (46.7 tok/s); the
    wiring fix (54.8 tok/s, accept len up).
    """
    return [
        RunPlan(decode_lines=60, spec=False, mean_tps=90.0),
        RunPlan(
            decode_lines=60, steps=1, draft_tokens=2, requested_draft_tokens=16, mean_accept=1.3, mean_tps=56.8, crash=True
        ),
        RunPlan(decode_lines=60, steps=3, draft_tokens=4, mean_accept=1.45, mean_tps=46.7),
        RunPlan(decode_lines=60, steps=3, draft_tokens=4, mean_accept=2.05, mean_tps=54.8),
    ]


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 3 or sys.argv[1] != "sample":
        raise SystemExit("usage: python -m eagle3_tui.sglang.logsynth sample OUT")
    with open(sys.argv[2], "w", encoding="utf-8", newline="\n") as fh:
        write_log(fh, sample_plans(), seed=2026)
