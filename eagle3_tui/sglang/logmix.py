"""A busy SGLang server's log, line class by line class, for the replay benchmark and tests.

A real server's log is mostly not stat lines: a third uvicorn access lines (with SGLang's
`[date time]` prefix when they share its stream, bare when stdout and stderr go to one file),
`--log-requests` dumps (`Receive: obj=GenerateReqInput(...)`, `Finish: obj=..., out={...}`), Decode
and Prefill lines from several ranks interleaved, tqdm bars redrawn with `\\r`, KV-cache retraction
notices, `Cache flushed successfully!` and the odd traceback (research/sglang.md §1). `write_mixed_log`
writes such a log with the mix as a parameter; `LINE_CLASSES` makes one line of each class.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TextIO

from eagle3_tui.sglang.logsynth import decode_line, prefill_line, prefix

__all__ = ["DEFAULT_MIX", "LINE_CLASSES", "RANKS", "MixTruth", "make_line", "mixed_lines", "write_mixed_log"]

# Weights per line class, near a busy --log-requests server's log (a third access lines).
DEFAULT_MIX: dict[str, float] = {
    "access": 0.20,
    "access_bare": 0.13,
    "receive": 0.11,
    "finish": 0.11,
    "decode": 0.22,
    "prefill": 0.14,
    "retract": 0.045,
    "flush": 0.012,
    "info": 0.004,
    "tqdm": 0.0002,
    "asgi_traceback": 0.0003,
    "warning": 0.0005,
}
# Rank tags of the processes that print stats (TP and DP attention, several schedulers logging).
RANKS = (" TP0", " TP1", " DP0 TP0", " DP1 TP8")

_WORDS = (
    "the", "model", "draft", "accept", "length", "why", "is", "my", "server", "slow", "please", "explain",
    "CUDA", "error", "warning", "kernel", "memory", "out", "of", "tokens", "batch", "Decode", "latency",
    "speculative", "layer", "hidden", "state", "Traceback", "WARN", "deprecated", "fix", "code", "prompt",
)
_PATHS = ("/v1/chat/completions", "/generate", "/v1/completions", "/health", "/metrics", "/get_model_info")
_BARS = " ▏▎▍▌▋▊▉█"


@dataclass
class _Ctx:
    rng: random.Random
    t: float
    style: str
    draft_tokens: int
    mean_accept: float


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n)).replace("'", "")


def _rid(rng: random.Random) -> str:
    return f"{rng.getrandbits(128):032x}"


def _receive(c: _Ctx) -> str:
    rng = c.rng
    words = 1000 if rng.random() < 0.005 else rng.randint(3, 25)
    return prefix(c.t) + (
        f"Receive: obj=GenerateReqInput(text='{_text(rng, words)}', "
        f"sampling_params={{'temperature': 0.0, 'max_new_tokens': {rng.choice((128, 256, 512))}}}, "
        f"rid='{_rid(rng)}', stream={rng.random() < 0.5})"
    )


def _finish(c: _Ctx) -> str:
    rng = c.rng
    n = rng.randint(16, 512)
    return prefix(c.t) + (
        f"Finish: obj=GenerateReqInput(rid='{_rid(rng)}'), out={{'text': '{_text(rng, rng.randint(2, 12))}', "
        f"'meta_info': {{'prompt_tokens': {rng.randint(5, 4000)}, 'completion_tokens': {n}, "
        f"'spec_verify_ct': {max(1, round(n / c.mean_accept))}, 'e2e_latency': {rng.random() * 5:.3f}}}}}"
    )


def _access_path(rng: random.Random) -> str:
    method = "GET" if rng.random() < 0.1 else "POST"
    return f'INFO:     127.0.0.1:{rng.randint(30000, 60999)} - "{method} {rng.choice(_PATHS)} HTTP/1.1" 200 OK'


def _access(c: _Ctx) -> str:
    return prefix(c.t) + _access_path(c.rng)


def _access_bare(c: _Ctx) -> str:
    return _access_path(c.rng)


def _decode(c: _Ctx) -> str:
    rng = c.rng
    acc = round(min(max(rng.gauss(c.mean_accept, 0.35), 1.0), float(c.draft_tokens)), 2)
    return prefix(c.t, rng.choice(RANKS)) + decode_line(
        c.style, running=rng.randint(1, 48), used=rng.randint(100, 400000), usage=rng.random(),
        accept_len=acc, num_draft_tokens=c.draft_tokens, tps=round(max(rng.gauss(120, 15), 0.5), 2),
        queue=rng.randint(0, 4), forward_ct=rng.randint(1, 10**6),
    )


def _prefill(c: _Ctx) -> str:
    rng = c.rng
    return prefix(c.t, rng.choice(RANKS)) + prefill_line(
        new_seq=rng.randint(1, 8), new_token=rng.randint(1, 8000), cached=rng.randint(0, 8000),
        usage=rng.random(), running=rng.randint(0, 48), queue=rng.randint(0, 4),
    )


def _retract(c: _Ctx) -> str:
    rng = c.rng
    return prefix(c.t, rng.choice(RANKS)) + (
        f"KV cache pool is full. Retract requests. #retracted_reqs: {rng.randint(1, 6)}, "
        f"#new_token_ratio: {rng.random():.4f} -> 1.0000"
    )


def _flush(c: _Ctx) -> str:
    return prefix(c.t) + "Cache flushed successfully!"


def _info(c: _Ctx) -> str:
    rng = c.rng
    return prefix(c.t, rng.choice(RANKS)) + rng.choice(
        (
            f"Load weight end. type=LlamaForCausalLMEagle3, dtype=torch.bfloat16, avail mem={rng.random() * 80:.2f} GB",
            f"KV Cache is allocated. #tokens: {rng.randint(10**5, 10**6)}, K size: 20.10 GB, V size: 20.10 GB",
            "Capture draft cuda graph begin. This can take up to several minutes. avail mem=21.00 GB",
            "INFO:     Waiting for application startup.",
            f"max_total_num_tokens={rng.randint(10**5, 10**6)}, chunked_prefill_size=8192, max_prefill_tokens=16384",
        )
    )


def _tqdm(c: _Ctx) -> str:
    """One tqdm bar as a file holds it: every redraw after a `\\r`, one newline at the end."""
    rng = c.rng
    total = 23
    parts = []
    for i in range(total + 1):
        frac = i / total
        full, rem = divmod(int(frac * 10 * 8), 8)
        bar = ("█" * full + (_BARS[rem] if rem else "")).ljust(10)
        bs = 160 - i * 7 if i < total else 1
        parts.append(
            f"Capturing batches (bs={max(bs, 1)} avail_mem={61.3 - i * 0.05:.2f} GB): {round(frac * 100):3d}%|{bar}| "
            f"{i}/{total} [00:0{i // 8}<00:0{(total - i) // 8}, {rng.uniform(4, 9):5.2f}it/s]"
        )
    return "\r".join(parts)


def _asgi_traceback(c: _Ctx) -> str:
    """uvicorn's report of a request handler that raised: an ERROR line, then a bare traceback."""
    return "\n".join(
        (
            prefix(c.t) + "ERROR:    Exception in ASGI application",
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3/dist-packages/uvicorn/protocols/http/httptools_impl.py", line 409, in run_asgi',
            "    result = await app(  # type: ignore[func-returns-value]",
            '  File "/sgl/python/sglang/srt/entrypoints/http_server.py", line 512, in generate_request',
            "    ret = await _global_state.tokenizer_manager.generate_request(obj, request).__anext__()",
            f"ValueError: The input ({c.rng.randint(40000, 90000)} tokens) is longer than the model's context length.",
        )
    )


