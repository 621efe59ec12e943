"""Small pure formatting helpers shared by the widgets (no Textual import, easy to test).

Boundaries are not formatted here: `eagle3_tui.eagle.wiring.format_boundaries` is the one format."""

from __future__ import annotations

from collections.abc import Iterable


def fmt_duration(seconds: float | None) -> str:
    """`3m12s`-style durations for uptimes and ETAs."""
    if seconds is None or seconds != seconds or seconds < 0:
        return "?"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def fmt_num(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}"


def fmt_ids(ids: Iterable[int] | None) -> str:
    if ids is None:
        return "unset"
    return "[" + ", ".join(str(i) for i in ids) + "]"


def accept_level(accept_len: float | None, predicted: float | None, max_len: int | None) -> str:
    """`good` / `warn` / `bad` for an accept length: against the checker's prediction when there is one,
    else against what the draft could reach (num_steps + 1)."""
    if accept_len is None:
        return "none"
    ref = predicted if predicted else (float(max_len) if max_len else None)
    if ref is None or ref <= 1.0:
        return "good" if accept_len >= 2.5 else ("warn" if accept_len >= 1.8 else "bad")
    gain = (accept_len - 1.0) / (ref - 1.0)
    if gain >= 0.8:
        return "good"
    if gain >= 0.5:
        return "warn"
    return "bad"


def wrap_line(line: str, width: int) -> list[str]:
    """Hard-wrap one log line into chunks of `width` cells (log lines are mostly ASCII)."""
    if width <= 0 or len(line) <= width:
        return [line]
    return [line[i : i + width] for i in range(0, len(line), width)]


def fmt_flags(flags: dict[str, object]) -> str:
    """A flags preset as launch-command changes: `--x 15`, `--y` (switch), `drop --z` (None removes).

    SGLang's flags are spelled with dashes; a vLLM preset's keys (`num_speculative_tokens`, `draft_model`)
    are keys inside its `--speculative-config` JSON, and `speculative_config` itself is the flag."""
    out: list[str] = []
    dropped: list[str] = []
    for k, v in flags.items():
        k = k.lstrip("-")
        flag = f"--{k.replace('_', '-')}" if k == "speculative_config" else None
        if v is None:
            dropped.append(flag or (f"--speculative-config {k}" if "_" in k else f"--{k}"))
        elif "_" in k and flag is None:
            out.append(f"--speculative-config {k}={v}")
        else:
            out.append(f"--{k}" if v is True else f"--{k} {v}")
    if dropped:
        out.append("drop " + " ".join(dropped))
    return " ".join(out)
