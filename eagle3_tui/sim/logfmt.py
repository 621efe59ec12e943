"""The sim server's log writer: SGLang's lines as `sglang.logsynth` builds them, one per write, flushed.

The sim offers three eras (research/sglang.md §1): `0.5.6` (default; `Decode batch, ...` with
`accept rate`, a `cpu graph` field and a trailing `, `), `0.4.6` (`Decode batch. ...`, `accept len`
without `accept rate`, `cuda graph`), and `0.4.1-tp0` (`[... TP0] Decode batch. ...`, the first era
with `accept len`). This module only maps those names onto logsynth's styles and rank prefixes
and owns the stream; the line text is logsynth's.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import TextIO

from eagle3_tui.sglang.logsynth import decode_line, prefill_line, prefix

STYLES = ("0.5.6", "0.4.6", "0.4.1-tp0")
STYLE_ALIASES = {"default": "0.5.6", "dot": "0.4.6", "tp0": "0.4.1-tp0"}
# sim style -> (logsynth style, the scheduler's rank prefix)
_ERA = {"0.5.6": ("0.5.6", ""), "0.4.6": ("0.4.6", ""), "0.4.1-tp0": ("0.4.1", " TP0")}
DEVICE = "cpu"


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
    """A decode stats line of this era for a CPU server without graphs."""
    return decode_line(
        _ERA[style][0],
        running=s.running_req,
        used=s.num_tokens,
        usage=s.token_usage,
        accept_len=s.accept_len,
        num_draft_tokens=1,  # unused: the measured rate is given
        tps=s.gen_throughput,
        queue=s.queue_req,
        accept_rate=s.accept_rate or 0.0,
        device=DEVICE,
        graph=False,
    )


def prefill_message(
    new_seq: int, new_token: int, cached_token: int, token_usage: float, running: int, queue: int, style: str
) -> str:
    return prefill_line(
        new_seq=new_seq,
        new_token=new_token,
        cached=cached_token,
        usage=token_usage,
        running=running,
        queue=queue,
        style=_ERA[style][0],
    )


class LogWriter:
    """Thread-safe `[time{ranks}] message` lines to a stream (local time, like `asctime`), flushed per line."""

    def __init__(self, stream: TextIO | None = None, *, style: str = "0.5.6") -> None:
        self.stream = stream or sys.stdout
        self.style = style
        self.lock = threading.Lock()

    @property
    def scheduler_prefix(self) -> str:
        return _ERA[self.style][1]

    def write(self, message: str, *, scheduler: bool = False) -> None:
        lines = message.split("\n")
        head = prefix(time.time(), self.scheduler_prefix if scheduler else "", local=True)
        text = head + lines[0] + "\n" + "".join(line + "\n" for line in lines[1:])
        with self.lock:
            self.stream.write(text)
            self.stream.flush()

    def access(self, client: str, method: str, path: str, status: int, reason: str) -> None:
        self.write(f'INFO:     {client} - "{method} {path} HTTP/1.1" {status} {reason}')
