"""What the two big trainers (SpecForge, speculators) mean by their numbers and their files, and what the
SGLang draft loader applies: the facts the check needs to compare "74.7% in training" with the same definition.

* SpecForge (`specforge/algorithms/eagle3/model.py`, `_acc_and_loss`): per TTT step k, unconditional:
  the draft's argmax mapped through d2t equals the target's full-vocabulary argmax, over the loss mask
  shifted k positions (a target token outside the draft vocabulary is a miss).
* speculators (`src/speculators/models/eagle3/metrics.py`, `models/metrics.py`): argmaxes compared inside
  the draft vocabulary (the target's logits restricted to t2d); `full_acc_k` counts positions right on
  every step 0..k (joint), `cond_acc_k` divides that by the positions right through step k-1.
* SGLang accepts a draft token when it equals the target's full-vocabulary argmax: the check's served
  top-1 and chain use that (its per-step numbers are speculators' conditional shape, in SGLang's vocabulary).

speculators' data generator captures vLLM's default aux layers (2, N//2, N-3) plus the last layer N
(`scripts/launch_vllm.py`: `[2, N//2, N-3, N]`, vLLM counting, boundary = id); its trainer validates on the
last `1 - train_data_ratio` (default 0.1) of the rows (`train/data.py` `ArrowDataset`, `dataloader.py`).

Stdlib only at import (torch is imported inside the counting code): it ships in the check's zip.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

SPECFORGE_DEFINITION = (
    "SpecForge acc_k: per TTT step k, unconditional; the draft's argmax mapped through d2t equals the "
    "target's full-vocabulary argmax, over the loss mask shifted k positions (out-of-vocabulary target = miss)")
SPECULATORS_DEFINITION = (
    "speculators full_acc_k: the draft's argmax equals the target's argmax restricted to the draft vocabulary "
    "(t2d), right on every step 0..k (joint), over the loss mask; cond_acc_k divides by those right through k-1")

# speculators' trainer: train_data_ratio default (scripts/train.py, train/dataloader.py)
SPECULATORS_TRAIN_RATIO = 0.9


@dataclass(frozen=True)
class ServedLoader:
    """What the installed SGLang's EAGLE-3 draft loader does with a checkpoint (issue 11's model fills it in
    for the installed release; the default is SGLang 0.5.6's `llama_eagle3.py`).

    `applies` names the optional operations its forward runs (input_norm, fc_norm, norm_before_residual,
    norm_output, qk_norm, rope_scaling: drafter.DraftForward's fields); `num_aux` is the fc
    width in aux states it builds (None: from the config ids); `multi_layer`: it runs more than one
    draft layer; `replaces_embedding`: it swaps in the target's embedding when the widths match.
    """

    name: str = "SGLang 0.5.6"
    layers_prefix: str = "midlayer."
    multi_layer: bool = False
    applies: frozenset[str] = frozenset({"rope_scaling"})
    num_aux: int | None = 3
    replaces_embedding: bool = True
    architectures: tuple[str, ...] = ("LlamaForCausalLMEagle3",)
    reads_rope_parameters: bool = False
    mla: bool = False
    """It loads the MLA EAGLE-3 draft (`Eagle3DeepseekV2ForCausalLM`, SGLang >= 0.5.12)."""
    engine: str = "sglang"
    """The engine whose loader this is: "sglang" or "vllm" (vLLM runs a draft as it was trained)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON-able (it crosses to the host on the check's command line)."""
        return {"name": self.name, "layers_prefix": self.layers_prefix, "multi_layer": self.multi_layer,
                "applies": sorted(self.applies), "num_aux": self.num_aux,
                "replaces_embedding": self.replaces_embedding, "architectures": list(self.architectures),
                "reads_rope_parameters": self.reads_rope_parameters, "mla": self.mla, "engine": self.engine}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ServedLoader:
        """The inverse of `to_dict`; ValueError (one sentence) for a value of the wrong kind."""
        if not isinstance(d, dict) or d.get("engine") not in ("sglang", "vllm"):
            raise ValueError("a served loader is a JSON object with engine \"sglang\" or \"vllm\"")
        num_aux = d.get("num_aux")
        return cls(
            name=str(d.get("name") or d["engine"]), layers_prefix=str(d.get("layers_prefix") or "midlayer."),
            multi_layer=bool(d.get("multi_layer")), applies=frozenset(str(a) for a in d.get("applies") or ()),
            num_aux=int(num_aux) if isinstance(num_aux, int) else None,
            replaces_embedding=bool(d.get("replaces_embedding", True)),
            architectures=tuple(str(a) for a in d.get("architectures") or ("LlamaForCausalLMEagle3",)),
            reads_rope_parameters=bool(d.get("reads_rope_parameters")), mla=bool(d.get("mla")),
            engine=str(d["engine"]))


SGLANG_0_5_6 = ServedLoader()
# Every optional operation of drafter.DraftForward that a loader can apply (ServedLoader.applies' names).
ALL_OPERATIONS = frozenset({"input_norm", "fc_norm", "norm_before_residual", "norm_output", "qk_norm", "rope_scaling"})


def vllm_loader(release: str | None = None) -> ServedLoader:
    """vLLM's EAGLE-3 draft (`model_executor/models/llama_eagle3.py`): it builds the draft from the
    speculators config and runs every norm the draft was trained with, all its layers, fc sized from the
    checkpoint; the measured proof is the real_vllm lane (a speculators-trained draft served as trained)."""
    return ServedLoader(name=f"vLLM {release}" if release else "vLLM", layers_prefix="layers.", multi_layer=True,
                        applies=ALL_OPERATIONS, num_aux=None, reads_rope_parameters=True, engine="vllm",
                        architectures=("Eagle3LlamaForCausalLM", "LlamaForCausalLMEagle3", "Eagle3Speculator",
                                       "Eagle3DraftModel"))


def framework_of_layout(layout: str) -> str | None:
    """The trainer whose files these are (its metric is reported beside ours)."""
    if layout == "specforge":
        return "specforge"
    if layout in ("speculators", "speculators-v1"):
        return "speculators"
    return None


def speculators_slot_boundaries(num_slots: int, num_layers: int | None,
                                config_boundaries: Sequence[int] | None) -> tuple[tuple[int, ...] | None, str]:
    """The boundaries of a speculators `hs_*.safetensors` file's slots, when they can be inferred.

    The generator stores the configured aux ids (vLLM counting: boundary = id) then the last layer N;
    a speculators draft config records the ids it was trained on, else vLLM's default (2, N//2, N-3).
    `config_boundaries` are the draft config's ids already turned into boundaries by the convention of
    the key they sit in (`wiring.config_boundaries`): an SGLang-named draft's nested ids are one less.
    """
    if num_layers is None:
        return None, ""
    n = num_layers
    if config_boundaries and len(config_boundaries) + 1 == num_slots:
        b = (*sorted(int(i) for i in config_boundaries), n)
        return b, (f"assumed the data's slots hold boundaries {', '.join(map(str, b))}: the draft config's "
                   f"eagle_aux_hidden_state_layer_ids plus the last layer {n}, as speculators' generator stores them")
    if num_slots == 4:
        b = (2, n // 2, n - 3, n)
        return b, (f"assumed the data's slots hold boundaries {', '.join(map(str, b))}: speculators' generator "
                   f"default (vLLM's 2, N//2, N-3 plus the last layer N); give --data-slots if it was configured otherwise")
    return None, ""


def validation_indices(n_rows: int, train_ratio: float = SPECULATORS_TRAIN_RATIO) -> range:
    """Row (= hs file) indices speculators' trainer validates on: the rows from int(n * ratio) on."""
    return range(int(n_rows * train_ratio), n_rows)


@dataclass
class TrainerMetric:
    framework: str | None
    definition: str
    acc: list[float] = field(default_factory=list)
    cond_acc: list[float] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"framework": self.framework, "definition": self.definition, "acc": self.acc}
        if self.cond_acc:
            d["cond_acc"] = self.cond_acc
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None) -> TrainerMetric | None:
        if not isinstance(d, dict):
            return None
        return cls(d.get("framework"), str(d.get("definition", "")), list(d.get("acc") or []),
                   list(d.get("cond_acc") or []))


class TrainerCounts:
    """Counts for one trainer's per-step accuracy, accumulated over batches.

    Index convention (the check's): draft position t at step s predicts label index t+1+s; `base` [B, T]
    marks the positions step 0 scores (loss mask at the trainer's alignment, label known).
    """

    def __init__(self, framework: str | None, steps: int) -> None:
        self.framework = framework
        self.steps = steps
        self.num = [0] * steps
        self.den = [0] * steps
        self.cond_den = [0] * steps

    def add(self, preds: Sequence[Any], labels: Any, base: Any) -> None:
        """`preds[s]` [B, T] target ids; `labels` [B, T + steps + 1] (-1 unknown); `base` bool [B, T]."""
        import torch

        t = base.shape[1]
        idx = torch.arange(t)
        if self.framework == "specforge":
            for s in range(self.steps):
                m = _shifted(base, s)
                self.num[s] += int(((preds[s] == labels[:, idx + 1 + s]) & m).sum())
                self.den[s] += int(m.sum())
            return
        run = base.clone()
        for s in range(self.steps):
            # speculators slices both to the positions whose step-s target exists (align_for_step)
            self.cond_den[s] += int((run & (labels[:, idx + 1 + s] >= 0)).sum())
            run &= preds[s] == labels[:, idx + 1 + s]
            m = _shifted(base, s)
            self.num[s] += int((run & m).sum())
            self.den[s] += int(m.sum())

    def metric(self) -> TrainerMetric:
        if self.framework is None:
            return TrainerMetric(None, "")
        acc = [_ratio(self.num[s], self.den[s]) for s in range(self.steps)]
        if self.framework == "specforge":
            return TrainerMetric("specforge", SPECFORGE_DEFINITION, acc)
        cond = [_ratio(self.num[s], self.cond_den[s]) for s in range(self.steps)]
        return TrainerMetric("speculators", SPECULATORS_DEFINITION, acc, cond)


def _ratio(n: int, d: int) -> float:
    return round(n / d, 4) if d else 0.0


def _shifted(mask: Any, s: int) -> Any:
    """mask[:, t + s] at t (False past the end): the loss mask a trainer applies at step s."""
    if s == 0:
        return mask
    out = mask.new_zeros(mask.shape)
    out[:, : mask.shape[1] - s] = mask[:, s:]
    return out
