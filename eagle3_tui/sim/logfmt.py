"""SGLang's log lines, as the sim server writes them (research/sglang.md §1).

Styles: `0.5.6` (default; `Decode batch, ...` with `accept rate` and a trailing `, `),
`0.4.6` (`Decode batch. ...`, `accept len` but no `accept rate`, `cuda graph`), and
`0.4.1-tp0` (`[... TP0] Decode batch. ...`, the first style with `accept len`).
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import TextIO

STYLES = ("0.5.6", "0.4.6", "0.4.1-tp0")
STYLE_ALIASES = {"default": "0.5.6", "dot": "0.4.6", "tp0": "0.4.1-tp0"}


def timestamp(now: float | None = None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(time.time() if now is None else now))


@dataclass(frozen=True)
class DecodeStats:
    running_req: int
    num_tokens: int
    token_usage: float
    accept_len: float | None  # None without speculation
    accept_rate: float | None
    gen_throughput: float
    queue_req: int


def decode_message(s: DecodeStats, style: str) -> str:
    if style == "0.5.6":
        msg = f"Decode batch, #running-req: {s.running_req}, #token: {s.num_tokens}, token usage: {s.token_usage:.2f}, "
        if s.accept_len is not None:
            msg += f"accept len: {s.accept_len:.2f}, accept rate: {(s.accept_rate or 0.0):.2f}, "
        msg += (
            f"cpu graph: False, gen throughput (token/s): {s.gen_throughput:.2f}, #queue-req: {s.queue_req}, "
        )
        return msg
    if style == "0.4.6":
        msg = f"Decode batch. #running-req: {s.running_req}, #token: {s.num_tokens}, token usage: {s.token_usage:.2f}, "
        if s.accept_len is not None:
            msg += f"accept len: {s.accept_len:.2f}, "
        return (
            msg
            + f"cuda graph: False, gen throughput (token/s): {s.gen_throughput:.2f}, #queue-req: {s.queue_req}"
        )
    msg = f"Decode batch. #running-req: {s.running_req}, #token: {s.num_tokens}, token usage: {s.token_usage:.2f}, "
    if s.accept_len is not None:
        msg += f"accept len: {s.accept_len:.2f}, "
    return msg + f"gen throughput (token/s): {s.gen_throughput:.2f}, #queue-req: {s.queue_req}"


def prefill_message(
    new_seq: int, new_token: int, cached_token: int, token_usage: float, running: int, queue: int, style: str
) -> str:
    sep = "," if style == "0.5.6" else "."
    msg = (
        f"Prefill batch{sep} #new-seq: {new_seq}, #new-token: {new_token}, #cached-token: {cached_token}, "
        f"token usage: {token_usage:.2f}, #running-req: {running}, #queue-req: {queue}"
    )
    return msg + (", " if style == "0.5.6" else "")


class LogWriter:
    """Thread-safe `[time{prefix}] message` lines to a stream, flushed per line."""

    def __init__(self, stream: TextIO | None = None, *, style: str = "0.5.6") -> None:
        self.stream = stream or sys.stdout
        self.style = style
        self.lock = threading.Lock()

    @property
    def scheduler_prefix(self) -> str:
        return " TP0" if self.style == "0.4.1-tp0" else ""

    def write(self, message: str, *, scheduler: bool = False) -> None:
        prefix = self.scheduler_prefix if scheduler else ""
        lines = message.split("\n")
        text = f"[{timestamp()}{prefix}] {lines[0]}\n" + "".join(line + "\n" for line in lines[1:])
        with self.lock:
            self.stream.write(text)
            self.stream.flush()

    def access(self, client: str, method: str, path: str, status: int, reason: str) -> None:
        self.write(f'INFO:     {client} - "{method} {path} HTTP/1.1" {status} {reason}')
