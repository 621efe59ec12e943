"""The standalone accuracy check: the draft fed its own training data under several wirings.

For each wiring (which data slots go into fc), over a bounded sample of loss-masked positions
(the trainer's own validation rows when they can be found: `split`): top-1 and top-5 next-token
accuracy as SGLang accepts (draft ids mapped through d2t, compared with the target's full-vocabulary
argmax; a token outside the draft vocabulary is a miss), a chain simulation for the configured number
of steps (the draft's output state fed forward with the next true token, stopping at the first miss)
giving the conditional per-step acceptance a_j and the predicted accept length
tau = 1 + sum_i prod_{j<=i} a_j, and beside them the trainer's own metric named as it defines it
(`trainer`: SpecForge acc_k, speculators full/cond acc; see trainers.py). When the installed SGLang
(`ServedLoader`) does not run what the draft was trained with (norms, rope scaling, layers), the numbers
are those of the served forward and `as_trained` holds the trained forward's.

It runs in-process (`run_check`) or as a program next to the data on the GPU host:

    python accuracy.pyz --draft DIR --data ROOT|GLOB [--target DIR|config.json] [--wiring SPEC ...]

which prints JSON lines (start, findings, data, probe, wirings, progress, result, done | error) and
exits when its stdin closes (the SSH channel went away). Only the standard library, torch and
safetensors are needed (pyarrow, when importable, reads speculators' loss masks). On a host it runs
from the check's zip (eagle/shipped.py: `python accuracy.pyz ARGS`), its siblings imported as usual.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from eagle3_tui.eagle import checkpoint as ck
from eagle3_tui.eagle import datasets as ds_mod
from eagle3_tui.eagle import predict as pr
from eagle3_tui.eagle import trainers as tr
from eagle3_tui.eagle import wiring as wr
from eagle3_tui.eagle.spec_config import SpecConfig

if TYPE_CHECKING:  # only for annotations, so the shipped file also runs on Python 3.8
    from typing import TypeAlias

    Emit: TypeAlias = Callable[[dict], None]


@dataclass
class WiringResult:
    name: str
    boundaries: list[int] | None
    slots: list[int]
    top1: float | None = None
    top5: float | None = None
    step_accept: list[float] = field(default_factory=list)  # conditional a_j, j = 1..steps
    predicted_accept_len: float | None = None
    tokens_per_s: float | None = None
    positions: int = 0
    chain_positions: int = 0
    note: str = ""
    source: str = ""
    # the trainer's own metric on this wiring, named as it defines it (TrainerMetric.to_dict())
    trainer: dict = field(default_factory=dict)
    # the same weights run as the trainer ran them, when that differs from what the server runs
    as_trained: dict | None = None
    # the same weights as the other engine runs them ({"by": its name, top1, top5, step_accept,
    # predicted_accept_len}): vLLM's (as trained) beside an SGLang headline, SGLang's beside vLLM's
    other: dict | None = None

    @classmethod
    def from_dict(cls, d: dict) -> WiringResult:
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in d.items() if k in names})


@dataclass
class CheckReport:
    """Everything one check found; JSON-able both ways (it crosses SSH as a JSON line)."""

    draft_dir: str
    data: str
    layout: str = ""
    files_read: int = 0
    files_total: int = 0
    positions: int = 0
    steps: int = 3
    device: str = "cpu"
    dtype: str = "float32"
    label_source: str = ""
    num_aux: int = 3
    hidden_size: int = 0
    num_layers: int | None = None
    slot_boundaries: list[int] | None = None
    wirings: list[WiringResult] = field(default_factory=list)
    probe: list[dict] = field(default_factory=list)  # SlotProbe dicts
    findings: list[dict] = field(default_factory=list)  # CheckpointIssue dicts
    notes: list[str] = field(default_factory=list)
    elapsed_s: float = 0.0
    split: str = "training"  # "validation" when the trainer's own held-out rows were read
    framework: str | None = None  # the trainer whose files these are
    served_by: str = ""  # the loader model the headline numbers follow ("SGLang 0.5.6", "vLLM 0.32.0")
    engine: str = "sglang"  # the engine of `served_by`
    other_by: str = ""  # the loader model of each wiring's `other` numbers
    dropped: list[str] = field(default_factory=list)  # DraftForward operations the headline's loader drops
    forward_note: str = ""  # how the served forward differs from the trained one ("" when it does not)
    # predict.py: [{"steps", "topk", "draft_tokens", "accept_len", "positions", "wiring", "boundaries"}]
    predictions: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        """All fields, plus the best wiring's figures at the top level (for the ledger)."""
        d = asdict(self)
        best = self.best()
        if best is not None:
            d["best_wiring"] = best.name
            d["top1"] = best.top1
            d["predicted_accept_len"] = best.predicted_accept_len
        return d

    @classmethod
    def from_dict(cls, d: dict) -> CheckReport:
        names = set(cls.__dataclass_fields__)
        kw = {k: v for k, v in d.items() if k in names}
        kw["wirings"] = [WiringResult.from_dict(w) for w in d.get("wirings", [])]
        return cls(**kw)

    def result(self, name: str) -> WiringResult | None:
        return next((w for w in self.wirings if w.name == name), None)

    def for_boundaries(self, boundaries: Sequence[int]) -> WiringResult | None:
        """The measured wiring that feeds exactly these boundaries (e.g. what the server captures)."""
        want = list(boundaries)
        return next((w for w in self.wirings if w.boundaries == want and w.top1 is not None), None)

    def best(self) -> WiringResult | None:
        measured = [w for w in self.wirings if w.top1 is not None]
        return max(measured, key=lambda w: w.top1 or 0.0) if measured else None

    def served_wiring(self, boundaries: Sequence[int] | None) -> WiringResult | None:
        """The measured wiring a server feeding `boundaries` runs. With the served boundaries known, only
        the wiring measured on exactly those counts (any other would describe a different server); with
        them unknown, the "draft config" wiring stands in: what SGLang captures from that draft config."""
        if boundaries is not None:
            return self.for_boundaries(boundaries)
        hit = self.result("draft config")
        return hit if hit is not None and hit.top1 is not None else None

    def prediction_list(self) -> list[pr.Prediction]:
        """`predictions`, typed."""
        return pr.prediction_list(self.predictions)

    def served_predictions(self, boundaries: Sequence[int] | None) -> list[pr.Prediction]:
        """The predictions on the served wiring (`served_wiring`), in the grid's order."""
        hit = self.served_wiring(boundaries)
        if hit is None or hit.boundaries is None:
            return []
        want = tuple(hit.boundaries)
        return [p for p in self.prediction_list() if p.boundaries == want and p.accept_len is not None]

    def prediction(self, config: Sequence[int], boundaries: Sequence[int] | None) -> pr.Prediction | None:
        """The one lookup: the prediction for `config` on the served wiring; None when it has none."""
        want = tuple(int(x) for x in config)
        return next((p for p in self.served_predictions(boundaries) if p.config == want), None)


