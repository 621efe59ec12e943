"""How a benchmark sends chat on the attached server: the served template (read from its tokenizer) rendered
here and sent to /generate, whose meta_info carries the per-request spec fields on every SGLang release;
a named template or none read: the server's own /v1/chat/completions."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from eagle3_tui.eagle.chat_template import ServedTemplate
    from eagle3_tui.sglang.client import ChatMode


def chat_mode(template: ServedTemplate | None) -> ChatMode:
    from eagle3_tui.eagle.chat_template import render
    from eagle3_tui.sglang.client import ChatMode

    if template is None:
        return ChatMode("the server's own chat template (none read from its tokenizer)")
    if template.text is None:
        return ChatMode(template.describe())
    return ChatMode(template.describe(), functools.partial(render, template))
