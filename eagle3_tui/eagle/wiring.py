"""Which hidden states a draft receives: layer-id conventions mapped onto one boundary index.

Every tool counts layers differently, so the console speaks only of *boundaries*
(research/eagle3_formats.md §0):

* boundary ``h = 0`` is the embedding output (the input to decoder layer 0);
* boundary ``h = k`` (1 <= k <= N) is the residual stream after decoder layer ``k-1``
  (= the input to layer ``k``), pre-final-norm.

Conventions, each ``id -> boundary``:

=============== ================= ============================ ==========================
convention      boundary of id j  default ids                  default boundaries
=============== ================= ============================ ==========================
sglang          j + 1 (-1 = emb)  none: boundaries set direct  2, N//2, N-3
vllm            j                 2, N//2, N-3                 2, N//2, N-3
specforge       j + 1             1, N//2-1, N-4               2, N//2, N-3
speculators     j (vLLM capture)  2, N//2, N-3 (+N verifier)   2, N//2, N-3 (+N)
speculators-v1  j + 1 (legacy)    2, N//2, N-3, N-1            3, N//2+1, N-2, N
eagle           j                 2, N//2, N-3                 2, N//2, N-3
=============== ================= ============================ ==========================

A data set stores hidden states in *slots* (speculators v1: a list, current speculators: the
middle axis, SpecForge: chunks of ``aux_hidden_state``). A `Wiring` names the boundaries a draft
is fed and, when the data's slot boundaries are known, which slots realise them.

This module is pure (stdlib only) and ships in the check's zip (eagle/shipped.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

CONVENTIONS: tuple[str, ...] = ("sglang", "vllm", "specforge", "speculators", "speculators-v1", "eagle")

# id -> boundary offset for each convention
_OFFSET: dict[str, int] = {
    "sglang": 1,
    "vllm": 0,
    "specforge": 1,
    "speculators": 0,
    "speculators-v1": 1,
    "eagle": 0,
}


def sglang_default_boundaries(num_layers: int) -> tuple[int, int, int]:
    """SGLang's capture when the draft config names no ids: set directly, no +1."""
    return (2, num_layers // 2, num_layers - 3)


def default_ids(convention: str, num_layers: int) -> tuple[int, ...]:
    """The ids each tool uses when none are configured (in that tool's own counting)."""
    n = num_layers
    if convention == "sglang":
        return boundaries_to_sglang_ids(sglang_default_boundaries(n))
    if convention in ("vllm", "eagle", "speculators"):
        return (2, n // 2, n - 3)
    if convention == "specforge":
        return (1, n // 2 - 1, n - 4)
    if convention == "speculators-v1":
        return (2, n // 2, n - 3, n - 1)
    raise ValueError(f"unknown layer-id convention {convention!r} (known: {', '.join(CONVENTIONS)})")


def ids_to_boundaries(convention: str, ids: Sequence[int]) -> tuple[int, ...]:
    """Map ids in `convention` to boundaries, keeping the given order."""
    if convention not in _OFFSET:
        raise ValueError(f"unknown layer-id convention {convention!r} (known: {', '.join(CONVENTIONS)})")
    off = _OFFSET[convention]
    return tuple(int(j) + off for j in ids)


def boundaries_to_ids(convention: str, boundaries: Sequence[int]) -> tuple[int, ...]:
    """Inverse of `ids_to_boundaries`."""
    if convention not in _OFFSET:
        raise ValueError(f"unknown layer-id convention {convention!r} (known: {', '.join(CONVENTIONS)})")
    off = _OFFSET[convention]
    return tuple(int(h) - off for h in boundaries)


def sglang_ids_to_boundaries(ids: Sequence[int] | None, num_layers: int) -> tuple[int, ...]:
    """What SGLang's target captures for the draft config's ``eagle_config`` ids.

    ``None`` (no ids, or a key SGLang does not read) gives the default. Explicit ids are
    shifted by +1 (-1 becomes the embedding, boundary 0, which needs the embed-capture patch);
    SGLang appends inside its layer loop, so the result is ascending and duplicates collapse.
    Boundaries SGLang never captures are kept here; `sglang_uncaptured` names them.
    """
    if ids is None:
        return sglang_default_boundaries(num_layers)
    return tuple(sorted({int(j) + 1 for j in ids}))


def boundaries_to_sglang_ids(boundaries: Sequence[int]) -> tuple[int, ...]:
    """The ``eagle_config.eagle_aux_hidden_state_layer_ids`` that make SGLang capture `boundaries`."""
    return tuple(int(h) - 1 for h in boundaries)


def sglang_uncaptured(boundaries: Sequence[int], num_layers: int) -> tuple[int, ...]:
    """Boundaries SGLang's loop never reaches: it captures the input of layer i for i in 0..N-1.

    Boundary 0 (id -1) is reachable only with the embed-capture patch; it is not listed here
    (the doctor's embed-needs-patch rule handles it). Boundary N and beyond, or below 0, are.
    """
    return tuple(h for h in boundaries if h < 0 or h >= num_layers)


def parse_ids(text: str) -> tuple[int, ...]:
    """'-1,2,30' or '[-1, 2, 30]' -> (-1, 2, 30); ValueError with a clear sentence otherwise."""
    body = text.strip().strip("[]()")
    parts = [p for p in body.replace(" ", ",").split(",") if p]
    if not parts:
        raise ValueError(f"{text!r} is not a list of layer ids (expected e.g. -1,2,30)")
    try:
        return tuple(int(p) for p in parts)
    except ValueError:
        raise ValueError(f"{text!r} is not a list of integer layer ids (expected e.g. -1,2,30)") from None


def check_slots(slots: Sequence[int]) -> tuple[int, ...]:
    """The boundaries a training data's slots hold: 0 (the embedding output) or more; ValueError otherwise."""
    given = tuple(int(b) for b in slots)
    if any(b < 0 for b in given):
        raise ValueError(f"boundaries are 0 (the embedding output) or more, got {', '.join(map(str, given))}")
    return given


def parse_slots(text: str | None) -> tuple[int, ...] | None:
    """`--data-slots` / a profile's `data_slots` text: '0,3,31,59' -> boundaries; empty -> None;
    ValueError with one sentence for anything else (negative boundaries included)."""
    if text is None or not text.strip():
        return None
    return check_slots(parse_ids(text))


def format_boundaries(boundaries: Sequence[int] | None) -> str:
    """"embed, h3, h31": boundary 0 is the embedding, h{k} the residual after layer k-1."""
    if boundaries is None:
        return "?"
    return ", ".join("embed" if h == 0 else f"h{h}" for h in boundaries)


@dataclass(frozen=True)
class Wiring:
    """One candidate input for the draft's fc: the boundaries it is fed, and the data slots that hold them.

    `slots` index the data set's hidden-state slots (ascending concatenation order as fed);
    `boundaries` is None when the data's slot boundaries are unknown. `note` says why a wiring
    could not be realised (then `slots` is empty and it is reported, not measured).
    """

    name: str
    boundaries: tuple[int, ...] | None
    slots: tuple[int, ...]
    note: str = ""
    source: str = field(default="", compare=False)

    @property
    def runnable(self) -> bool:
        return bool(self.slots)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "boundaries": list(self.boundaries) if self.boundaries is not None else None,
            "slots": list(self.slots),
            "note": self.note,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, d: dict) -> Wiring:
        b = d.get("boundaries")
        return cls(
            name=str(d["name"]),
            boundaries=tuple(int(x) for x in b) if b is not None else None,
            slots=tuple(int(x) for x in d.get("slots", ())),
            note=str(d.get("note", "")),
            source=str(d.get("source", "")),
        )


def _slots_for(boundaries: Sequence[int], slot_boundaries: Sequence[int] | None) -> tuple[tuple[int, ...], str]:
    if slot_boundaries is None:
        return (), "the data's slot boundaries are unknown (give them, e.g. --data-slots 0,3,31,59)"
    index = {h: i for i, h in enumerate(slot_boundaries)}
    missing = [h for h in boundaries if h not in index]
    if missing:
        have = format_boundaries(slot_boundaries)
        return (), f"the data holds no slot for boundary {', '.join(map(str, missing))} (it holds {have})"
    return tuple(index[h] for h in boundaries), ""


def wiring_from_boundaries(
    name: str, boundaries: Sequence[int], slot_boundaries: Sequence[int] | None, *, source: str = ""
) -> Wiring:
    slots, note = _slots_for(boundaries, slot_boundaries)
    return Wiring(name, tuple(int(h) for h in boundaries), slots, note, source)


def wiring_from_slots(name: str, slots: Sequence[int], slot_boundaries: Sequence[int] | None, *, source: str = "") -> Wiring:
    b = tuple(slot_boundaries[i] for i in slots) if slot_boundaries is not None else None
    return Wiring(name, b, tuple(int(s) for s in slots), "", source)


def candidate_wirings(
    *,
    num_slots: int,
    num_aux: int,
    slot_boundaries: Sequence[int] | None = None,
    num_layers: int | None = None,
    config_ids: Sequence[int] | None = None,
    config_ids_read: bool = True,
    training_slots: Sequence[int] | None = None,
    extra: Sequence[str] = (),
    final_slot: int | None = None,
) -> list[Wiring]:
    """The wirings to compare on one data set.

    * ``training``: what the data's trainer fed fc: the first A slots (speculators' ``[:-1]``
      of a list that ends with the verifier's last state), or `training_slots` if the layout says.
    * ``serving default``: SGLang's default boundaries [2, N//2, N-3] when the data's slot boundaries
      and N are known (reported, not measured, when the data lacks one); otherwise the last A slots
      (what SGLang feeds when the data's slots end at its default boundaries), never `final_slot` (the
      verifier's last state, boundary N, which no server captures).
    * ``draft config``: what SGLang makes of the draft config's ids (`config_ids`, None = default;
      `config_ids_read=False` when the ids sit where SGLang does not look, which means the default).
    * each entry of `extra`: a name above, ``slots:0,1,2``, ``boundaries:0,3,31`` / ``h:...``,
      ``vllm:...``/``specforge:...``/``speculators:...`` ids, or bare ids in SGLang's counting.
    Wirings that share slots are all listed (the check measures each set of slots once).
    """
    out: list[Wiring] = []
    a = num_aux
    if num_slots < a:
        raise ValueError(f"the data has {num_slots} hidden-state slots but the draft's fc takes {a}")
    train = tuple(training_slots) if training_slots is not None else tuple(range(a))
    out.append(wiring_from_slots("training", train, slot_boundaries, source="trainer's [:-1]"))
    if slot_boundaries is not None and num_layers is not None:
        default_b = sglang_default_boundaries(num_layers)
        out.append(wiring_from_boundaries("serving default", default_b, slot_boundaries, source="SGLang default"))
    else:
        usable = [i for i in range(num_slots) if i != final_slot]
        out.append(wiring_from_slots("serving default", tuple(usable[-a:]), slot_boundaries, source="last A slots"))
    if num_layers is not None:
        ids = config_ids if config_ids_read else None
        b = sglang_ids_to_boundaries(ids, num_layers)
        src = "draft config ids" if ids is not None else "draft config (no ids SGLang reads: default)"
        out.append(wiring_from_boundaries("draft config", b, slot_boundaries, source=src))
    for spec in extra:
        out.append(parse_wiring(spec, num_slots=num_slots, num_aux=a, slot_boundaries=slot_boundaries,
                                num_layers=num_layers, config_ids=config_ids, config_ids_read=config_ids_read))
    fitted = []
    for w in out:
        n = len(w.boundaries) if w.boundaries is not None else len(w.slots)
        if n != a and (w.slots or w.boundaries is not None):
            w = Wiring(w.name, w.boundaries, (), f"it feeds {n} hidden states but the draft's fc takes {a}", w.source)
        fitted.append(w)
    return fitted


def parse_wiring(
    spec: str,
    *,
    num_slots: int,
    num_aux: int,
    slot_boundaries: Sequence[int] | None = None,
    num_layers: int | None = None,
    config_ids: Sequence[int] | None = None,
    config_ids_read: bool = True,
) -> Wiring:
    """One ``--wiring`` argument to a Wiring; ValueError with a clear sentence if it cannot be read."""
    s = spec.strip()
    named = {"training", "serving", "serving default", "config", "draft config"}
    if s in named:
        ws = candidate_wirings(num_slots=num_slots, num_aux=num_aux, slot_boundaries=slot_boundaries,
                               num_layers=num_layers, config_ids=config_ids, config_ids_read=config_ids_read)
        want = {"serving": "serving default", "config": "draft config"}.get(s, s)
        for w in ws:
            if w.name == want:
                return w
        raise ValueError(f"wiring {spec!r} needs the target's number of layers (give --target-config)")
    kind, _, rest = s.partition(":")
    if not rest:
        kind, rest = "sglang", s
    kind = kind.strip().lower()
    values = parse_ids(rest)
    if len(values) != num_aux:
        raise ValueError(f"wiring {spec!r} names {len(values)} hidden states but the draft's fc takes {num_aux}")
    if kind == "slots":
        bad = [i for i in values if not 0 <= i < num_slots]
        if bad:
            raise ValueError(f"wiring {spec!r}: slot {bad[0]} does not exist (the data has slots 0..{num_slots - 1})")
        return wiring_from_slots(spec, values, slot_boundaries, source="user slots")
    if kind in ("h", "boundaries", "b"):
        return wiring_from_boundaries(spec, values, slot_boundaries, source="user boundaries")
    if kind in _OFFSET:
        # every engine captures inside its layer loop, so the states reach fc in ascending order
        b = tuple(sorted(set(ids_to_boundaries(kind, values))))
        if len(b) != len(values):
            raise ValueError(f"wiring {spec!r} repeats a layer id (each boundary is captured once)")
        return wiring_from_boundaries(spec, b, slot_boundaries, source=f"user {kind} ids")
    raise ValueError(
        f"wiring {spec!r} is not understood (expected training, serving, config, slots:0,1,2, "
        f"boundaries:0,3,31, or ids such as -1,2,30 or vllm:2,16,29)"
    )


def num_aux_from_config(config: dict) -> int | None:
    """Number of aux states the draft expects, from its config ids (nested or top-level), if named."""
    for holder in (config.get("eagle_config") or {}, config):
        if isinstance(holder, dict):
            ids = holder.get("eagle_aux_hidden_state_layer_ids")
            if isinstance(ids, list) and ids:
                return len(ids)
    return None


def config_boundaries(config: dict) -> tuple[tuple[int, ...] | None, str]:
    """The boundaries a draft config's layer ids name, each key read by the convention of the tool that writes it.

    A top-level ``eagle_aux_hidden_state_layer_ids`` is speculators' / vLLM's (boundary = id); the nested
    ``eagle_config`` ids are SGLang's and SpecForge's (boundary = id + 1). The top-level key wins where both
    are set (speculators writes it, and vLLM reads it first). Returns (ascending boundaries, convention), or
    (None, "") when the config names no ids. Compare these with a data set's slot boundaries, never the ids.
    """
    top = config.get("eagle_aux_hidden_state_layer_ids")
    if isinstance(top, list) and top and all(isinstance(x, int) for x in top):
        return tuple(sorted(set(ids_to_boundaries("vllm", top)))), "vllm"
    nested = config.get("eagle_config")
    if isinstance(nested, dict):
        ids = nested.get("eagle_aux_hidden_state_layer_ids")
        if isinstance(ids, list) and ids and all(isinstance(x, int) for x in ids):
            return tuple(sorted(set(ids_to_boundaries("sglang", ids)))), "sglang"
    return None, ""


def config_layer_ids(config: dict) -> tuple[tuple[int, ...] | None, bool]:
    """(ids, read_by_sglang): the draft config's layer ids and whether SGLang reads them.

    SGLang reads only ``eagle_config.eagle_aux_hidden_state_layer_ids``; a top-level key
    (vLLM/speculators style) is returned with ``read_by_sglang=False``.
    """
    nested = config.get("eagle_config")
    if isinstance(nested, dict) and isinstance(nested.get("eagle_aux_hidden_state_layer_ids"), list):
        return tuple(int(x) for x in nested["eagle_aux_hidden_state_layer_ids"]), True
    top = config.get("eagle_aux_hidden_state_layer_ids")
    if isinstance(top, list):
        return tuple(int(x) for x in top), False
    return None, True