def _warning(c: _Ctx) -> str:
    return prefix(c.t) + c.rng.choice(
        (
            "Max running requests is reset to 48 for speculative decoding. You can override this by explicitly "
            "setting --max-running-requests.",
            "/usr/lib/python3/dist-packages/torch/cuda/__init__.py:61: FutureWarning: The pynvml package is deprecated.",
            "WARNING:  Invalid HTTP request received.",
        )
    )


LINE_CLASSES: dict[str, Callable[[_Ctx], str]] = {
    "access": _access,
    "access_bare": _access_bare,
    "receive": _receive,
    "finish": _finish,
    "decode": _decode,
    "prefill": _prefill,
    "retract": _retract,
    "flush": _flush,
    "info": _info,
    "tqdm": _tqdm,
    "asgi_traceback": _asgi_traceback,
    "warning": _warning,
}


def make_line(name: str, rng: random.Random, t: float, style: str = "0.5.6") -> str:
    """One line of class `name` at clock `t` (multi-line classes hold newlines)."""
    return LINE_CLASSES[name](_Ctx(rng=rng, t=t, style=style, draft_tokens=4, mean_accept=2.3))


def _start(c: _Ctx, steps: int, topk: int) -> list[str]:
    return [
        prefix(c.t) + (
            f"server_args=ServerArgs(model_path='/models/target', tp_size=2, dp_size=2, enable_dp_attention=True, "
            f"speculative_algorithm='EAGLE3', speculative_draft_model_path='/models/draft', "
            f"speculative_num_steps={steps}, speculative_eagle_topk={topk}, speculative_num_draft_tokens={steps + 1}, "
            f"log_requests=True, decode_log_interval=40, port=30000)"
        ),
        _tqdm(c),
        prefix(c.t) + "The server is fired up and ready to roll!",
    ]


