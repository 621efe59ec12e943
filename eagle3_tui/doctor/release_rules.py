"""Rules that follow the installed SGLang release (`Facts.installed`, read from its source).

Each says nothing when the release is unknown (`installed` is None), so today's facts give today's
findings. The answer is only used when it was computed for the ids the draft config really has.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from eagle3_tui.doctor.facts import Facts
from eagle3_tui.doctor.findings import Evidence, Finding
from eagle3_tui.eagle import wiring
from eagle3_tui.eagle.checkpoint import MLA_DRAFT, flat_config
from eagle3_tui.eagle.trainers import SGLANG_0_5_6, ServedLoader
from eagle3_tui.engines.served_by import sglang_loader
from eagle3_tui.sglang.installed import Answer, Note, Release
from eagle3_tui.sglang.installed.loader import FC_NORM, NORM_BEFORE_FC

if TYPE_CHECKING:
    from eagle3_tui.eagle.checkpoint import CheckpointIssue

IDS_PREFILL_ONLY = "ids-prefill-only"
WILL_NOT_START = "will-not-start"
EAGLE_NOT_EAGLE3 = "eagle-not-eagle3"

IDS_PATH = "eagle_config.eagle_aux_hidden_state_layer_ids"
DISABLE_GRAPH = "--disable-cuda-graph"
EAGLE3_DRAFT = "LlamaForCausalLMEagle3"


def installed_for_ids(f: Facts) -> Answer | None:
    """The installed answer, if it was computed for the draft config's ids (or for no draft config)."""
    a = f.installed
    if a is None:
        return None
    if f.draft_config is not None and tuple(f.draft_config.sglang_layer_ids or ()) != tuple(a.layer_ids or ()):
        return None
    if f.target_num_layers is not None and f.target_num_layers != a.num_layers:
        return None
    return a


def ids_for(f: Facts, boundaries: Sequence[int]) -> tuple[tuple[int, ...], bool]:
    """(ids to write, whether they also need the embed-capture patch) for these boundaries on the installed
    release; SGLang's +1 counting when the release is unknown."""
    a = f.installed
    fallback = wiring.boundaries_to_sglang_ids(boundaries)
    if a is None or a.release is None or (f.target_num_layers not in (None, a.num_layers)):
        return fallback, 0 in boundaries
    got = a.ids_for(boundaries)
    if got is not None:
        return got, False
    return fallback, 0 in boundaries


def release_name(a: Answer) -> str:
    return f"SGLang {a.version or '(unknown release)'}"


def evidence(a: Answer, notes: Sequence[Note]) -> list[Evidence]:
    """The model's notes as doctor evidence, saying how each is known."""
    return [Evidence(f"{release_name(a)} {n.source}", f"{n.detail} ({n.how})") for n in notes]


def capture_notes(a: Answer) -> list[Note]:
    """The notes about the target model file (setter and forward) and the start-up order."""
    keep = ("set_eagle3_layers_to_capture", ".forward", "CUDA graph", "version table", "patched")
    return [n for n in a.notes if any(k in n.detail or k in n.source for k in keep)][:5]


def graphs_disabled(f: Facts) -> bool:
    return f.launch is not None and f.launch.has_flag(DISABLE_GRAPH)


def ids_prefill_only(f: Facts) -> Finding | None:
    """Decode CUDA graphs captured before the ids were applied: graphed decode replays the defaults."""
    a = installed_for_ids(f)
    if a is None or not a.prefill_only or graphs_disabled(f) or a.captures is None:
        return None
    ev = [Evidence(f.draft_config_path or "draft config", f"{IDS_PATH} = {_ids(a.layer_ids)}"),
          Evidence(release_name(a), f"prefill captures {wiring.format_boundaries(a.captures)}; every graphed "
                                    f"decode step replays {wiring.format_boundaries(a.captures_cuda_graph)}")]
    ev += evidence(a, [n for n in a.notes if "graph" in n.detail.lower()])
    ev.append(Evidence("SGLang rule", "batches larger than --cuda-graph-max-bs run eagerly and do get the ids, "
                                      "so the effect shrinks under heavy load"))
    return Finding(
        IDS_PREFILL_ONLY,
        "error",
        f"the draft's layer ids reach prefill only: decode under CUDA graphs replays "
        f"{wiring.format_boundaries(a.captures_cuda_graph)}",
        ev,
        f"Restart with {DISABLE_GRAPH} (the Config pane offers it as a flag preset; slower decode, the ids reach "
        "every step), or upgrade to SGLang >= 0.5.11, which applies the ids before capturing the graphs.",
    )


def _release(f: Facts) -> Release | None:
    if f.release is not None:
        return f.release
    return f.installed.release if f.installed is not None else None


def will_not_start(f: Facts) -> Finding | None:
    """Start-up crashes the installed release has for these flags, ids or draft. The flag and draft checks
    need only the release (its version is enough); the capture checks need the target too."""
    r = _release(f)
    if r is None:
        return None
    reasons: list[Evidence] = []
    _steps_alone(f, r, reasons)
    _capture_failure(f, reasons)
    _multi_layer(f, r, reasons)
    if not reasons:
        return None
    return Finding(
        WILL_NOT_START,
        "error",
        f"this server will not start on SGLang {r.version or '(unknown release)'}: {reasons[0].detail}",
        reasons,
        "Change what the evidence names (flags, layer ids or draft) before restarting; the restart would fail.",
    )


