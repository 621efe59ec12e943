"""The sim server's log writer: SGLang's lines as `sglang.logsynth` builds them, one per write, flushed.

The sim offers three eras (research/sglang.md §1): `0.5.6` (default; `Decode batch, ...` with
`accept rate`, a `cpu graph` field and a trailing `, `), `0.4.6` (`Decode batch. ...`, `accept len`
without `accept rate`, `cuda graph`), and `0.4.1-tp0` (`[... TP0] Decode batch. ...`, the first era
with `accept len`). This module only maps those names onto logsynth's styles and rank prefixes
and owns the streams; the line text is logsynth's.

Like SGLang (`configure_logger` is `logging.basicConfig` with no stream), the server's own log goes
to stderr and only uvicorn's access lines to stdout; `> access.log 2> server.log` splits them.
"""

from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass
from typing import TextIO

from eagle3_tui.sglang.installed.source import version_key
from eagle3_tui.sglang.logsynth import decode_line, prefill_line, prefix

STYLES = ("0.5.6", "0.4.6", "0.4.1-tp0")
STYLE_ALIASES = {"default": "0.5.6", "dot": "0.4.6", "tp0": "0.4.1-tp0"}
# sim style -> (logsynth style, the scheduler's rank prefix)
_ERA = {"0.5.6": ("0.5.6", ""), "0.4.6": ("0.4.6", ""), "0.4.1-tp0": ("0.4.1", " TP0")}
DEVICE = "cpu"
DICT_START_LINE = "0.5.20"
"""From this release the start line is `server_args={...}` (a dict), not `server_args=ServerArgs(...)`."""


@dataclass(frozen=True)
class DecodeStats:
    running_req: int
    num_tokens: int
    token_usage: float
    accept_len: float | None  # None without speculation
    accept_rate: float | None
    gen_throughput: float
    queue_req: int


def start_line(args: dict[str, object], version: str | None) -> str:
    """The line a server process starts with: the ServerArgs repr, or the dict of 0.5.20 and later."""
    if version and version_key(version) >= version_key(DICT_START_LINE):
        return f"server_args={args!r}"
    return f"server_args=ServerArgs({', '.join(f'{k}={v!r}' for k, v in args.items())})"


def decode_message(s: DecodeStats, style: str, *, device: str = DEVICE, graph: bool = False) -> str:
    """A decode stats line of this era (a CPU server without graphs unless told otherwise)."""
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
        device=device,
        graph=graph,
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


FORWARD_ITERS_ENV = "SGLANG_LOG_FORWARD_ITERS"


def env_bool(value: str | None) -> bool:
    """SGLang's `EnvBool` (0.5.23 `srt/environ.py`): unset is False; anything unknown is refused, as SGLang
    refuses it (a ValueError when the scheduler reads it)."""
    if value is None:
        return False
    v = value.lower()
    if v in ("true", "1", "yes", "y"):
        return True
    if v in ("false", "0", "no", "n"):
        return False
    raise ValueError(f'"{v}" is not a valid boolean value')


class LogWriter:
    """Thread-safe `[time{ranks}] message` lines (local time, like `asctime`), flushed per line: the
    server's log to `stream` (stderr), uvicorn's access lines to `access_stream` (stdout).

    `forward_iters` (SGLANG_LOG_FORWARD_ITERS): the 0.5 batch lines carry the forward counter, `Decode batch
    [N], ...` (0.5.23 `scheduler_components/metrics_reporter.py`)."""

    def __init__(self, stream: TextIO | None = None, *, style: str = "0.5.6",
                 access_stream: TextIO | None = None, device: str = DEVICE, graph: bool = False,
                 forward_iters: bool = False) -> None:
        self.stream = stream or sys.stderr
        self.access_stream = access_stream or self.stream
        self.style = style
        self.device = device
        self.graph = graph
        self.forward_iters = forward_iters
        self.lock = threading.Lock()

    def iterated(self, message: str, iteration: int) -> str:
        """`message` with ` [iteration]` after its `Decode batch`/`Prefill batch` when forward_iters is on."""
        for head in ("Decode batch,", "Prefill batch,"):
            if self.forward_iters and message.startswith(head):
                return f"{head[:-1]} [{iteration}]," + message[len(head):]
        return message

    @property
    def scheduler_prefix(self) -> str:
        return _ERA[self.style][1]

    def write(self, message: str, *, scheduler: bool = False, stream: TextIO | None = None) -> None:
        lines = message.split("\n")
        head = prefix(time.time(), self.scheduler_prefix if scheduler else "", local=True)
        text = head + lines[0] + "\n" + "".join(line + "\n" for line in lines[1:])
        out = stream or self.stream
        with self.lock:
            out.write(text)
            out.flush()

    def decode(self, stats: DecodeStats, iteration: int = 0) -> None:
        """One decode stats line from the scheduler, with this server's device and graph field."""
        message = decode_message(stats, self.style, device=self.device, graph=self.graph)
        self.write(self.iterated(message, iteration), scheduler=True)

    def access(self, client: str, method: str, path: str, status: int, reason: str) -> None:
        self.write(f'INFO:     {client} - "{method} {path} HTTP/1.1" {status} {reason}', stream=self.access_stream)