def predicted_accept_len(report: CheckReport | None, boundaries: Sequence[int] | None,
                         config: Sequence[int] | None = None) -> float | None:
    """The accept length the check predicts for the boundaries being served (`served_wiring`): the one
    answer the doctor, the status bar, the accuracy pane and the ledger share. With the served
    (steps, topk, draft tokens) predicted on that wiring, the tree-aware number; else the chain's."""
    if report is None:
        return None
    hit = report.served_wiring(boundaries)
    if hit is None or hit.predicted_accept_len is None:
        return None
    found = report.prediction(config, boundaries) if config is not None else None
    if found is not None and found.accept_len is not None:
        return found.accept_len
    return float(hit.predicted_accept_len)


@dataclass
class CheckOptions:
    draft_dir: str
    data: str
    target: str | None = None  # the target's config.json or directory (weights there are optional)
    wirings: list[str] = field(default_factory=list)
    samples: int = 20000
    steps: int = 3
    device: str = "cpu"
    dtype: str = "float32"
    data_slots: list[int] | None = None  # boundaries of the data's slots, when known
    num_layers: int | None = None
    labels: str = "auto"  # auto | target | tokens
    max_len: int = 4096
    batch_tokens: int = 16384
    threads: int | None = None
    predict: list[SpecConfig] = field(default_factory=list)
    served: tr.ServedLoader | None = None  # whose numbers lead (None: SGLang 0.5.6's loader)
    other: tr.ServedLoader | None = None  # shown beside (None: vLLM beside SGLang, SGLang 0.5.6 beside vLLM)


# -- target pieces ---------------------------------------------------------------------------------


class TargetWeights:
    """The target's safetensors by tensor name (from the index, else the shard headers); one tensor
    is loaded at a time, so a 1T-parameter target costs only what is asked for."""

    def __init__(self, directory: str) -> None:
        self.where: dict[str, str] = {}
        index = os.path.join(directory, "model.safetensors.index.json")
        if os.path.exists(index):
            try:
                with open(index, encoding="utf-8") as f:
                    wm = json.load(f).get("weight_map", {})
            except (OSError, ValueError):
                raise ck.BadInput(f"{index} is not a readable safetensors index") from None
            self.where = {str(n): os.path.join(directory, str(fn)) for n, fn in wm.items()}
        elif os.path.isdir(directory):
            for n in sorted(os.listdir(directory)):
                if n.endswith(".safetensors"):
                    p = os.path.join(directory, n)
                    for name in ck.read_safetensors_header(p):
                        self.where[name] = p

    def role(self, role: str) -> str | None:
        return next((n for n in self.where if _target_role(n) == role), None)

    def has(self, name: str) -> bool:
        return name in self.where

    def get(self, name: str) -> Any:
        from safetensors import safe_open

        path = self.where[name]
        try:
            with safe_open(path, framework="pt") as f:
                return f.get_tensor(name)
        except Exception as err:  # a shard named by the index may be missing or broken
            raise ck.BadInput(f"{path}: cannot load the target tensor {name} ({str(err)[:120]})") from None


def _target_files(target: str) -> tuple[str, dict, TargetWeights]:
    """(config path, config, weights) for --target: a config.json or the model directory."""
    path = os.path.expanduser(target)
    if os.path.isdir(path):
        cfg_path = os.path.join(path, "config.json")
        directory = path
    else:
        cfg_path = path
        directory = os.path.dirname(path) or "."
    cfg = ck.read_config(cfg_path)
    if isinstance(cfg.get("text_config"), dict):  # multimodal wrappers (e.g. Kimi-K2.5)
        cfg = {**cfg["text_config"], **{k: v for k, v in cfg.items() if k != "text_config"}}
    return cfg_path, cfg, TargetWeights(directory)


def _target_role(name: str) -> str | None:
    if name.endswith("embed_tokens.weight") and "mtp" not in name:
        return "embed"
    if name.endswith("lm_head.weight"):
        return "lm_head"
    if name in ("norm.weight", "model.norm.weight") or name.endswith(".model.norm.weight"):
        return "norm"
    return None


def _int(cfg: dict, key: str) -> int | None:
    v = cfg.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


# -- the check -------------------------------------------------------------------------------------


@dataclass
class _Draft:
    """The draft and target as read from disk (configs, tensor headers, target weights by name)."""

    header: ck.CheckpointHeader
    cfg: dict  # flat: a speculators config merged onto its transformer_layer_config
    tcfg: dict
    tw: TargetWeights | None
    ht: int
    num_layers: int | None
    num_aux: int
    issues: list[ck.CheckpointIssue]


@dataclass
class _Labels:
    """Per sample, LongTensor [T]: the target's token after position u (-1 unknown); `in_vocab` the same
    restricted to the draft vocabulary (speculators' targets); where they came from."""

    full: list[Any]
    in_vocab: list[Any] | None
    source: str
    why: str = ""


def loaders(served: tr.ServedLoader | None, other: tr.ServedLoader | None) -> tuple[tr.ServedLoader, ...]:
    """(the headline's loader, the one shown beside it, the SGLang one the checkpoint findings follow)."""
    served = served or tr.SGLANG_0_5_6
    if other is None:
        other = tr.vllm_loader() if served.engine == "sglang" else tr.SGLANG_0_5_6
    sglang = served if served.engine == "sglang" else other if other.engine == "sglang" else tr.SGLANG_0_5_6
    return served, other, sglang


