"""`wait_for`: a time limit on an await that never drops the caller's cancellation.

Python 3.11's `asyncio.wait_for` loses a cancellation when the outer task is cancelled in the same
loop turn in which the awaited thing finishes. It returns the result instead (3.12 rebuilt `wait_for`
on `asyncio.timeout`, which fixed it). A loop that runs until cancelled then keeps running, and
whoever awaits it waits forever. On a loaded machine a `bench` hung in `Session.close` this way: the
monitor's task stayed "cancelling" in its poll loop, because a cancel had landed while a host command
finished. On 3.11 and later the awaitable runs under `asyncio.timeout`, in the caller's own task, so
a cancel is never lost; 3.10 keeps `asyncio.wait_for` (its race is the same as 3.11's).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["wait_for"]

T = TypeVar("T")


async def wait_for(aw: Awaitable[T], timeout: float | None) -> T:
    """`await aw`, raising TimeoutError (which is `asyncio.TimeoutError` on 3.11+) after `timeout`
    seconds (None: no limit); a cancellation of the caller always propagates."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(timeout):
            return await aw
    return await asyncio.wait_for(aw, timeout)
