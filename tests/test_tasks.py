"""`eagle3_tui.remote.tasks.wait_for`: a cancel that lands as the awaited thing finishes is kept.

Found under xdist on a loaded machine: `eagle3-tui bench` hung in `Session.close`, its monitor task
"cancelling" but still polling, because Python 3.11's `asyncio.wait_for` had returned a finished
command's result instead of raising the cancel. The race is built here in one loop turn.
"""

from __future__ import annotations

import asyncio
import sys

import pytest

from eagle3_tui.remote.tasks import wait_for


async def _cancel_as_it_finishes(wait) -> str:
    """Cancel a task in the same loop turn in which the future it waits on gets its result."""
    fut = asyncio.get_running_loop().create_future()

    async def waiter() -> str:
        await wait(fut, 10)
        return "the cancel was dropped"

    task = asyncio.ensure_future(waiter())
    await asyncio.sleep(0)  # the task now waits on fut
    fut.set_result(1)
    task.cancel()
    try:
        return await task
    except asyncio.CancelledError:
        return "cancelled"


async def test_a_cancel_landing_as_the_awaited_finishes_is_kept() -> None:
    assert await _cancel_as_it_finishes(wait_for) == "cancelled"
    if sys.version_info[:2] == (3, 11):  # what the helper is for: the standard library drops it here
        assert await _cancel_as_it_finishes(asyncio.wait_for) == "the cancel was dropped"


async def test_wait_for_returns_the_result_and_raises_on_the_limit() -> None:
    async def slow(t: float) -> str:
        await asyncio.sleep(t)
        return "done"

    assert await wait_for(slow(0), 5) == "done"
    assert await wait_for(slow(0), None) == "done"
    with pytest.raises(asyncio.TimeoutError):
        await wait_for(slow(10), 0.05)

