"""Target architectures the model knows: the names a user or a config may give, and SGLang's model file.

SGLang picks the model class by the target config's `architectures[0]` (each `srt/models/*.py` lists
its classes in `EntryClass`); the module below is where that class lives in every release read.
"""

from __future__ import annotations

from dataclasses import dataclass

from eagle3_tui.errors import UserError


@dataclass(frozen=True)
class Arch:
    key: str
    """Our short name (`deepseek_v3`), also the fallback table's row."""
    architecture: str
    """The HF `architectures[0]` SGLang dispatches on."""
    module: str
    """The SGLang module that defines it."""
    family: str
    """Rows of the fallback table that behave alike."""


ARCHS: tuple[Arch, ...] = (
    Arch("llama", "LlamaForCausalLM", "sglang.srt.models.llama", "llama"),
    Arch("qwen2", "Qwen2ForCausalLM", "sglang.srt.models.qwen2", "qwen2"),
    Arch("qwen3", "Qwen3ForCausalLM", "sglang.srt.models.qwen3", "qwen3"),
    Arch("qwen2_moe", "Qwen2MoeForCausalLM", "sglang.srt.models.qwen2_moe", "qwen2_moe"),
    Arch("qwen3_moe", "Qwen3MoeForCausalLM", "sglang.srt.models.qwen3_moe", "qwen3_moe"),
    Arch("deepseek_v2", "DeepseekV2ForCausalLM", "sglang.srt.models.deepseek_v2", "deepseek_v2"),
    Arch("deepseek_v3", "DeepseekV3ForCausalLM", "sglang.srt.models.deepseek_v2", "deepseek_v2"),
    Arch("kimi_k25", "KimiK25ForConditionalGeneration", "sglang.srt.models.kimi_k25", "kimi_k25"),
    Arch("glm4_moe", "Glm4MoeForCausalLM", "sglang.srt.models.glm4_moe", "glm4_moe"),
    Arch("glm4_moe_lite", "Glm4MoeLiteForCausalLM", "sglang.srt.models.glm4_moe_lite", "glm4_moe_lite"),
    Arch("gpt_oss", "GptOssForCausalLM", "sglang.srt.models.gpt_oss", "gpt_oss"),
    Arch("llama4", "Llama4ForConditionalGeneration", "sglang.srt.models.mllama4", "llama4"),
)

# Other spellings people and configs use (HF model_type, marketing names).
_ALIASES = {
    "qwen-moe": "qwen3_moe",
    "qwen_moe": "qwen3_moe",
    "deepseek": "deepseek_v3",
    "deepseek-v3": "deepseek_v3",
    "deepseek-r1": "deepseek_v3",
    "kimi-k2": "deepseek_v3",
    "kimi_k2": "deepseek_v3",
    "kimi-k2.5": "kimi_k25",
    "kimi_k2.5": "kimi_k25",
    "glm4-moe": "glm4_moe",
    "gpt-oss": "gpt_oss",
    "llama4_text": "llama4",
    "Llama4ForCausalLM": "llama4",
}


def lookup(name: str) -> Arch:
    """The architecture for a short name, an alias or an HF `architectures[0]`; UserError when unknown."""
    want = name.strip()
    key = _ALIASES.get(want, _ALIASES.get(want.lower(), want.lower().replace("-", "_")))
    for arch in ARCHS:
        if key == arch.key or want == arch.architecture:
            return arch
    known = ", ".join(a.key for a in ARCHS)
    raise UserError(f"unknown target architecture {name!r} (known: {known}, or an HF name like LlamaForCausalLM)")


def target_from_config(config: dict) -> tuple[Arch, int]:
    """(architecture, decoder layer count) of a target's HF config.json; multimodal targets (Kimi-K2.5,
    Llama 4) keep the layer count in `text_config`. UserError when either is missing or unknown."""
    names = config.get("architectures")
    if not isinstance(names, list) or not names or not isinstance(names[0], str):
        raise UserError("the target config has no architectures list")
    arch = lookup(names[0])
    layers = config.get("num_hidden_layers")
    text = config.get("text_config")
    if not isinstance(layers, int) and isinstance(text, dict):
        layers = text.get("num_hidden_layers")
    if not isinstance(layers, int) or isinstance(layers, bool) or layers < 4:
        raise UserError(f"the target config ({names[0]}) has no usable num_hidden_layers")
    return arch, layers
