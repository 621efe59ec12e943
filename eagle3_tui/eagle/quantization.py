"""What a target's quantization description files say: the method, and whether the weights carry a rotation of
the residual stream (QuaRot, SpinQuant, Hadamard transforms), which puts every hidden state a draft is fed in
another basis than the one it was trained on.

A checkpoint describes its quantization in config.json's `quantization_config`, or beside it in another
vendor's file, the names vLLM 0.32's quantization configs ask for (`get_config_filenames`): AutoGPTQ's and
moe_wna16's `quantize_config.json`, AutoAWQ's `quant_config.json`, NVIDIA ModelOpt's `hf_quant_config.json`
(`{"producer": {"name": "modelopt"}, "quantization": {"quant_algo": ...}}`), Intel Neural Compressor's
`quantization_config.json`. Rotations show as keys or values in those (`transform_config`, `rotation`,
`hadamard`, `spinquant`, `quarot`) or as a file of rotation matrices next to the weights. Pure: the session reads
the files; this reads their JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

QUANT_FILES = ("quantize_config.json", "quant_config.json", "hf_quant_config.json", "quantization_config.json")
"""Quantization descriptions beside config.json, as vLLM 0.32's quantization configs name them."""
ROTATION_WORDS = ("rotation", "hadamard", "quarot", "spinquant", "transform_config")
"""Words in a quantization description that mean the weights carry a rotation of the residual stream."""
ROTATION_FILE_PATTERNS = ("*rotation*", "*hadamard*", "*spinquant*", "*quarot*")
"""File names (in the target's folder) of rotation matrices shipped next to the weights."""


@dataclass(frozen=True)
class QuantDescription:
    source: str
    """The file (and key) it was read from."""
    method: str
    rotation: str | None
    """The rotation word found (None: no rotation marker)."""


ONLINE_TRANSFORM_KEYS = ("hadamard_group_size",)
"""Keys of transforms applied inside each linear layer at run time (vLLM's fp_quant: a Hadamard over groups of
the layer's input, undone in the same layer): the residual stream, and so the hidden states, stay unrotated."""


def rotation_word(data: Any) -> str | None:
    """The first rotation word in a description's keys or values (case-insensitive), or None; per-layer online
    transforms (`ONLINE_TRANSFORM_KEYS`) are not a rotation of the hidden states."""
    if isinstance(data, Mapping):
        data = {k: v for k, v in data.items() if k not in ONLINE_TRANSFORM_KEYS}
    text = json.dumps(data, default=str).lower()
    for word in ROTATION_WORDS:
        if word in text:
            return word
    return None


def method_of(data: Mapping[str, Any]) -> str:
    """The quantization method a description names, in its vendor's words."""
    for key in ("quant_method", "quant_algo", "quantization_method", "method"):
        v = data.get(key)
        if isinstance(v, str) and v:
            return v
    inner = data.get("quantization")
    if isinstance(inner, Mapping):  # ModelOpt's hf_quant_config.json
        producer = data.get("producer")
        name = producer.get("name") if isinstance(producer, Mapping) else None
        algo = inner.get("quant_algo")
        if isinstance(algo, str) and algo:
            return f"{name} {algo}" if isinstance(name, str) and name else algo
    bits = data.get("bits", data.get("w_bit"))
    if isinstance(bits, int) and not isinstance(bits, bool):
        kind = "AWQ" if "w_bit" in data or "zero_point" in data else "GPTQ"
        return f"{bits}-bit {kind}"
    return "unknown method"


def describe(files: Mapping[str, Any], rotation_files: tuple[str, ...] = ()) -> list[QuantDescription]:
    """One description per file whose JSON is an object; rotation-matrix files as descriptions of their own."""
    out: list[QuantDescription] = []
    for path, data in files.items():
        if isinstance(data, Mapping) and data:
            out.append(QuantDescription(path, method_of(data), rotation_word(data)))
    for path in rotation_files:
        base = path.rsplit("/", 1)[-1].lower()
        word = next((w for w in ROTATION_WORDS if w in base), "rotation")
        out.append(QuantDescription(path, "rotation matrices shipped with the weights", word))
    return out
