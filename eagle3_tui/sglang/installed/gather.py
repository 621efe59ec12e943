"""Fetch only the SGLang files the readers ask for, from anywhere (a host over SSH, a local directory).

The readers are synchronous functions over a `Read`; a remote host is asynchronous. `gather` runs the
analysis with a reader that records the paths it was refused, fetches those, and runs it again, until
no new path is asked for: the files read are exactly the ones the analysis needs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

from eagle3_tui.sglang.installed.source import Read

T = TypeVar("T")

Fetch = Callable[[str], Awaitable["str | None"]]


async def gather(fetch: Fetch, analyse: Callable[[Read], T], *, rounds: int = 8) -> tuple[T, dict[str, str | None]]:
    """(analyse's result over the fetched files, the files by path); at most `rounds` fetch rounds."""
    files: dict[str, str | None] = {}
    for _ in range(rounds):
        asked: set[str] = set()
        result = analyse(_recording(files, asked))
        if not asked:
            return result, files
        for rel in sorted(asked):
            files[rel] = await fetch(rel)
    return analyse(lambda rel: files.get(rel)), files


def _recording(files: dict[str, str | None], asked: set[str]) -> Read:
    def read(rel: str) -> str | None:
        if rel in files:
            return files[rel]
        asked.add(rel)
        return None

    return read