def run_check(opts: CheckOptions, emit: Emit | None = None, loader: tr.ServedLoader | None = None) -> CheckReport:
    """Run the whole check; `emit` receives each JSON-able event as it happens; `loader` (else
    `opts.served`) is the serving engine's draft loader whose numbers lead (default: SGLang 0.5.6's)."""
    import torch

    out: Emit = emit or (lambda e: None)
    served_loader, other_loader, loader = loaders(loader or opts.served, opts.other)
    t_start = time.perf_counter()
    device, dtype = _runtime(opts)
    report = CheckReport(draft_dir=opts.draft_dir, data=opts.data, steps=opts.steps, device=opts.device,
                         dtype=opts.dtype, served_by=served_loader.name, engine=served_loader.engine,
                         other_by=other_loader.name)
    out({"event": "start", "draft": opts.draft_dir, "data": opts.data, "samples": opts.samples,
         "steps": opts.steps, "device": opts.device, "torch": torch.__version__})
    d = _read_draft(opts, loader, report, out)
    data = _read_data(opts, d, report, out)
    tensors = _load_draft(d.header)
    embed = _embedding(opts, d, tensors, report)
    _trained_embedding(tensors, embed, d, served_loader, report)
    probe = ds_mod.norm_probe(data, embed=embed, slot_boundaries=report.slot_boundaries)
    slot_b = _assume_slots(d, data, probe, report)
    report.probe = [p.to_dict() for p in ds_mod.norm_probe(data, embed=embed, slot_boundaries=slot_b)] \
        if slot_b != report.slot_boundaries else [p.to_dict() for p in probe]
    report.slot_boundaries = slot_b
    out({"event": "probe", "slots": report.probe})
    # generator-made speculators files end with boundary N, which no server captures; hand-made sets
    # (an embedding slot, the seeds' [embed, l3, l31, l59]) may end with a served layer
    generated = data.layout == "speculators" and not any(p.embed_like for p in probe)
    wirings = _wirings(opts, d, data, report, data.final_slot if generated else None)
    out({"event": "wirings", "wirings": [w.to_dict() for w in wirings]})
    head, head_note = _target_head(d, opts, embed)
    model = _build(opts, d, tensors, embed, head, device, dtype)
    labels = _labels(data, opts.labels, d, head, model, slot_b, device)
    report.label_source = labels.source
    report.notes.extend(n for n in (head_note if labels.source != "tokens" else "", labels.why) if n)
    del head
    trained = model.fwd
    served = served_forward(trained, d.cfg, served_loader)
    diff = trained.differences(served)
    report.dropped = diff
    if diff:
        report.forward_note = (f"{served_loader.name} runs this draft without what it was trained with "
                               f"({', '.join(diff)}): the numbers are as it serves them; as_trained holds the "
                               f"trained forward's")
        report.notes.append(report.forward_note)
    other = served_forward(trained, d.cfg, other_loader)
    _measure(model, data, labels, wirings, (served, other, trained), opts, device, dtype, out, report)
    if opts.predict:
        report.predictions = pr.predict_for_report(model, served, data, labels, wirings, opts, device, dtype,
                                                   report, _assemble, _batches)
        out({"event": "predictions", "predictions": report.predictions})
    report.elapsed_s = round(time.perf_counter() - t_start, 3)
    out({"event": "done", "report": report.to_dict()})
    return report


def _runtime(opts: CheckOptions) -> tuple[Any, Any]:
    import torch

    if opts.threads:
        torch.set_num_threads(opts.threads)
    if opts.device.startswith("cuda") and not torch.cuda.is_available():
        raise ck.BadInput(f"--device {opts.device} was asked for but this Python's torch sees no CUDA device "
                          f"(torch {torch.__version__}); use --device cpu")
    if opts.dtype not in ("float32", "bfloat16", "float16"):
        raise ck.BadInput(f"--dtype {opts.dtype} is not one of float32, bfloat16, float16")
    return torch.device(opts.device), getattr(torch, opts.dtype)


def _read_draft(opts: CheckOptions, loader: tr.ServedLoader, report: CheckReport, emit: Emit) -> _Draft:
    header = ck.read_header(opts.draft_dir)
    cfg = ck.flat_config(header.config)
    sizes = ck.draft_sizes(cfg, header.config_path)
    tcfg: dict = {}
    tw: TargetWeights | None = None
    if opts.target:
        _, tcfg, tw = _target_files(opts.target)
    ht = _int(tcfg, "hidden_size") or _int(cfg, "target_hidden_size") or sizes.hidden
    num_layers = opts.num_layers or _int(tcfg, "num_hidden_layers")
    fc = header.tensors.get("fc.weight") or header.tensors.get("model.fc.weight")
    ids_from_cfg = wr.num_aux_from_config(cfg)
    if fc is not None and len(fc.shape) == 2 and fc.shape[1] % ht == 0 and fc.shape[1] // ht > 0:
        num_aux = fc.shape[1] // ht
    else:
        num_aux = ids_from_cfg or 3
    # SGLang sizes fc from the config ids (3 without them), whatever the checkpoint holds
    issues = ck.check_tensors(header.config, header.tensors, target_hidden_size=ht,
                              num_aux=loader.num_aux or ids_from_cfg or 3, loader=loader)
    report.num_layers, report.hidden_size, report.num_aux = num_layers, ht, num_aux
    report.findings = [i.to_dict() for i in issues]
    emit({"event": "findings", "findings": report.findings, "summary": ck.summarize(issues)})
    if fc is not None and len(fc.shape) == 2 and fc.shape[1] % ht:
        raise ck.BadInput(f"{fc.file}: fc.weight takes {fc.shape[1]} inputs, which is not a whole number of "
                          f"hidden states {ht} wide (expected number of aux states x target hidden size)")
    return _Draft(header, cfg, tcfg, tw, ht, num_layers, num_aux, issues)


def _head_available(d: _Draft) -> bool:
    tw = d.tw
    return tw is not None and (tw.role("lm_head") is not None or
                               (d.tcfg.get("tie_word_embeddings") is True and tw.role("embed") is not None))


