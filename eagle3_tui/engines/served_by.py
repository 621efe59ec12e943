"""Which engine and release serve the draft, as the check models it: `--served-by sglang==X|vllm==Y`.

The check's headline follows the serving engine's draft loader (eagle/trainers.py `ServedLoader`).
vLLM runs a draft as it was trained (its norms applied). An SGLang release runs what its
`llama_eagle3.py` applies: the installed source when the session read it, else the release table
(sglang/installed/table.py, read from the released wheels). No SGLang release read applies
`norm_before_residual`, so for a draft trained with it there is no release to upgrade to.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from eagle3_tui.eagle.checkpoint import MLA_DRAFT
from eagle3_tui.eagle.trainers import ServedLoader, vllm_loader
from eagle3_tui.errors import UserError
from eagle3_tui.sglang.installed import table
from eagle3_tui.sglang.installed.loader import FC_NORM, NORM_BEFORE_FC, NORM_OUTPUT, DraftLoader
from eagle3_tui.sglang.installed.source import version_key

EAGLE3_DRAFT = "LlamaForCausalLMEagle3"
DEFAULT_SGLANG = "0.5.6"
"""The release the check models when the engine is SGLang and its release is not known."""

# drafter.DraftForward's operation -> what an SGLang draft loader must apply to run it
_NEEDS: dict[str, str] = {"input_norm": NORM_BEFORE_FC, "fc_norm": FC_NORM, "feed_normed": NORM_OUTPUT,
                          "extra_layers": "multi_layer"}
# ServedLoader.applies' name for each DraftLoader norm
_APPLIES: dict[str, str] = {NORM_BEFORE_FC: "input_norm", FC_NORM: "fc_norm", NORM_OUTPUT: "norm_output"}


@dataclass(frozen=True)
class ServedBy:
    engine: str  # "sglang" | "vllm"
    release: str | None

    def __str__(self) -> str:
        return f"{self.engine}=={self.release}" if self.release else self.engine


def parse_served_by(text: str) -> ServedBy:
    """`sglang==0.5.6`, `vllm==0.32.0` (or a bare engine name); UserError in one sentence otherwise."""
    raw = text.strip()
    engine, sep, release = raw.partition("==")
    engine = engine.strip().lower()
    release = release.strip()
    bad = (f"--served-by {text!r}: expected sglang==VERSION or vllm==VERSION (e.g. sglang==0.5.6, "
           f"vllm==0.32.0)")
    if engine not in ("sglang", "vllm") or (sep and not release):
        raise UserError(bad)
    if release and version_key(release)[0] < 0:
        raise UserError(bad)
    return ServedBy(engine, release or None)


def _turned_on(config: Mapping[str, Any], norm: str) -> bool:
    """Whether a draft config turns on an optional norm of SGLang's loader (its own keys for each)."""
    eagle = config.get("eagle_config")
    nested = eagle if isinstance(eagle, Mapping) else {}
    if norm == FC_NORM:
        return bool(config.get("fc_norm") or config.get("use_aux_norm"))
    if norm == NORM_BEFORE_FC:
        return bool(config.get(NORM_BEFORE_FC) or nested.get(NORM_BEFORE_FC))
    return bool(config.get(norm))


def sglang_loader(
    version: str | None,
    read: DraftLoader | None = None,
    *,
    config: Mapping[str, Any] | None = None,
    classes: Sequence[str] = (),
    name: str | None = None,
) -> ServedLoader:
    """An SGLang release's draft loader: `read` (from the installed source) when given, else the release
    table's row for `version` (0.5.6 when it is unknown). The check models every norm the release can
    apply; the doctor passes the draft `config` (only the norms it turns on) and the release's draft
    `classes` (which architectures load, MLA among them)."""
    release = version or DEFAULT_SGLANG
    dl = read if read is not None else table.draft_loader(release)
    norms = [a for a in dl.applies if a in _APPLIES and (config is None or _turned_on(config, a))]
    extra: dict[str, Any] = {}
    if classes:
        extra = {"architectures": tuple(c for c in classes if c != MLA_DRAFT) or (EAGLE3_DRAFT,),
                 "mla": MLA_DRAFT in classes}
    return ServedLoader(name=name or f"SGLang {release}", layers_prefix="layers." if dl.layers_prefix else "midlayer.",
                        multi_layer=dl.multi_layer, applies=frozenset({"rope_scaling", *(_APPLIES[a] for a in norms)}),
                        num_aux=None if dl.fc_from_ids else 3, **extra)


def loader_for(served: ServedBy, read: DraftLoader | None = None) -> ServedLoader:
    """The loader whose numbers lead the check for this engine and release."""
    if served.engine == "vllm":
        return vllm_loader(served.release)
    return sglang_loader(served.release, read)


def upgrade_hint(dropped: Sequence[str], served: ServedBy) -> str:
    """What to do about the operations an SGLang release drops: the first release read that applies them
    all ("upgrade to X"), or, when none does, that none does. "" for vLLM or nothing dropped."""
    if served.engine != "sglang" or not dropped:
        return ""
    never = [d for d in dropped if d not in _NEEDS]
    span = f"{table.READ_VERSIONS[0]} to {table.LATEST}"
    if never:
        return (f"no SGLang release read ({span}) applies {', '.join(never)}: vLLM runs this draft as trained")
    now = version_key(served.release or DEFAULT_SGLANG)
    for v in table.READ_VERSIONS:
        if version_key(v) <= now:
            continue
        dl = table.draft_loader(v)
        if all(dl.multi_layer if _NEEDS[d] == "multi_layer" else _NEEDS[d] in dl.applies for d in dropped):
            return f"SGLang {v} and later apply {', '.join(dropped)}: upgrade to {v} (or serve with vLLM)"
    return f"no SGLang release read ({span}) applies {', '.join(dropped)}: vLLM runs this draft as trained"
