"""What the doctor says: a finding names a rule, how bad it is, the evidence and the fix."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Severity = Literal["error", "warning", "info"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")


def severity_rank(severity: str) -> int:
    """0 for the worst; unknown severities sort last."""
    return SEVERITIES.index(severity) if severity in SEVERITIES else len(SEVERITIES)


@dataclass(frozen=True)
class Evidence:
    """One observed fact: where it came from (a file, a flag, a log, an endpoint) and what it says."""

    source: str
    detail: str

    def to_dict(self) -> dict[str, str]:
        return {"source": self.source, "detail": self.detail}


@dataclass(frozen=True)
class Finding:
    """One diagnosis. `rule_id` is stable (DESIGN.md's doctor table); `fix` is one sentence."""

    rule_id: str
    severity: Severity
    title: str
    evidence: list[Evidence] = field(default_factory=list)
    fix: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "rule_id": self.rule_id,
            "severity": self.severity,
            "title": self.title,
            "evidence": [e.to_dict() for e in self.evidence],
            "fix": self.fix,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Finding:
        return cls(
            rule_id=str(d["rule_id"]),
            severity=d["severity"],
            title=str(d["title"]),
            evidence=[Evidence(str(e["source"]), str(e["detail"])) for e in d.get("evidence", [])],
            fix=str(d.get("fix", "")),
        )

    def to_text(self) -> str:
        """Plain lines for the CLI: severity, id, title, evidence, fix."""
        lines = [f"{self.severity.upper():7} {self.rule_id}: {self.title}"]
        lines += [f"        - {e.source}: {e.detail}" for e in self.evidence]
        if self.fix:
            lines.append(f"        fix: {self.fix}")
        return "\n".join(lines)
