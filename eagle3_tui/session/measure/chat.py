"""How a benchmark sends chat on the attached server: through its /v1/chat/completions where that answers the
per-request spec fields, else the served template (read from its tokenizer) rendered here and sent to
/generate (`sglang.client.choose_chat_route`); a named template, or a tokenizer that could not be read: the
server's chat endpoint only. A tokenizer read and holding no template is not a chat model's: its prompts go
raw, and the result says why."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eagle3_tui.eagle.chat_template import ServedTemplate
    from eagle3_tui.sglang.client import ChatMode


NO_TEMPLATE = "the served tokenizer has no chat template: prompts sent raw"


def chat_mode(template: ServedTemplate | None, *, tokenizer_read: bool = False) -> ChatMode | None:
    """How to send chat; None: raw, the served tokenizer having no template (`tokenizer_read`)."""
    from eagle3_tui.eagle.chat_template import render
    from eagle3_tui.sglang.client import ChatMode

    if template is None:
        if tokenizer_read:
            return None
        return ChatMode("the server's own chat template (its tokenizer could not be read here)")
    if template.text is None:
        return ChatMode(template.describe())
    return ChatMode(template.describe(), functools.partial(render, template))
