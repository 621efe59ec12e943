"""The machine's process table from /proc, for tests that assert what a command left running."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Proc:
    ppid: int
    start: int  # clock ticks after boot: with the pid, names one process even after pid reuse
    cmd: str


def process_table() -> dict[int, Proc]:
    """pid -> Proc of every live (not zombie) process."""
    out = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_bytes()
            cmd = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        f = stat[stat.rindex(b")") + 2:].split()
        if f[0] != b"Z":
            out[int(entry.name)] = Proc(int(f[1]), int(f[19]), cmd.replace(b"\0", b" ").decode(errors="replace"))
    return out


def descends_from(table: dict[int, Proc], pid: int, root: int) -> bool:
    """Whether `root` is an ancestor of `pid` (a cycle or a missing parent ends the walk)."""
    up, hops = table[pid].ppid if pid in table else 0, 0
    while up not in (0, 1, root) and up in table and hops < 50:
        up, hops = table[up].ppid, hops + 1
    return up == root


def descendants(table: dict[int, Proc], root: int) -> list[int]:
    return [pid for pid in table if pid != root and descends_from(table, pid, root)]
