"""Rules on the chat template: the one served against the one the training data was made with, and a
benchmark that sent raw text to a draft trained on chat.

A draft learns the tokens after the template's role headers; served another template (or none), its
accept length collapses while the offline check, fed its own training data, still looks fine.
"""

from __future__ import annotations

from eagle3_tui.doctor.facts import Facts
from eagle3_tui.doctor.findings import Evidence, Finding

CHAT_TEMPLATE_MISMATCH = "chat-template-mismatch"
RAW_BENCH = "raw-bench"


def _trained_evidence(f: Facts) -> Evidence | None:
    t = f.trained_template
    if t is None:
        return None
    shown = t.template if len(t.template) <= 60 else t.template[:57] + "..."
    return Evidence(t.source, f"the data was made with chat template {shown!r} ({t.family or 'unknown family'})")


def chat_template_mismatch(f: Facts) -> Finding | None:
    """The served template's family differs from the training data's, or the server has none to apply."""
    trained = f.trained_template
    if trained is None or trained.family is None:
        return None
    ev_trained = _trained_evidence(f)
    assert ev_trained is not None
    served = f.served_template
    if served is None:
        if not f.served_template_read:
            return None
        return Finding(
            CHAT_TEMPLATE_MISMATCH, "warning",
            f"the draft was trained on the {trained.family} chat template but the served tokenizer has none",
            [ev_trained, Evidence("served tokenizer", "no chat_template in tokenizer_config.json, no "
                                  "chat_template.jinja/.json, no --chat-template")],
            f"Serve the template the data was made with (--chat-template, or the {trained.family} tokenizer's "
            "tokenizer_config.json); chat requests otherwise reach the draft in a format it never saw.",
        )
    if served.family is None or served.family == trained.family:
        return None
    return Finding(
        CHAT_TEMPLATE_MISMATCH, "warning",
        f"the server applies the {served.family} chat template; the draft was trained on {trained.family}",
        [ev_trained, Evidence(served.source, f"the served {served.describe()}")],
        f"Serve the {trained.family} template (--chat-template), or retrain the draft on data rendered with "
        f"the {served.family} one: the draft's accept length falls where the role headers differ.",
    )


def raw_bench(f: Facts) -> Finding | None:
    """The latest benchmark sent raw text while the draft was trained on chat (or a template is served)."""
    if f.bench_prompt_format != "raw":
        return None
    trained = f.trained_template
    ev = [Evidence(f.bench_source, "prompts sent as bare text (bench --raw): no chat template applied")]
    if trained is not None:
        ev_trained = _trained_evidence(f)
        assert ev_trained is not None
        return Finding(
            RAW_BENCH, "warning",
            "the benchmark sent raw text to a draft trained on chat: its accept length understates what chat "
            "traffic gets",
            [*ev, ev_trained],
            "Benchmark without --raw (prompts go in the served chat template), and compare.",
        )
    if f.served_template is None:
        return None
    return Finding(
        RAW_BENCH, "info",
        "the benchmark sent raw text though the server has a chat template: a chat-trained draft accepts less "
        "on raw text",
        [*ev, Evidence(f.served_template.source, f"the served {f.served_template.describe()}")],
        "Benchmark without --raw unless the draft was trained on raw text (the training data's data_config.json "
        "says which).",
    )


CHAT_RULES = ((CHAT_TEMPLATE_MISMATCH, chat_template_mismatch), (RAW_BENCH, raw_bench))
