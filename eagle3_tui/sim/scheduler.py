"""The sim server's scheduler: one thread that admits requests, runs one decode iteration over every
running request, and keeps SGLang's counters (the decode stats line every `decode_log_interval`
iterations, the lifetime accept length `/server_info` reports, the `/metrics` totals).

A failure inside the loop is logged the way SGLang logs a scheduler crash and ends the process.
"""

from __future__ import annotations

import os
import queue
import signal
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from eagle3_tui.sglang.installed.source import version_key
from eagle3_tui.sim.flags import ServerArgs, args_dict
from eagle3_tui.sim.logfmt import DecodeStats, LogWriter, prefill_message

# The release whose Decode line first counts only the drafted tokens in `accept rate` among those we
# read: 0.5.6 `managers/scheduler_metrics_mixin.py` divides the accepted tokens (bonus included) by
# forwards x draft tokens; 0.5.12 `observability/scheduler_metrics_mixin.py` (and 0.5.17-0.5.23
# `scheduler_components/metrics_reporter.py`) the correct drafts by forwards x (draft tokens - 1).
BONUS_EXCLUDED_FROM = "0.5.12"

MAX_TOTAL_NUM_TOKENS = 65536
CONTEXT_LEN = 4096


@dataclass
class Request:
    rid: str
    prompt_ids: list[int]
    max_new_tokens: int
    stop_ids: frozenset[int]
    internal: bool = False
    done: threading.Event = field(default_factory=threading.Event)
    created: float = field(default_factory=time.monotonic)
    seq: Any = None
    error: str | None = None


