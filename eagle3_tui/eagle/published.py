"""The accept length a draft's authors published: a number in its config.json or its model card (README.md).

Shown beside the accept length measured on the traffic served: a draft far below its published figure on
the same kind of prompts points at serving (template, wiring, flags), one near it on its own benchmark but
low on the operator's prompts at the traffic. Model cards write it many ways ("acceptance length 3.2",
"Average accept length: 2.9", a table column "Accept Length"); the first number after such a phrase, in the
range an accept length can take, is taken, and where it was read is said.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

CONFIG_KEYS = ("accept_length", "acceptance_length", "avg_accept_length", "average_accept_length",
               "mean_accept_length", "avg_acceptance_length", "published_accept_length")
_PHRASE = re.compile(r"(?:average|avg\.?|mean)?\s*accept(?:ance|ed)?[\s_-]*(?:length|len)\b", re.IGNORECASE)
_NUMBER = re.compile(r"(?<![\w.])(\d{1,2}(?:\.\d+)?)(?![\w.%])")
MAX_ACCEPT = 32.0  # a draft chain longer than this is not served: a bigger number is something else


@dataclass(frozen=True)
class Published:
    accept_len: float
    source: str
    """Where it was read: "config.json accept_length", "README.md line 12"."""


def _plausible(v: Any) -> float | None:
    if isinstance(v, (int, float)) and not isinstance(v, bool) and 1.0 <= float(v) <= MAX_ACCEPT:
        return float(v)
    return None


def from_config(config: Mapping[str, Any], name: str = "config.json") -> Published | None:
    """A top-level accept-length key, or one under `eagle_config` / `speculators_config`."""
    for scope, d in (("", config), ("eagle_config.", config.get("eagle_config")),
                     ("speculators_config.", config.get("speculators_config"))):
        if not isinstance(d, Mapping):
            continue
        for key in CONFIG_KEYS:
            v = _plausible(d.get(key))
            if v is not None:
                return Published(v, f"{name} {scope}{key}")
    return None


def from_model_card(text: str, name: str = "README.md") -> Published | None:
    """The first plausible number after an accept-length phrase: on its line, or in the first data row of a
    markdown table whose header names it (that column's cell)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _PHRASE.search(line)
        if m is None:
            continue
        if line.lstrip().startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            col = next((j for j, c in enumerate(cells) if _PHRASE.search(c)), None)
            rows = [r for r in lines[i + 1:i + 4] if r.lstrip().startswith("|") and not set(r.strip()) <= set("|-: ")]
            if col is not None and rows:
                row = [c.strip() for c in rows[0].strip().strip("|").split("|")]
                n = _NUMBER.search(row[col]) if col < len(row) else None
                v = _plausible(float(n.group(1))) if n else None
                if v is not None:
                    return Published(v, f"{name} line {i + 2 + lines[i + 1:].index(rows[0])}")
            continue
        n = _NUMBER.search(line[m.end():])
        v = _plausible(float(n.group(1))) if n else None
        if v is not None:
            return Published(v, f"{name} line {i + 1}")
    return None


def published_accept_length(config: Mapping[str, Any] | None, model_card: str | None, *,
                            config_name: str = "config.json", card_name: str = "README.md") -> Published | None:
    """The config's figure, else the model card's; None when neither says one."""
    if config is not None:
        got = from_config(config, config_name)
        if got is not None:
            return got
    return from_model_card(model_card, card_name) if model_card else None