def _read_data(opts: CheckOptions, d: _Draft, report: CheckReport, emit: Emit) -> Any:
    through_last = opts.labels != "tokens" and _head_available(d)
    data = ds_mod.load(opts.data, max_positions=opts.samples, max_len=opts.max_len, expect_slots=d.num_aux,
                       expect_hidden=d.ht, through_last=through_last)
    report.layout, report.files_read, report.files_total = data.layout, len(data.samples), data.total_files
    report.positions = data.positions
    report.framework = tr.framework_of_layout(data.layout)
    report.split = data.split
    report.notes.extend(data.notes)
    if data.split_note:
        report.notes.append(data.split_note)
    slot_b = list(opts.data_slots) if opts.data_slots is not None else None
    if slot_b is not None and len(slot_b) != data.num_slots:
        raise ck.BadInput(f"--data-slots names {len(slot_b)} boundaries but {data.files[0]} holds "
                          f"{data.num_slots} hidden-state slots")
    report.slot_boundaries = slot_b
    emit({"event": "data", "layout": data.layout, "files": len(data.samples), "files_total": data.total_files,
          "positions": data.positions, "slots": data.num_slots, "hidden": data.hidden_size, "notes": data.notes,
          "split": data.split})
    return data


def _assume_slots(d: _Draft, data: Any, probe: list[Any], report: CheckReport) -> list[int] | None:
    """speculators data without --data-slots: its generator's layout (aux ids, then the last layer N),
    unless a slot is the embedding output (then the files were written some other way)."""
    if report.slot_boundaries is not None or data.layout != "speculators":
        return report.slot_boundaries
    # each key's ids become boundaries by its own convention (nested: SGLang's +1; top-level: vLLM's)
    config_b, _convention = wr.config_boundaries(d.header.config)
    assumed, note = tr.speculators_slot_boundaries(data.num_slots, d.num_layers, config_b)
    if assumed is None:
        return None
    embed_slots = [p.slot for p in probe if p.embed_like]
    if embed_slots and 0 not in assumed:
        report.notes.append(f"slot {embed_slots[0]} is the embedding output, so these files do not follow "
                            f"speculators' generator layout: give --data-slots to name the slots' boundaries")
        return None
    report.notes.append(note)
    return list(assumed)


def _trained_embedding(tensors: dict[str, Any], embed: Any, d: _Draft, loader: tr.ServedLoader,
                       report: CheckReport) -> None:
    """A draft embedding that differs from the target's, where SGLang swaps in the target's: the served
    draft is not the trained one."""
    own = tensors.get("embed_tokens.weight")
    if own is None or own is embed or not loader.replaces_embedding or d.ht != int(own.shape[-1]):
        return
    if tuple(own.shape) != tuple(embed.shape):
        return
    diff = float((own.float() - embed.float()).abs().max())
    if diff > 1e-2 * max(1e-6, float(embed.float().abs().max())):
        report.findings.append(ck.CheckpointIssue("embedding", "embed_tokens.weight", (
            f"the draft's embed_tokens.weight differs from the target's embedding (max difference {diff:.3g}), "
            f"and {loader.name} replaces it with the target's: the served draft is not the trained one")).to_dict())


def _embedding(opts: CheckOptions, d: _Draft, tensors: dict[str, Any], report: CheckReport) -> Any:
    """The target's embedding (what SGLang feeds the draft), else the draft's own copy."""
    name = d.tw.role("embed") if d.tw is not None else None
    if d.tw is not None and name is not None:
        return d.tw.get(name)
    if "embed_tokens.weight" in tensors:
        report.notes.append("the target's embedding was taken from the draft's embed_tokens.weight")
        return tensors["embed_tokens.weight"]
    where = f" in {opts.target}" if opts.target else " (no --target given)"
    raise ck.BadInput(f"the draft in {opts.draft_dir} has no embed_tokens.weight and no target embedding was "
                      f"found{where}: the check needs the target's embedding (give --target DIR)")


def _wirings(opts: CheckOptions, d: _Draft, data: Any, report: CheckReport, final_slot: int | None) -> list[Any]:
    cfg_ids, cfg_read = wr.config_layer_ids(d.cfg)
    training = data.training_slots
    if len(training) != d.num_aux:
        report.notes.append(f"the {data.layout} trainer feeds {len(training)} slots but the draft's fc takes "
                            f"{d.num_aux}: 'training' uses the first {d.num_aux}")
        training = tuple(range(d.num_aux))
    try:
        return wr.candidate_wirings(num_slots=data.num_slots, num_aux=d.num_aux,
                                    slot_boundaries=report.slot_boundaries, num_layers=d.num_layers,
                                    config_ids=cfg_ids, config_ids_read=cfg_read, training_slots=training,
                                    extra=opts.wirings, final_slot=final_slot)
    except ValueError as err:
        raise ck.BadInput(str(err)) from None


def _target_head(d: _Draft, opts: CheckOptions, embed: Any) -> tuple[Any, str]:
    """The target's output head: lm_head, or its embedding on tied-embedding targets (Qwen3-0.6B/1.7B/4B,
    Llama-3.2-1B/3B have no lm_head.weight; the trainers use embed_tokens there)."""
    tw = d.tw
    if tw is None or (d.cfg.get("draft_vocab_size") is not None and opts.labels == "tokens"):
        return None, ""
    name = tw.role("lm_head")
    if name is not None:
        return tw.get(name), ""
    if d.tcfg.get("tie_word_embeddings") is True and tw.role("embed") is not None:
        return embed, "the target ties its embeddings (no lm_head.weight): embed_tokens is its output head"
    return None, ""


def _build(opts: CheckOptions, d: _Draft, tensors: dict[str, Any], embed: Any, head: Any, device: Any,
           dtype: Any) -> Any:
    try:
        model = _drafter_module().Eagle3Drafter.from_tensors(d.cfg, tensors, embed, target_lm_head=head)
    except ValueError as err:
        blocking = [i for i in d.issues if i.kind in ("shape", "fc-width", "missing")]
        why = blocking[0].message if blocking else str(err)
        raise ck.BadInput(f"cannot run the draft in {opts.draft_dir}: {why}") from None
    model = model.to(device=device, dtype=dtype)
    model.embed_weight = model.embed_weight.to(device=device, dtype=dtype)
    model.d2t = model.d2t.to(device)
    return model


