"""The installed SGLang, read from its own source: what it captures for a draft's layer ids, and more.

`read_release(read)` reads a release (a `Read` over its `sglang` package directory, or None for the
version table alone); `answer(release, lookup(arch), num_layers, ids)` evaluates one target and id list.
Pure: file texts in, answers out; `gather` fetches just the files needed from an asynchronous source.
"""

from eagle3_tui.sglang.installed.answer import Answer, answer
from eagle3_tui.sglang.installed.archs import ARCHS, Arch, lookup, target_from_config
from eagle3_tui.sglang.installed.gather import gather
from eagle3_tui.sglang.installed.notes import Note
from eagle3_tui.sglang.installed.release import Release, read_release
from eagle3_tui.sglang.installed.source import Read, dir_reader, find_package_dir, read_version

__all__ = [
    "ARCHS",
    "Answer",
    "Arch",
    "Note",
    "Read",
    "Release",
    "answer",
    "dir_reader",
    "find_package_dir",
    "gather",
    "lookup",
    "read_release",
    "read_version",
    "target_from_config",
]
