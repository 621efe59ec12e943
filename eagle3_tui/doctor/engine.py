"""Facts in, findings out, worst first.

`diagnose` fills in the facts that follow from other facts (the effective spec from the launch
command, checkpoint issues from the tensor header checked against the installed release's draft loader,
or from the draft config alone; embedding capture from the sim server's patch flag), runs every rule, then `compare-to-isolate` over their findings (accept length low while no setup rule found
a fault), and sorts: errors, then warnings, then info; ties keep DESIGN.md's order.
"""

from __future__ import annotations

import dataclasses

from eagle3_tui.doctor.advice import ADVICE_RULES
from eagle3_tui.doctor.facts import Facts
from eagle3_tui.doctor.findings import Evidence, Finding, severity_rank
from eagle3_tui.doctor.quality_rules import COMPARE_TO_ISOLATE, QUALITY_RULES, compare_to_isolate
from eagle3_tui.doctor.release_rules import served_loader
from eagle3_tui.doctor.rules import ENGINE_NEUTRAL, RULE_IDS, RULES
from eagle3_tui.doctor.vllm_rules import VLLM_RULES
from eagle3_tui.engines import get_engine
from eagle3_tui.errors import UserError
from eagle3_tui.sglang.launch import KIND_SIM, effective

SIM_PATCH_FLAG = "--sim-embed-capture-patch"


def complete(facts: Facts) -> Facts:
    """A copy with the derivable facts filled in (never overriding what was given)."""
    f = dataclasses.replace(facts)
    if f.effective is None and f.launch is not None:
        auto = f.installed.auto_spec if f.installed is not None else None
        f.effective = effective(f.launch, target_arch=f.target_arch, auto=auto)
    if f.embed_capture_supported is None and f.launch is not None and f.launch.kind == KIND_SIM:
        has = f.launch.has_flag(SIM_PATCH_FLAG)
        f.embed_capture_supported = has
        f.embed_capture_evidence = f"{f.launch_source}: sim server {'with' if has else 'without'} {SIM_PATCH_FLAG}"
    if f.served_launch is None and f.launch is not None:
        f.served_launch = get_engine("sglang").from_native(f.launch)  # `launch` is SGLang's parsed command
    if f.release is None and f.installed is not None:
        f.release = f.installed.release
    if f.checkpoint_issues is None and f.draft_config is not None:
        f.checkpoint_issues = _draft_issues(f)
    return f


def _draft_issues(f: Facts) -> list | None:
    """The checkpoint checked against the installed release's loader; the config alone without tensors."""
    from eagle3_tui.eagle.checkpoint import check_tensors, config_issues

    assert f.draft_config is not None
    loader = served_loader(f)
    if f.checkpoint_tensors is None or f.target_hidden_size is None:
        return config_issues(f.draft_config.raw, loader)
    try:
        # d2t values only as the facts give them: the doctor does no I/O (the session reads them
        # next to the file).
        return check_tensors(
            f.draft_config.raw,
            f.checkpoint_tensors,
            target_hidden_size=f.target_hidden_size,
            num_aux=f.draft_config.num_aux,
            d2t_values=f.d2t_values if f.d2t_values is not None else (),
            loader=loader,
        )
    except UserError:
        return None


def diagnose(facts: Facts) -> list[Finding]:
    """Every finding for these facts, worst first."""
    f = complete(facts)
    found: list[Finding] = []
    rules = (*RULES, *ADVICE_RULES, *QUALITY_RULES) if f.engine == "sglang" else (
        *((r, rule) for r, rule in RULES if r in ENGINE_NEUTRAL), *ADVICE_RULES, *QUALITY_RULES, *VLLM_RULES)
    for rule_id, rule in rules:
        try:
            finding = rule(f)
        except Exception as err:  # a rule must never take the doctor down with it
            finding = Finding(
                rule_id,
                "info",
                f"the {rule_id} rule could not run on these facts",
                [Evidence("doctor", f"{type(err).__name__}: {err}")],
                "Report this with the facts that caused it.",
            )
        if finding is not None:
            found.append(finding)
    try:
        isolate = compare_to_isolate(f, found)
    except Exception as err:  # as above: never a traceback
        isolate = Finding(COMPARE_TO_ISOLATE, "info", f"the {COMPARE_TO_ISOLATE} rule could not run on these facts",
                          [Evidence("doctor", f"{type(err).__name__}: {err}")], "Report this with the facts that caused it.")
    if isolate is not None:
        found.append(isolate)
    order = {rule_id: i for i, rule_id in enumerate(
        (*RULE_IDS, *(r for r, _ in (*ADVICE_RULES, *QUALITY_RULES, *VLLM_RULES)), COMPARE_TO_ISOLATE))}
    return sorted(found, key=lambda x: (severity_rank(x.severity), order.get(x.rule_id, len(order))))