def served_forward(trained: Any, cfg: dict, loader: tr.ServedLoader) -> Any:
    """The forward the serving engine runs on these weights: the trained one minus what its loader does
    not apply (an operation the draft does not use stays as trained, so equal forwards compare equal)."""
    if loader.engine == "vllm":
        return trained
    a = loader.applies
    theta = None
    scaling = trained.rope_scaling and "rope_scaling" in a
    if isinstance(cfg.get("rope_parameters"), dict) and not loader.reads_rope_parameters:
        scaling = scaling and cfg.get("rope_scaling") is not None
        if cfg.get("rope_theta") is None and cfg["rope_parameters"].get("rope_theta") not in (None, 10000.0):
            theta = 10000.0
    if cfg.get("rope_scaling") is None and _drafter_module().rope_config(cfg)[1] is None:
        scaling = trained.rope_scaling  # nothing to scale (transformers 5's default rope_parameters included)
    layers = cfg.get("num_hidden_layers")
    many = isinstance(layers, int) and layers > 1
    return _drafter_module().DraftForward(
        input_norm=trained.input_norm and "input_norm" in a,
        fc_norm=trained.fc_norm and "fc_norm" in a,
        norm_before_residual=trained.norm_before_residual and "norm_before_residual" in a,
        feed_normed=trained.feed_normed and "norm_output" in a,
        head_norm=True,
        qk_norm=trained.qk_norm and "qk_norm" in a,
        rope_scaling=scaling,
        extra_layers=trained.extra_layers and (loader.multi_layer or not many),
        rope_theta=theta,
    )


def _measure(model: Any, data: Any, labels: _Labels, wirings: list[Any], forwards: tuple[Any, Any, Any],
             opts: CheckOptions, device: Any, dtype: Any, emit: Emit, report: CheckReport) -> None:
    """Each distinct set of slots once per distinct forward among (served, other, trained)."""
    served, _other, trained = forwards
    distinct: list[Any] = []
    for f in forwards:
        if f not in distinct:
            distinct.append(f)
    runnable = [w for w in wirings if w.runnable]
    if device.type == "cuda" and stage_on_device(data, {k for w in runnable for k in w.slots}, device, dtype):
        report.notes.append("the sampled hidden states were staged on the GPU once for all wirings")
    unique: dict[tuple[int, ...], list[WiringResult]] = {}
    total = data.positions * len({w.slots for w in runnable}) * len(distinct)
    done = 0
    t_loop = time.perf_counter()
    for w in runnable:
        if w.slots in unique:
            continue
        runs: list[WiringResult] = []
        for fwd in distinct:
            model.fwd = fwd
            def progress(n: int, name: str = w.name, before: int = done) -> None:
                _progress(emit, n, total, t_loop, name, before)

            res = _evaluate(model, data, labels, w, opts, device, dtype, report.framework, progress=progress)
            done += res.positions
            runs.append(res)
        unique[w.slots] = runs
    model.fwd = trained
    pick = [distinct.index(f) for f in forwards]
    first: dict[tuple[int, ...], str] = {}
    for w in wirings:
        r = WiringResult(w.name, list(w.boundaries) if w.boundaries is not None else None, list(w.slots),
                         note=w.note, source=w.source)
        if w.runnable:
            runs = unique[w.slots]
            _fill(r, (runs[pick[0]], runs[pick[1]], runs[pick[2]]), report.other_by, trained_differs=served != trained)
            if w.slots in first and not r.note:
                r.note = f"same slots as {first[w.slots]}"
            first.setdefault(w.slots, w.name)
        report.wirings.append(r)
        emit({"event": "result", "result": asdict(r)})
    measured = [r.positions for r in report.wirings if r.top1 is not None]
    if measured:
        report.positions = max(measured)


def _numbers(res: WiringResult) -> dict:
    return {"top1": res.top1, "top5": res.top5, "step_accept": res.step_accept,
            "predicted_accept_len": res.predicted_accept_len}


def _fill(r: WiringResult, results: tuple[WiringResult, WiringResult, WiringResult], other_by: str,
          *, trained_differs: bool) -> None:
    """`results`: the (served, other, trained) forwards' measurements of one wiring."""
    served, other, trained = results
    r.top1, r.top5, r.step_accept = served.top1, served.top5, served.step_accept
    r.predicted_accept_len, r.tokens_per_s = served.predicted_accept_len, served.tokens_per_s
    r.positions, r.chain_positions = served.positions, served.chain_positions
    # the trainer measured its own forward: its metric comes from that pass
    r.trainer = trained.trainer
    if trained_differs:
        r.as_trained = _numbers(trained)
    r.other = {"by": other_by, **_numbers(other)}


def _progress(emit: Emit, n: int, total: int, t0: float, name: str, before: int) -> None:
    done = before + n
    el = time.perf_counter() - t0
    eta = el / done * (total - done) if done else None
    emit({"event": "progress", "done": done, "total": total, "eta_s": None if eta is None else round(eta, 2),
          "wiring": name})


def _load_draft(header: ck.CheckpointHeader) -> dict[str, Any]:
    """All draft tensors under SGLang names: a `model.` prefix dropped, speculators' `layers.0.` read as
    `midlayer.` (so the draft can be measured as trained; the findings say SGLang would skip them).
    safetensors files, or `.bin` state dicts loaded with torch (weights only)."""
    out: dict[str, Any] = {}
    for p in header.files:
        for name, t in _load_weights(p).items():
            n = name[len("model."):] if name.startswith("model.") else name
            if n.startswith("layers.0."):
                n = "midlayer." + n[len("layers.0."):]
            out[n] = t
    return out


def _load_weights(path: str) -> dict[str, Any]:
    if not path.endswith(".safetensors"):
        sd = ck.torch_load(path, path, "a torch state dict", mmap=False)
        if not isinstance(sd, dict):
            raise ck.BadInput(f"{path} is not a state dict (it holds a {type(sd).__name__})")
        return dict(sd)
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    try:
        return load_file(path)
    except (SafetensorError, OSError, ValueError) as err:
        raise ck.BadInput(f"{path} could not be loaded as safetensors ({str(err)[:160]})") from None


def _drafter_module() -> Any:
    from eagle3_tui.eagle import drafter  # torch at import: only when the check runs

    return drafter


def _token_labels(data: Any) -> list[Any]:
    import torch

    out = []
    for s in data.samples:
        nxt = torch.full_like(s.input_ids, -1)
        nxt[:-1] = s.input_ids[1:]
        out.append(nxt)
    return out


