"""A byte-level tokenizer for the demo target: token id = byte value, plus BOS/EOS/PAD.

Its JSON form (`tokenizer.json` in the target dir) is what the sim server reads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

BOS_ID = 256
EOS_ID = 257
PAD_ID = 258
VOCAB_SIZE = 259


@dataclass(frozen=True)
class ByteTokenizer:
    """Bytes in, bytes out; ids >= 256 are specials and decode to nothing."""

    bos_id: int = BOS_ID
    eos_id: int = EOS_ID
    pad_id: int = PAD_ID
    vocab_size: int = VOCAB_SIZE

    def encode(self, text: str, *, add_bos: bool = True) -> list[int]:
        ids = list(text.encode("utf-8"))
        return [self.bos_id, *ids] if add_bos else ids

    def decode(self, ids: list[int]) -> str:
        return bytes(i for i in ids if 0 <= i < 256).decode("utf-8", errors="replace")

    def to_json(self) -> str:
        return json.dumps(
            {
                "type": "byte-level",
                "vocab_size": self.vocab_size,
                "bos_id": self.bos_id,
                "eos_id": self.eos_id,
                "pad_id": self.pad_id,
            },
            indent=2,
        )

    @classmethod
    def load(cls, target_dir: Path) -> ByteTokenizer:
        path = Path(target_dir) / "tokenizer.json"
        if not path.exists():
            return cls()
        data = json.loads(path.read_text())
        return cls(int(data["bos_id"]), int(data["eos_id"]), int(data["pad_id"]), int(data["vocab_size"]))
