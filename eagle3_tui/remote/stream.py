"""Process channels (one per transport) and the line stream built on them.

A `ProcChannel` is a started process with piped stdout/stderr: `readline()` gives stdout lines
('' at EOF, `ConnectionLost` if the transport dropped), `wait()` the exit code, `close()` ends the
process and never hangs. `LineStream` turns one into an async iterator of lines.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol

STDERR_KEEP = 64 * 1024


class ProcChannel(Protocol):
    async def readline(self) -> str: ...

    async def wait(self) -> int: ...

    def stderr_text(self) -> str: ...

    async def close(self) -> None: ...


class LineStream:
    """Async iterator of a command's stdout lines (newline stripped).

    Use it as `async with host.stream(argv) as s:`; leaving the block or `aclose()` ends the
    process. After the end, `exit_code` and `stderr` (last 64 KiB) are set.
    """

    def __init__(self, opener: Callable[[], Awaitable[ProcChannel]]) -> None:
        self._opener = opener
        self._chan: ProcChannel | None = None
        self._done = False
        self.exit_code: int | None = None
        self.stderr: str = ""

    async def _channel(self) -> ProcChannel:
        if self._chan is None:
            self._chan = await self._opener()
        return self._chan

    async def __aenter__(self) -> LineStream:
        await self._channel()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __aiter__(self) -> LineStream:
        return self

    async def __anext__(self) -> str:
        if self._done:
            raise StopAsyncIteration
        chan = await self._channel()
        try:
            line = await chan.readline()
        except BaseException:
            await self.aclose()
            raise
        if line == "":
            self.exit_code = await chan.wait()
            self.stderr = chan.stderr_text()
            self._done = True
            await chan.close()
            raise StopAsyncIteration
        return line[:-1] if line.endswith("\n") else line

    async def aclose(self) -> None:
        """End the process on the host (idempotent)."""
        if self._chan is not None and not self._done:
            self._done = True
            await self._chan.close()
            self.stderr = self._chan.stderr_text()
        self._done = True