def _labels(data: Any, mode: str, d: _Draft, head: Any, model: Any, slot_b: list[int] | None,
            device: Any) -> _Labels:
    """The labels the check scores against, and where they came from.

    `target` labels are the target's own greedy token, what acceptance depends on: argmax of its
    head over its final state, taken from SpecForge's stored (post-norm) state, from a speculators
    slot at boundary N (pre-norm, through the target's final norm), or by running the target's
    remaining dense layers from the deepest slot the data holds ("target-tail"). `tokens` are the
    data's own next token (the same as the target's only for regenerated data).
    """
    if mode == "tokens":
        return _Labels(_token_labels(data), None, "tokens")
    finals, normed, source, why = _final_states(data, d, head, slot_b, device)
    if finals is None:
        if mode == "target":
            raise ck.BadInput(f"--labels target cannot be computed: {why}")
        return _Labels(_token_labels(data), None, "tokens",
                       f"accuracy is measured against the data's own tokens, not the target's predictions: {why}")
    norm_name = d.tw.role("norm") if d.tw is not None else None
    norm_w = d.tw.get(norm_name).to(device).float() if (not normed and d.tw is not None and norm_name) else None
    eps = float(d.tcfg.get("rms_norm_eps") or 1e-6)
    d2t = model.d2t.cpu() if model.draft_vocab_size < head.shape[0] else None
    full, inv = _argmax_labels(finals, head.to(device=device).float(), norm_w, eps, d2t, device)
    return _Labels(full, inv, source, why)


def _final_states(data: Any, d: _Draft, head: Any, slot_b: list[int] | None,
                  device: Any) -> tuple[list[Any] | None, bool, str, str]:
    """(per sample [T, H] final states | None, already normed, source, note)."""
    tw, n = d.tw, d.num_layers
    if head is None:
        return None, False, "", "no target lm_head was found (give --target with the target's weights)"
    if data.layout == "specforge" and all(s.final is not None for s in data.samples):
        return [s.final for s in data.samples], True, "target", ""
    if tw is None or tw.role("norm") is None:
        return None, False, "", "the target's final norm weight was not found"
    if slot_b is None or n is None:
        return None, False, "", ("the data's slot boundaries or the target's layer count are unknown "
                                 "(give --data-slots, --target)")
    deepest = max(range(len(slot_b)), key=lambda i: slot_b[i])
    b = slot_b[deepest]
    if b == n:
        return [s.slots[deepest] for s in data.samples], False, "target", ""
    tail, why = _TargetTail.build(tw, d.tcfg, b, n)
    if tail is None:
        return None, False, "", why
    tail = tail.to(device)
    return ([tail(s.slots[deepest]) for s in data.samples], False, "target-tail",
            f"target labels: the target's layers {b}..{n - 1} were run on the data's boundary {b} to get its "
            f"final state")


def _argmax_labels(finals: list[Any], head: Any, norm_w: Any, eps: float, d2t: Any,
                   device: Any) -> tuple[list[Any], list[Any] | None]:
    """The head's argmax per position, over the full vocabulary and restricted to the draft vocabulary
    (the target ids `arange + d2t` names: speculators' `t2d` rows)."""
    import torch

    vocab = torch.arange(d2t.shape[0]) + d2t if d2t is not None else None
    full, inv = [], []
    sub = head[vocab.to(device)] if vocab is not None else None
    for x in finals:
        toks, toks_in = [], []
        for i in range(0, x.shape[0], 512):
            xi = x[i : i + 512].to(device=device, dtype=torch.float32)
            if norm_w is not None:
                xi = xi * torch.rsqrt(xi.pow(2).mean(-1, keepdim=True) + eps) * norm_w
            toks.append((xi @ head.T).argmax(-1).cpu())
            if sub is not None and vocab is not None:
                toks_in.append(vocab[(xi @ sub.T).argmax(-1).cpu()])
        full.append(torch.cat(toks))
        inv.append(torch.cat(toks_in) if sub is not None else full[-1])
    return full, inv


class _TargetTail:
    """The target's dense decoder layers [start, N) (Llama/Qwen2/Qwen3/Mistral naming) run on a stored
    boundary, to recover the final state a data set did not keep. Not for MoE or MLA targets."""

    def __init__(self, layers: list[dict], cfg: dict) -> None:
        self.layers = layers
        h = int(cfg["hidden_size"])
        self.heads = int(cfg["num_attention_heads"])
        self.kv_heads = int(cfg.get("num_key_value_heads") or self.heads)
        self.head_dim = int(cfg.get("head_dim") or h // self.heads)
        self.eps = float(cfg.get("rms_norm_eps") or 1e-6)
        dm = _drafter_module()
        theta, scaling = dm.rope_config(cfg)
        self.rotary = dm.Rotary(self.head_dim, theta, scaling, int(cfg.get("max_position_embeddings") or 2048))
        self.device: Any = "cpu"

    @classmethod
    def build(cls, tw: TargetWeights | None, cfg: dict, start: int, n: int) -> tuple[_TargetTail | None, str]:
        if tw is None:
            return None, "no target weights"
        try:
            _drafter_module().rope_inv_freq(8, 10000.0, _drafter_module().rope_config(cfg)[1])
        except (ValueError, KeyError, TypeError):
            return None, f"the target's rope scaling {cfg.get('rope_scaling')!r} is not one the tail models"
        if not all(isinstance(cfg.get(k), int) for k in ("hidden_size", "num_attention_heads")):
            return None, "the target config lacks hidden_size / num_attention_heads"
        embed = tw.role("embed") or "model.embed_tokens.weight"
        base = embed[: -len("embed_tokens.weight")]
        need = ("input_layernorm.weight", "self_attn.q_proj.weight", "self_attn.k_proj.weight",
                "self_attn.v_proj.weight", "self_attn.o_proj.weight", "post_attention_layernorm.weight",
                "mlp.gate_proj.weight", "mlp.up_proj.weight", "mlp.down_proj.weight")
        optional = ("self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias",
                    "self_attn.q_norm.weight", "self_attn.k_norm.weight")
        layers = []
        for i in range(start, n):
            pre = f"{base}layers.{i}."
            missing = [k for k in need if not tw.has(pre + k)]
            if missing:
                return None, (f"the target's layer {i} has no {pre + missing[0]} (the tail runs dense "
                              f"Llama-style layers only)")
            layers.append({k: tw.get(pre + k).float() for k in need + optional if tw.has(pre + k)})
        return cls(layers, cfg), ""

    def to(self, device: Any) -> _TargetTail:
        self.layers = [{k: v.to(device) for k, v in d.items()} for d in self.layers]
        self.device = device
        return self

    def _rms(self, x: Any, w: Any) -> Any:
        import torch

        return w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))

    def __call__(self, hidden: Any) -> Any:
        """[T, H] boundary state -> [T, H] final pre-norm state (causal over the sequence)."""
        import torch
        import torch.nn.functional as F

        apply_rope = _drafter_module().apply_rope
        x = hidden.to(device=self.device, dtype=torch.float32)[None]
        t = x.shape[1]
        cos, sin = self.rotary(torch.arange(t, device=self.device)[None], torch.float32)
        with torch.inference_mode():
            for w in self.layers:
                z = self._rms(x, w["input_layernorm.weight"])
                q = F.linear(z, w["self_attn.q_proj.weight"], w.get("self_attn.q_proj.bias"))
                k = F.linear(z, w["self_attn.k_proj.weight"], w.get("self_attn.k_proj.bias"))
                v = F.linear(z, w["self_attn.v_proj.weight"], w.get("self_attn.v_proj.bias"))
                q = q.view(1, t, self.heads, self.head_dim).transpose(1, 2)
                k = k.view(1, t, self.kv_heads, self.head_dim).transpose(1, 2)
                v = v.view(1, t, self.kv_heads, self.head_dim).transpose(1, 2)
                if "self_attn.q_norm.weight" in w:
                    q = self._rms(q, w["self_attn.q_norm.weight"])
                    k = self._rms(k, w["self_attn.k_norm.weight"])
                q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
                if self.kv_heads != self.heads:
                    rep = self.heads // self.kv_heads
                    k, v = k.repeat_interleave(rep, 1), v.repeat_interleave(rep, 1)
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                x = x + F.linear(o.transpose(1, 2).reshape(1, t, -1), w["self_attn.o_proj.weight"])
                m = self._rms(x, w["post_attention_layernorm.weight"])
                x = x + F.linear(F.silu(F.linear(m, w["mlp.gate_proj.weight"])) * F.linear(m, w["mlp.up_proj.weight"]),
                                 w["mlp.down_proj.weight"])
        return x[0].cpu()


