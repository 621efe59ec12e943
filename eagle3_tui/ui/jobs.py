"""The session calls the console runs in the background (attach, restart, check, benchmark), one worker
per group, so a second restart cannot start beside the first and quitting knows what is running."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from textual.widget import Widget
from textual.worker import Worker

# What quitting asks about, in the words of the confirmation.
LABELS = (("restart", "a restart"), ("sweep", "a flag sweep"), ("check", "a check"), ("bench", "a benchmark"),
          ("report", "a report"))


def err_text(err: BaseException) -> str:
    return str(err) or type(err).__name__


class Jobs:
    """Workers on `node`; a failure is a toast (and `on_error` resets the pane that showed progress),
    never a crash."""

    def __init__(self, node: Widget) -> None:
        self.node = node
        self.workers: dict[str, Worker[Any]] = {}

    def busy(self, group: str) -> bool:
        w = self.workers.get(group)
        return w is not None and w.is_running

    def run(
        self,
        group: str,
        coro: Awaitable[Any],
        label: str,
        *,
        done: str | None = None,
        on_error: Callable[[str], None] | None = None,
    ) -> Worker[Any]:
        notify = self.node.notify

        async def job() -> Any:
            try:
                result = await coro
            except asyncio.CancelledError:
                notify(f"{label} cancelled", severity="warning")
                if on_error is not None:
                    on_error("cancelled")
                raise
            except Exception as err:
                notify(f"{label} failed: {err_text(err)}", severity="error", timeout=12)
                if on_error is not None:
                    on_error(err_text(err))
                return None
            if done:
                notify(done, timeout=4)
            return result

        worker = self.node.run_worker(job(), group=group, name=label, exit_on_error=False)
        self.workers[group] = worker
        return worker

    def cancel(self, group: str) -> bool:
        """Cancel the group's job if it runs; whether it did."""
        w = self.workers.get(group)
        if w is None or not w.is_running:
            return False
        w.cancel()
        return True

    def running_labels(self) -> list[str]:
        return [label for group, label in LABELS if self.busy(group)]

    async def settle(self) -> None:
        """Before leaving: let a restart finish (it has its own deadline) so no half-started server is
        left behind, then cancel the rest (a check's or benchmark's host job ends with it)."""
        restart = self.workers.get("restart")
        if restart is not None and restart.is_running:
            self.node.notify("waiting for the restart to finish before quitting…", timeout=30)
            with contextlib.suppress(Exception):
                await asyncio.wait_for(restart.wait(), 900)
        running = [w for w in self.workers.values() if w.is_running]
        for w in running:
            w.cancel()
        for w in running:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(w.wait(), 30)
