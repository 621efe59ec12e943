"""What real SGLang does with a draft whose config names another class than an EAGLE-3 draft's.

SGLang builds the draft with the class its config's `architectures` names. A draft saved with the target's
class (`LlamaForCausalLM`: a copy of the target's config.json) is built as a plain target of the draft's
size, and loading its weights fails: the draft's `lm_head` has `draft_vocab_size` rows where the class wants
`vocab_size` (0.5.23 `layers/vocab_parallel_embedding.py` `weight_loader`:
`AssertionError: self.org_vocab_size=259 self.use_presharded_weights=False loaded_weight.shape[output_dim]=160`,
in the scheduler, then the parent's "Received sigquit from a child process"). The sim raises the same error
so it dies at the same point with the same line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

DRAFT_CLASSES = ("LlamaForCausalLMEagle3", "Eagle3DeepseekV2ForCausalLM")
"""0.5.23's EAGLE-3 draft classes (`EntryClass` of `models/llama_eagle3.py` and `models/kimi_k25_eagle3.py`)."""


def check_draft_class(config: Mapping[str, Any], head_rows: int | None) -> None:
    """Raise what SGLang raises loading this draft when its `architectures` is not an EAGLE-3 draft class."""
    arch = (config.get("architectures") or [DRAFT_CLASSES[0]])[0]
    if arch in DRAFT_CLASSES:
        return
    vocab = int(config.get("vocab_size") or 0)
    if head_rows is not None and head_rows != vocab:
        raise AssertionError(f"self.org_vocab_size={vocab} self.use_presharded_weights=False "
                             f"loaded_weight.shape[output_dim]={head_rows}")
    # a full-vocabulary head loads; the plain target class then has no EAGLE-3 draft interface
    raise ValueError(f"the draft config names {arch}, not an EAGLE-3 draft class ({', '.join(DRAFT_CLASSES)}): "
                     "SGLang builds the draft as that class and cannot draft with it")
