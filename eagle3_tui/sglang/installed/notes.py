"""One piece of evidence about the installed SGLang, and how we know it."""

from __future__ import annotations

from dataclasses import dataclass

from eagle3_tui.sglang.installed.source import READ_FROM_SOURCE


@dataclass(frozen=True)
class Note:
    """`source` is a file:line of SGLang's (or "version table"); `how` is "read from source" or
    "assumed from version X" (the release table stood in for a file we could not read or recognise)."""

    source: str
    detail: str
    how: str = READ_FROM_SOURCE

    @property
    def assumed(self) -> bool:
        return self.how != READ_FROM_SOURCE

    def to_dict(self) -> dict[str, str]:
        return {"source": self.source, "detail": self.detail, "how": self.how}

    def text(self) -> str:
        return f"{self.source}: {self.detail} ({self.how})"


def assumed_from(version: str | None) -> str:
    return f"assumed from version {version}" if version else "assumed (release unknown)"
