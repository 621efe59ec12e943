"""A launch's `--config` YAML file as command-line flags: engine-neutral.

SGLang (`ConfigArgumentMerger`, 0.5.6+) and vLLM (`FlexibleArgumentParser._load_config_file`) both read a
mapping of flag names to values and turn it into `--key value` tokens the same way; each engine's `launch`
module merges those tokens with argv by its own rules.
"""

from __future__ import annotations

import json
from typing import Any

from eagle3_tui.errors import UserError

__all__ = ["config_tokens", "read_config_mapping"]


def config_tokens(data: dict[str, Any]) -> list[str]:
    """The flags a --config mapping makes (`--key value`, lists spread, mappings as JSON, True as a bare
    flag, False and None left out)."""
    out: list[str] = []
    for key, value in data.items():
        flag = f"--{key}"
        if isinstance(value, bool):
            if value:
                out.append(flag)
        elif isinstance(value, list):
            if value:
                out.extend([flag, *(str(v) for v in value)])
        elif isinstance(value, dict):
            out.extend([flag, json.dumps(value)])
        elif value is not None:
            out.extend([flag, str(value)])
    return out


def read_config_mapping(text: str, where: str, engine: str) -> dict[str, Any]:
    """The YAML text's mapping; UserError with one sentence naming `where` when it is not one."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        raise UserError(f"{where} is not valid YAML{at}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UserError(f"{where} must hold a mapping of flag names to values, as {engine} requires")
    return data
