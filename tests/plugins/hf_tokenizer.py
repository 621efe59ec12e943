"""A standard Hugging Face tokenizer folder for the demo target, so a real engine (vLLM) can load it.

The world's own `tokenizer.json` is the sim's byte-level format (`eagle3_tui/sim/tokenizer.py`: id = byte
value, 256/257/258 = BOS/EOS/PAD), which transformers cannot read. This writes the same tokenizer in the
`tokenizers` library's format: a BPE model with no merges over GPT-2's byte-to-unicode alphabet (so every
byte is one token whose id is the byte's value), ByteLevel pre-tokenizer and decoder, and the three
specials as added tokens. Plain JSON: nothing is imported to write it.

Kept apart (tests/plugins) so the world's own HF tokenizer folder can replace it once the world writes one.
"""

from __future__ import annotations

import json
from pathlib import Path

from eagle3_tui.sim.tokenizer import BOS_ID, EOS_ID, PAD_ID

__all__ = ["byte_to_unicode", "hf_tokenizer_json", "write_hf_tokenizer"]

SPECIALS = {BOS_ID: "<s>", EOS_ID: "</s>", PAD_ID: "<pad>"}
# A chat template for /v1/chat/completions: the turns' text, one per line, as the world's corpus is plain text.
CHAT_TEMPLATE = "{{ bos_token }}{% for m in messages %}{{ m['content'] }}\n{% endfor %}"


def byte_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte -> printable character map (the ByteLevel pre-tokenizer's alphabet)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1))
    printable += list(range(ord("®"), ord("ÿ") + 1))
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return {b: chr(c) for b, c in zip(printable, chars, strict=True)}


def hf_tokenizer_json() -> dict:
    """The `tokenizer.json` (tokenizers format) of the byte-level demo tokenizer."""
    vocab = {ch: b for b, ch in byte_to_unicode().items()}
    added = [
        {"id": i, "content": text, "single_word": False, "lstrip": False, "rstrip": False,
         "normalized": False, "special": True}
        for i, text in sorted(SPECIALS.items())
    ]
    bos = SPECIALS[BOS_ID]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        # BOS first, as the sim's encode(add_bos=True) and the world's training sequences have it.
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": bos, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {bos: {"id": bos, "ids": [BOS_ID], "tokens": [bos]}},
        },
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
            "vocab": vocab, "merges": [],
        },
    }


def write_hf_tokenizer(dest: Path) -> None:
    """Write tokenizer.json, tokenizer_config.json and special_tokens_map.json into `dest`."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "tokenizer.json").write_text(json.dumps(hf_tokenizer_json(), ensure_ascii=False))
    specials = {"bos_token": SPECIALS[BOS_ID], "eos_token": SPECIALS[EOS_ID], "pad_token": SPECIALS[PAD_ID]}
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": 4096,
        "add_bos_token": True,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
        **specials,
    }
    (dest / "tokenizer_config.json").write_text(json.dumps(config, indent=2))
    (dest / "special_tokens_map.json").write_text(json.dumps(specials, indent=2))