def stage_on_device(data: Any, slots: set[int], device: Any, dtype: Any, share: float = 0.4) -> bool:
    """Move the slots the wirings read to the GPU once, if they take under `share` of its free memory,
    so each wiring's batches are assembled there instead of copied from the host every time."""
    import torch

    size = torch.tensor([], dtype=dtype).element_size()
    need = sum(s.slots[k].shape[0] * s.slots[k].shape[1] * size for s in data.samples for k in slots)
    free, _ = torch.cuda.mem_get_info(device)
    if need > share * free:
        return False
    for s in data.samples:
        s.slots = [x.to(device=device, dtype=dtype) if i in slots else x for i, x in enumerate(s.slots)]
    return True


def _batches(data: Any, batch_tokens: int) -> list[list[int]]:
    """Sample indices grouped so that (longest sequence x count) stays under `batch_tokens`."""
    batches: list[list[int]] = []
    cur: list[int] = []
    cur_max = 0
    for i, s in enumerate(data.samples):
        t = s.length
        if cur and max(cur_max, t) * (len(cur) + 1) > batch_tokens:
            batches.append(cur)
            cur, cur_max = [], 0
        cur.append(i)
        cur_max = max(cur_max, t)
    if cur:
        batches.append(cur)
    return batches


def _assemble(data: Any, b: list[int], labels: _Labels, w: Any, steps: int, dtype: Any) -> tuple[Any, ...]:
    """(ids, aux, labels, in-vocab labels, counted) for one batch, padded to its longest sequence."""
    import torch

    smp = [data.samples[i] for i in b]
    tmax = max(s.length for s in smp)
    bsz, hs = len(smp), data.hidden_size
    ids = torch.zeros(bsz, tmax, dtype=torch.long)
    # aux is assembled where the slots live (on the GPU when `stage_on_device` put them there)
    aux = torch.zeros(bsz, tmax, len(w.slots) * hs, dtype=dtype, device=smp[0].slots[0].device)
    lab = torch.full((bsz, tmax + steps + 1), -1, dtype=torch.long)
    lab_in = lab.clone()
    counted = torch.zeros(bsz, tmax, dtype=torch.bool)
    for j, s in enumerate(smp):
        t = s.length
        ids[j, : t - 1] = s.input_ids[1:]  # position t reads token x_{t+1}
        for c, k in enumerate(w.slots):
            aux[j, :t, c * hs : (c + 1) * hs] = s.slots[k]
        lab[j, :t] = labels.full[b[j]]
        lab_in[j, :t] = (labels.in_vocab or labels.full)[b[j]]
        counted[j, :t] = s.counted
    return ids, aux, lab, lab_in, counted