class Scheduler:
    """One thread: prefill new requests, then one decode iteration over every running request."""

    def __init__(self, engine: Any, args: ServerArgs, log: LogWriter) -> None:
        self.engine = engine
        self.args = args
        self.log = log
        self.waiting: queue.Queue[Request] = queue.Queue()
        self.running: list[Request] = []
        self.stop_event = threading.Event()
        self.wakeup = threading.Event()
        self.lock = threading.Lock()
        self.forward_ct_decode = 0
        self.forward_ct = 0  # every forward, prefill or decode: SGLANG_LOG_FORWARD_ITERS prints it
        # window counters (reset at each decode log line) and lifetime counters (flush_cache resets)
        self.spec_num_accepted_tokens = 0
        self.spec_num_forward_ct = 0
        self.num_generated_tokens = 0
        self.spec_total_num_accepted_tokens = 0
        self.spec_total_num_forward_ct = 0
        self.last_decode_log = time.monotonic()
        self.last_gen_throughput = 0.0
        self.last_accept_len: float | None = None
        self.last_accept_rate: float | None = None
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.num_requests_total = 0
        self.thread = threading.Thread(target=self._run, name="scheduler", daemon=True)
        self.failed: str | None = None

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        if self.thread.is_alive():
            self.thread.join(timeout=5)

    def submit(self, req: Request) -> None:
        self.waiting.put(req)
        self.wakeup.set()

    @property
    def max_running(self) -> int:
        return self.args.max_running_requests or 64

    def flush_cache(self) -> bool:
        with self.lock:
            if self.running or not self.waiting.empty():
                self.log.write(
                    "Cache not flushed because there are pending requests. "
                    f"#queue-req: {self.waiting.qsize()}, #running-req: {len(self.running)}",
                    scheduler=True,
                )
                return False
            self.spec_total_num_accepted_tokens = self.spec_total_num_forward_ct = 0
            self.spec_num_accepted_tokens = self.spec_num_forward_ct = 0
            self.log.write("Cache flushed successfully!", scheduler=True)
            return True

    def internal_state(self) -> dict[str, Any]:
        ret = args_dict(self.args)
        ret["last_gen_throughput"] = self.last_gen_throughput
        ret["memory_usage"] = {
            "weight": 0.01,
            "kvcache": 0.01,
            "token_capacity": MAX_TOTAL_NUM_TOKENS,
            "graph": 0,
        }
        if self.args.speculative_algorithm and self.spec_total_num_forward_ct > 0:
            ret["avg_spec_accept_length"] = (
                self.spec_total_num_accepted_tokens / self.spec_total_num_forward_ct
            )
        return ret

    def _num_tokens(self) -> int:
        return sum(r.seq.kv_tokens for r in self.running if r.seq is not None)

    def _run(self) -> None:
        try:
            while not self.stop_event.is_set():
                self._admit()
                if not self.running:
                    self.wakeup.wait(0.05)
                    self.wakeup.clear()
                    continue
                self._decode_iteration()
        except Exception:
            self.failed = traceback.format_exc()
            self.log.write(f"Scheduler hit an exception: {self.failed.rstrip()}", scheduler=True)
            self.log.write("Received sigquit from a child process. It usually means the child failed.")
            os.kill(os.getpid(), signal.SIGTERM)

    def _admit(self) -> None:
        new: list[Request] = []
        while len(self.running) + len(new) < self.max_running:
            try:
                new.append(self.waiting.get_nowait())
            except queue.Empty:
                break
        if not new:
            return
        new_tokens = 0
        for req in new:
            req.seq = self.engine.new_sequence(req.prompt_ids, req.max_new_tokens, req.stop_ids)
            self.engine.prefill(req.seq)
            new_tokens += len(req.prompt_ids)
            self.prompt_tokens_total += len(req.prompt_ids)
            self.generation_tokens_total += 1
        with self.lock:
            self.running.extend(new)
        usage = self._num_tokens() / MAX_TOTAL_NUM_TOKENS
        self.forward_ct += 1
        message = prefill_message(
            len(new), new_tokens, 0, usage, len(self.running) - len(new), self.waiting.qsize(), self.log.style
        )
        self.log.write(self.log.iterated(message, self.forward_ct), scheduler=True)
        self._retire()

    def _retire(self) -> None:
        done = [r for r in self.running if r.seq is not None and r.seq.finished]
        if not done:
            return
        with self.lock:
            self.running = [r for r in self.running if r not in done]
        for r in done:
            self.num_requests_total += 1
            r.done.set()

    def _decode_iteration(self) -> None:
        bs = 0
        for req in list(self.running):
            if req.seq.finished:
                continue
            res = self.engine.step(req.seq)
            bs += 1
            self.num_generated_tokens += res.new_tokens
            self.generation_tokens_total += res.new_tokens
            if res.verified:
                self.spec_num_accepted_tokens += res.accepted_drafts + 1
                self.spec_num_forward_ct += 1
        self.forward_ct_decode = (self.forward_ct_decode + 1) % (1 << 30)
        self.forward_ct += 1
        if self.forward_ct_decode % self.args.decode_log_interval == 0:
            self._log_decode_stats()
        self._retire()

    def _log_decode_stats(self) -> None:
        now = time.monotonic()
        gap = max(now - self.last_decode_log, 1e-9)
        self.last_gen_throughput = self.num_generated_tokens / gap
        self.num_generated_tokens = 0
        self.last_decode_log = now
        accept_len = accept_rate = None
        if self.args.speculative_algorithm:
            fwd = self.spec_num_forward_ct
            accept_len = self.spec_num_accepted_tokens / fwd if fwd else 0.0
            accept_rate = printed_accept_rate(self.args, self.spec_num_accepted_tokens, fwd)
            self.spec_total_num_accepted_tokens += self.spec_num_accepted_tokens
            self.spec_total_num_forward_ct += fwd
            self.spec_num_accepted_tokens = self.spec_num_forward_ct = 0
            self.last_accept_len, self.last_accept_rate = accept_len, accept_rate
        num_tokens = self._num_tokens()
        stats = DecodeStats(
            running_req=len(self.running),
            num_tokens=num_tokens,
            token_usage=num_tokens / MAX_TOTAL_NUM_TOKENS,
            accept_len=accept_len,
            accept_rate=accept_rate,
            gen_throughput=self.last_gen_throughput,
            queue_req=self.waiting.qsize(),
        )
        self.log.decode(stats, self.forward_ct)


def printed_accept_rate(args: ServerArgs, accepted: int, forwards: int) -> float:
    """The `accept rate` the release printed (see BONUS_EXCLUDED_FROM); 0 with no forward, as SGLang."""
    steps, draft_tokens = args.speculative_num_steps or 0, args.speculative_num_draft_tokens
    if version_key(args.sglang_version) >= version_key(BONUS_EXCLUDED_FROM):
        total = forwards * (draft_tokens - 1 if draft_tokens else steps)
        return (accepted - forwards) / total if total > 0 else 0.0
    total = forwards * (draft_tokens or steps + 1)
    return accepted / total if total > 0 else 0.0