def _steps_alone(f: Facts, r: Release, out: list[Evidence]) -> None:
    launch = f.launch
    if launch is None or launch.algorithm is None or launch.num_steps is None or launch.eagle_topk is not None:
        return
    if r.spec.steps_alone_fails:
        out.append(Evidence(f.launch_source, "--speculative-num-steps without --speculative-eagle-topk: SGLang "
                                             "compares topk None > 1 and raises TypeError while parsing the flags"))


def _capture_failure(f: Facts, out: list[Evidence]) -> None:
    ia = installed_for_ids(f)
    if ia is None:
        return
    fails = ia.fails_without_cuda_graph if graphs_disabled(f) else ia.fails
    if fails is None:
        return
    if ia.layer_ids is not None and -1 in ia.layer_ids and not ia.embed_capture:
        return  # embed-needs-patch names this cause and its fix
    out.append(Evidence(release_name(ia), fails))
    out += evidence(ia, capture_notes(ia)[:2])


def _multi_layer(f: Facts, r: Release, out: list[Evidence]) -> None:
    c = f.draft_config
    if c is None:
        return
    layers = flat_config(c.raw).get("num_hidden_layers")
    mla = bool(c.architectures) and c.architectures[0] == MLA_DRAFT
    if not isinstance(layers, int) or isinstance(layers, bool) or layers <= 1 or (r.loader.multi_layer and not mla):
        return
    which = "its MLA draft (kimi_k25_eagle3.py)" if mla else "this llama_eagle3"
    out.append(Evidence(f.draft_config_path or "draft config",
                        f"num_hidden_layers = {layers}, but {which} refuses drafts with more than one "
                        "layer (ValueError at load)"))


def served_loader(f: Facts) -> ServedLoader:
    """What `eagle.checkpoint.check_tensors` checks against: the installed release's draft loader, with the
    norms it applies because this draft config turns them on (SGLang 0.5.6's when the release is unknown);
    built where the check builds its own (`engines.served_by.sglang_loader`)."""
    r = _release(f)
    if r is None:
        return SGLANG_0_5_6
    raw = f.draft_config.raw if f.draft_config is not None else {}
    return sglang_loader(r.version, r.loader, config=raw, classes=r.path.draft_classes or (EAGLE3_DRAFT,),
                         name=f"SGLang {r.version or '(unknown release)'}")


def eagle_not_eagle3(f: Facts) -> Finding | None:
    """`--speculative-algorithm EAGLE` with an EAGLE-3 draft: no aux states are captured."""
    launch, c = f.launch, f.draft_config
    if launch is None or c is None or launch.algorithm is None:
        return None
    if launch.algorithm.upper() not in ("EAGLE", "NEXTN") or EAGLE3_DRAFT not in c.architectures:
        return None
    return Finding(
        EAGLE_NOT_EAGLE3,
        "error",
        "an EAGLE-3 draft served with --speculative-algorithm EAGLE: the target captures no aux states",
        [Evidence(f.launch_source, f"--speculative-algorithm {launch.algorithm}"),
         Evidence(f.draft_config_path or "draft config", f"architectures = [{EAGLE3_DRAFT}]"),
         Evidence("SGLang rule", "aux hidden states are captured only when the algorithm is EAGLE3; the draft then "
                                 "gets the target's last hidden state and its fc is skipped (accept length about 1)")],
        "Restart with --speculative-algorithm EAGLE3.",
    )


def loader_keeps(f: Facts, issue: CheckpointIssue) -> bool:
    """Whether a checkpoint issue still holds for the installed draft loader (True when it is unknown)."""
    kind, name = issue.kind, issue.tensor
    a = f.installed
    if a is None:
        return True
    loader = a.loader
    raw = f.draft_config.raw if f.draft_config is not None else {}
    if loader.layers_prefix and _is_layers0(issue):
        return False
    if kind == "ignored-norm":
        bare = name.removeprefix("model.")
        fc_on = bool(raw.get("fc_norm") or raw.get("use_aux_norm"))
        eagle = raw.get("eagle_config") if isinstance(raw.get("eagle_config"), dict) else {}
        nbf_on = bool(raw.get(NORM_BEFORE_FC) or (eagle or {}).get(NORM_BEFORE_FC))
        if FC_NORM in loader.applies and fc_on and bare.startswith(("fc_norm.", "aux_norm", "config:fc_norm")):
            return False
        if NORM_BEFORE_FC in loader.applies and nbf_on and bare.startswith(("input_norm.", "config:norm_before_fc")):
            return False
    return True


def _is_layers0(issue: CheckpointIssue) -> bool:
    """A `layers.0.*` tensor reported unknown, or a `midlayer.*` reported missing because layers.0.* holds it."""
    bare = issue.tensor.removeprefix("model.")
    if issue.kind == "unknown":
        return bare.startswith("layers.0.")
    return issue.kind == "missing" and bare.startswith("midlayer.") and "layers.0." in issue.message


def norms_fix(f: Facts) -> str | None:
    """The ignored-norms fix for a release whose loader applies norms when the config asks for them."""
    a = f.installed
    if a is None or not a.loader.applies:
        return None
    return (f"{release_name(a)} applies {', '.join(a.loader.applies)} when the draft config sets them: set the "
            "flag the draft was trained with (such as \"fc_norm\": true) in its config.json.")


def _ids(ids: Sequence[int] | None) -> str:
    return "absent" if ids is None else "[" + ", ".join(str(i) for i in ids) + "]"