def _evaluate(model: Any, data: Any, labels: _Labels, w: Any, opts: CheckOptions, device: Any, dtype: Any,
              framework: str | None, progress: Callable[[int], None]) -> WiringResult:
    """Top-1/top-5, the chain simulation and the trainer's own metric for one wiring, batched causal
    over whole sequences."""
    import torch

    steps = max(1, opts.steps)
    n_top1 = n_top5 = n_pos = n_chain = fwd_tokens = 0
    chain_runs = [0] * steps
    fwd_s = 0.0
    counts = tr.TrainerCounts(framework, steps)
    with torch.inference_mode():
        for b in _batches(data, opts.batch_tokens):
            ids, aux, lab, lab_in, counted = _assemble(data, b, labels, w, steps, dtype)
            ids, aux = ids.to(device), aux.to(device)
            if device.type == "cuda":
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            outs = model.chain_forward(ids, aux, steps)
            # step 0's top-1 is the first of its top-5 (one selection pass instead of two)
            top5 = model.to_target_ids(outs[0].topk(min(5, outs[0].shape[-1]), dim=-1).indices)
            preds = [top5[..., 0]] + [model.to_target_ids(o.argmax(-1)) for o in outs[1:]]
            if device.type == "cuda":
                torch.cuda.synchronize()
            fwd_s += time.perf_counter() - t0
            fwd_tokens += sum(data.samples[i].length for i in b) * steps
            preds = [p.cpu() for p in preds]
            top5 = top5.cpu()
            # step s at t predicts the target's token after x_{t+1+s}: label index t+1+s
            idx = torch.arange(counted.shape[1])
            lab0 = lab[:, idx + 1]
            ok0 = counted & (lab0 >= 0)
            n_pos += int(ok0.sum())
            n_top1 += int(((preds[0] == lab0) & ok0).sum())
            n_top5 += int(((top5 == lab0[..., None]).any(-1) & ok0).sum())
            counts.add(preds, lab if framework == "specforge" else lab_in, ok0)
            valid = ok0.clone()
            for s_ in range(steps):
                valid &= lab[:, idx + 1 + s_] >= 0
            n_chain += int(valid.sum())
            run = valid
            for s_ in range(steps):
                run = run & (preds[s_] == lab[:, idx + 1 + s_])
                chain_runs[s_] += int(run.sum())
            progress(n_pos)
    cond, tau = chain_acceptance(chain_runs, n_chain)
    metric = counts.metric()
    if framework is not None and labels.source == "tokens":
        metric.definition += " (here against the data's own tokens: no target head was available)"
    return WiringResult(
        w.name, list(w.boundaries) if w.boundaries is not None else None, list(w.slots),
        top1=round(n_top1 / n_pos, 4) if n_pos else None,
        top5=round(n_top5 / n_pos, 4) if n_pos else None,
        step_accept=[round(a, 4) for a in cond],
        predicted_accept_len=round(tau, 4),
        tokens_per_s=round(fwd_tokens / fwd_s, 1) if fwd_s > 0 else None,
        positions=n_pos, chain_positions=n_chain, note=w.note, source=w.source, trainer=metric.to_dict(),
    )


def chain_acceptance(runs: Sequence[int], positions: int) -> tuple[list[float], float]:
    """From `runs[i]` = positions whose drafts 1..i+1 were all right: conditional a_i and tau.

    a_i = runs[i] / runs[i-1] (P(draft i accepted | drafts before it were)); with r_i = runs[i] /
    positions = prod_{j<=i} a_j, tau = 1 + sum_i r_i (the verifier always adds one token).
    """
    if positions <= 0:
        return [0.0 for _ in runs], 1.0
    cond: list[float] = []
    prev = positions
    for r in runs:
        cond.append(r / prev if prev > 0 else 0.0)
        prev = r
    return cond, 1.0 + sum(r / positions for r in runs)


# -- script entry ----------------------------------------------------------------------------------


def _slots(text: str | None) -> list[int] | None:
    try:
        slots = wr.parse_slots(text)
    except ValueError as err:
        raise SystemExit(f"--data-slots: {err}") from None
    return list(slots) if slots is not None else None


def parse_args(argv: Sequence[str] | None = None) -> tuple[CheckOptions, bool]:
    import argparse

    p = argparse.ArgumentParser(prog="accuracy.py", description=__doc__.splitlines()[0])
    p.add_argument("--draft", required=True)
    p.add_argument("--data", required=True)
    p.add_argument("--target")
    p.add_argument("--wiring", action="append", default=[])
    p.add_argument("--samples", type=int, default=20000)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--device", default="cpu")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--data-slots")
    p.add_argument("--num-layers", type=int)
    p.add_argument("--labels", default="auto", choices=["auto", "target", "tokens"])
    p.add_argument("--max-len", type=int, default=4096)
    p.add_argument("--batch-tokens", type=int, default=16384)
    p.add_argument("--threads", type=int)
    p.add_argument("--predict", action="append", default=[], metavar="S,K,D")
    p.add_argument("--served-loader", metavar="JSON", help="the serving engine's loader (ServedLoader.to_dict)")
    p.add_argument("--other-loader", metavar="JSON", help="the loader whose numbers are shown beside")
    p.add_argument("--no-stdin-watch", action="store_true", help="keep running when stdin closes")
    a = p.parse_args(argv)
    opts = CheckOptions(a.draft, a.data, a.target, a.wiring, a.samples, a.steps, a.device, a.dtype,
                        _slots(a.data_slots), a.num_layers, a.labels, a.max_len,
                        a.batch_tokens, a.threads)
    try:
        opts.predict = [SpecConfig.parse(c) for c in a.predict]
        opts.served = _loader_arg(a.served_loader)
        opts.other = _loader_arg(a.other_loader)
    except ValueError as err:
        raise SystemExit(str(err)) from None
    return opts, not a.no_stdin_watch


def _loader_arg(text: str | None) -> tr.ServedLoader | None:
    if not text:
        return None
    try:
        return tr.ServedLoader.from_dict(json.loads(text))
    except json.JSONDecodeError:
        raise ValueError(f"--served-loader/--other-loader: {text[:60]!r} is not JSON") from None


def _watch_stdin() -> None:
    """End the process when stdin reaches EOF: the caller (an SSH channel) is gone."""
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except (OSError, ValueError):
        pass
    os._exit(0)


def main(argv: Sequence[str] | None = None) -> int:
    opts, watch = parse_args(argv)
    if watch:
        threading.Thread(target=_watch_stdin, daemon=True).start()
    lock = threading.Lock()

    def emit(event: dict) -> None:
        line = json.dumps(event, default=_json_default)
        with lock:
            try:
                sys.stdout.write(line + "\n")
                sys.stdout.flush()
            except BrokenPipeError:
                os._exit(0)

    for mod in ("torch", "safetensors"):
        try:
            __import__(mod)
        except Exception as err:
            emit({"event": "error", "kind": "input", "message": (
                f"{sys.executable} cannot import {mod} ({err}): the check needs torch and safetensors")})
            return 2
    try:
        run_check(opts, emit)
    except ck.BadInput as err:
        emit({"event": "error", "kind": "input", "message": str(err)})
        return 2
    except MemoryError:
        emit({"event": "error", "kind": "memory", "message": "out of memory: lower --samples or --batch-tokens"})
        return 3
    except Exception as err:  # report, never a bare traceback on the wire
        import traceback

        emit({"event": "error", "kind": "internal", "message": f"{type(err).__name__}: {err}",
              "traceback": traceback.format_exc().splitlines()[-8:]})
        return 1
    return 0


def _json_default(o: Any) -> Any:
    if isinstance(o, float) and not math.isfinite(o):
        return None
    if isinstance(o, tuple):
        return list(o)
    return str(o)


if __name__ == "__main__":
    sys.exit(main())
