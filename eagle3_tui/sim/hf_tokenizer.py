"""The demo target's byte tokenizer as a standard Hugging Face tokenizer folder, for real engines.

The world's own `tokenizer.json` is the sim's format, which transformers cannot load; a real SGLang server is
pointed at this folder with `--tokenizer-path`. Token id = byte value (a byte-level BPE vocabulary in GPT-2's
byte-to-character map, no merges), BOS/EOS/PAD at 256/257/258, and BOS added in front as the sim's
`ByteTokenizer.encode` does, so both servers see the same ids for the same text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eagle3_tui.sim.tokenizer import ByteTokenizer

FOLDER = "hf-tokenizer"
BOS, EOS, PAD = "<s>", "</s>", "<pad>"


def _byte_chars() -> list[str]:
    """GPT-2's printable stand-in for each byte (the map the ByteLevel pre-tokenizer and decoder use)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1)
    )
    chars = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def _special(token_id: int, content: str) -> dict[str, Any]:
    return {
        "id": token_id,
        "content": content,
        "single_word": False,
        "lstrip": False,
        "rstrip": False,
        "normalized": False,
        "special": True,
    }


def tokenizer_json(tok: ByteTokenizer) -> dict[str, Any]:
    """The `tokenizers` serialization of the byte tokenizer."""
    vocab = {ch: i for i, ch in enumerate(_byte_chars())}
    vocab.update({BOS: tok.bos_id, EOS: tok.eos_id, PAD: tok.pad_id})
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [_special(tok.bos_id, BOS), _special(tok.eos_id, EOS), _special(tok.pad_id, PAD)],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": BOS, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [
                {"SpecialToken": {"id": BOS, "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"Sequence": {"id": "B", "type_id": 1}},
            ],
            "special_tokens": {BOS: {"id": BOS, "ids": [tok.bos_id], "tokens": [BOS]}},
        },
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": [],
        },
    }


def tokenizer_config(tok: ByteTokenizer) -> dict[str, Any]:
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS,
        "eos_token": EOS,
        "pad_token": PAD,
        "add_bos_token": True,
        "model_max_length": 1 << 20,
        "clean_up_tokenization_spaces": False,
        # A plain chat template, so /v1/chat/completions works on a real server too.
        "chat_template": (
            "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}assistant: {% endif %}"
        ),
    }


def write_hf_tokenizer(target_dir: Path | str) -> Path:
    """Write (or rewrite) `<target_dir>/hf-tokenizer/`; returns the folder. Idempotent, atomic per file."""
    tok = ByteTokenizer.load(Path(target_dir))
    folder = Path(target_dir) / FOLDER
    folder.mkdir(exist_ok=True)
    files = {
        "tokenizer.json": tokenizer_json(tok),
        "tokenizer_config.json": tokenizer_config(tok),
        "special_tokens_map.json": {"bos_token": BOS, "eos_token": EOS, "pad_token": PAD},
    }
    for name, data in files.items():
        tmp = folder / f".{name}.tmp"
        tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n")
        tmp.replace(folder / name)
    return folder


def ensure_hf_tokenizer(target_dir: Path | str) -> Path:
    """The folder, written first where a world built before it existed lacks it."""
    folder = Path(target_dir) / FOLDER
    if not (folder / "tokenizer.json").exists():
        return write_hf_tokenizer(target_dir)
    return folder