@dataclass
class MixTruth:
    """What a mixed log holds: lines, decode lines (the only stat lines a replay counts) and runs."""

    lines: int = 0
    decode_lines: int = 0
    runs: int = 0


def mixed_lines(
    lines: int, *, mix: Mapping[str, float] | None = None, runs: int = 3, seed: int = 0, truth: MixTruth | None = None,
    t0: float = 1775419200.0,
) -> Iterator[str]:
    """About `lines` log lines (a multi-line class counts its lines) in `runs` server runs."""
    weights = dict(DEFAULT_MIX if mix is None else mix)
    unknown = set(weights) - set(LINE_CLASSES)
    if unknown:
        raise ValueError(f"unknown line classes: {', '.join(sorted(unknown))}")
    names = [k for k, w in weights.items() if w > 0]
    cum: list[float] = []
    total = 0.0
    for k in names:
        total += weights[k]
        cum.append(total)
    rng = random.Random(seed)
    c = _Ctx(rng=rng, t=t0, style="0.5.6", draft_tokens=4, mean_accept=2.3)
    tr = truth if truth is not None else MixTruth()
    per_run = max(1, lines // max(runs, 1))
    styles = ("0.5.6", "2026", "0.5.4")
    for r in range(max(runs, 1)):
        c.style = styles[r % len(styles)]
        c.draft_tokens, c.mean_accept = (4, 2.3) if r % 2 == 0 else (6, 3.1)
        for text in _start(c, c.draft_tokens - 1, 1):
            tr.lines += text.count("\n") + 1
            yield text
        tr.runs += 1
        done = 0
        while done < per_run and tr.lines < lines:
            c.t += 0.002
            name = names[_pick(cum, rng.random() * total)]
            text = LINE_CLASSES[name](c)
            n = text.count("\n") + 1
            done += n
            tr.lines += n
            tr.decode_lines += name == "decode"
            yield text
        c.t += 60.0


def _pick(cum: list[float], x: float) -> int:
    lo, hi = 0, len(cum) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if cum[mid] < x:
            lo = mid + 1
        else:
            hi = mid
    return lo


def write_mixed_log(
    out: TextIO, lines: int, *, mix: Mapping[str, float] | None = None, runs: int = 3, seed: int = 0
) -> MixTruth:
    """Write a mixed log of about `lines` lines; returns what it holds."""
    truth = MixTruth()
    buf: list[str] = []
    for text in mixed_lines(lines, mix=mix, runs=runs, seed=seed, truth=truth):
        buf.append(text)
        if len(buf) >= 4096:
            out.write("\n".join(buf) + "\n")
            buf.clear()
    if buf:
        out.write("\n".join(buf) + "\n")
    return truth
