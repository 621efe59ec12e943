"""Readers for the three on-disk layouts of EAGLE-3 training data, with the alignment each uses.

Layouts (research/eagle3_formats.md §1.1, §2.2):

* ``speculators-v1``: ``torch.save`` dict per sample (``*.pt``): ``input_ids [T]``, ``loss_mask [T]``,
  ``hidden_states`` a list of ``[T, H]`` (the last entry is the verifier's last state; the trainer
  feeds ``cat(hidden_states[:-1])``).
* ``speculators``: ``OUT/hidden_states/hs_{i}.safetensors`` with ``hidden_states [T, S, H]`` and
  ``token_ids [T]`` (the trainer feeds ``hidden_states[:, :-1]``), beside ``OUT/token_freq.pt`` (not a
  sample) and the Arrow dataset ``OUT/*.arrow`` whose row i holds the ``loss_mask`` of ``hs_i``
  (``scripts/prepare_data.py``, ``data_generation_offline.py``, ``train/data.py``). The mask is read from
  there when ``pyarrow`` is importable, else from a ``loss_mask`` key in the file, else every position counts.
* ``specforge``: ``torch.save`` dict per sample, ``OUT/rows_{g}-{g+2000}/data_{i}.ckpt[.gz]``
  (``scripts/prepare_hidden_states.py``): ``aux_hidden_state [1, T, A*H]`` (A slots), ``hidden_state
  [1, T, H]`` (the target's final, post-norm state), ``input_ids``, ``loss_mask``.

Alignment (all three): draft position t reads aux ``g_t`` and token ``x_{t+1}`` and predicts the
target's token after ``x_{t+1}``. speculators shifts the loss mask with the inputs (mask at t+1),
SpecForge keeps it at t (``mask_shift`` 1 or 0).

torch is imported inside functions; this module ships in the check's zip (eagle/shipped.py).
"""

from __future__ import annotations

import glob as _glob
import gzip
import io
import json
import math
import os
import re
import zlib
from dataclasses import dataclass, field
from typing import Any

from eagle3_tui.eagle.checkpoint import BadInput, torch_load

LAYOUTS: tuple[str, ...] = ("speculators-v1", "speculators", "specforge")


@dataclass
class Sample:
    """One sequence: `slots` are S tensors [T, H] in the data's slot order."""

    file: str
    input_ids: Any  # LongTensor [T]
    loss_mask: Any  # BoolTensor [T]
    slots: list[Any]
    final: Any = None  # [T, H] the target's last state when the layout stores one
    final_normed: bool = False
    counted: Any = None  # BoolTensor [T]: draft positions in the bounded sample (set by `load`)

    @property
    def length(self) -> int:
        return int(self.input_ids.shape[0])


@dataclass
class DataSet:
    layout: str
    files: list[str]
    samples: list[Sample]
    num_slots: int
    hidden_size: int
    training_slots: tuple[int, ...]  # which slots the layout's trainer feeds fc
    mask_shift: int  # loss mask index for draft position t is t + mask_shift
    final_slot: int | None  # slot that is the verifier's last state (speculators), if any
    notes: list[str] = field(default_factory=list)
    positions: int = 0  # counted (loss-masked, labelled) draft positions in the sample
    total_files: int = 0
    split: str = "training"  # "validation" when the trainer's own held-out rows were read
    split_note: str = ""


def natural_key(path: str) -> list[Any]:
    """data_2 before data_10."""
    return [int(p) if p.isdigit() else p for p in re.split(r"(\d+)", path)]


_NOT_SAMPLES = ("token_freq.pt",)  # speculators' token frequencies, written beside the data
_LOOKED_FOR = ("SpecForge rows_*/data_*.ckpt[.gz], speculators hidden_states/hs_*.safetensors or "
               "speculators v1 data_*.pt")


def _folder_files(root: str) -> list[str]:
    """The sample files under a data root, in each trainer's own layout (first layout found wins)."""
    patterns = (
        ("data_*.ckpt", "data_*.ckpt.gz", "rows_*/data_*.ckpt", "rows_*/data_*.ckpt.gz"),  # SpecForge
        ("hidden_states/hs_*.safetensors", "hs_*.safetensors"),  # speculators
        ("*.ckpt", "*.ckpt.gz", "*.pt", "*.safetensors"),  # legacy and hand-made sets
    )
    for group in patterns:
        hits = [h for pat in group for h in _glob.glob(os.path.join(root, pat))]
        hits = [h for h in hits if os.path.basename(h) not in _NOT_SAMPLES]
        if hits:
            return hits
    return []


_SAMPLE_SUFFIXES = (".pt", ".pth", ".safetensors", ".ckpt", ".ckpt.gz")


def expand(pattern: str, skipped: list[str] | None = None) -> list[str]:
    """Files a --data argument names: a glob, a file, or a data root (searched in each trainer's layout).

    A glob over a trainer's output folder (`OUT/*`) also matches what the trainer wrote beside the
    samples (data_config.json, sample_lengths.json, token_freq.pt, the Arrow dataset): those are not
    samples and are left out, their paths added to `skipped`; a folder it matches is read as a data
    root (speculators' `hidden_states/`)."""
    pattern = os.path.expanduser(pattern)
    if os.path.isdir(pattern):
        hits = _folder_files(pattern)
        if not hits:
            raise BadInput(f"{pattern} holds no training data: looked for {_LOOKED_FOR}")
    elif os.path.isfile(pattern):
        hits = [pattern]  # named, not matched: read as given (a wrong kind is said by `layout_of`)
    else:
        hits = []
        for h in _glob.glob(pattern, recursive=True):
            if os.path.isdir(h):
                hits += _folder_files(h)
            elif os.path.basename(h) in _NOT_SAMPLES or not h.endswith(_SAMPLE_SUFFIXES):
                if skipped is not None:
                    skipped.append(h)
            else:
                hits.append(h)
    files = sorted(set(h for h in hits if os.path.isfile(h)), key=natural_key)
    if not files:
        but = (f"; it matches only {_names(skipped)}, which {'is' if len(skipped) == 1 else 'are'} not training "
               "data") if skipped else ""
        raise BadInput(f"the data pattern {pattern} matches no files (expected {_LOOKED_FOR}){but}")
    return files


def _names(paths: list[str], most: int = 3) -> str:
    names = sorted(os.path.basename(p) for p in paths)
    return ", ".join(names[:most]) + (f" and {len(names) - most} more" if len(names) > most else "")


def skipped_note(skipped: list[str]) -> str:
    """The one line that says which matched files were not read as training data."""
    return f"skipped {len(skipped)} matched file{'s' if len(skipped) != 1 else ''} that {'are' if len(skipped) != 1 else 'is'} " \
           f"not training data ({_names(skipped)})"


def file_index(path: str) -> int | None:
    """i of hs_{i}.safetensors / data_{i}.ckpt: the row of the trainer's dataset it holds."""
    m = re.search(r"(?:hs|data)_(\d+)\.", os.path.basename(path))
    return int(m.group(1)) if m else None


class ArrowRows:
    """speculators' preprocessed dataset (``datasets.save_to_disk``: Arrow IPC stream shards listed in
    state.json), read lazily with pyarrow: row i's ``loss_mask`` and ``input_ids``."""

    def __init__(self, directory: str) -> None:
        import importlib

        pa: Any = importlib.import_module("pyarrow")  # optional: only this reader needs it

        names = _arrow_shards(directory)
        tables = []
        for n in names:
            source = pa.memory_map(os.path.join(directory, n))
            try:
                tables.append(pa.ipc.open_stream(source).read_all())
            except pa.lib.ArrowInvalid:
                tables.append(pa.ipc.open_file(source).read_all())
        self.table = pa.concat_tables(tables) if tables else None
        self.directory = directory
        self.rows = 0 if self.table is None else self.table.num_rows

    def column(self, name: str, i: int) -> list[int] | None:
        if self.table is None or name not in self.table.column_names or not 0 <= i < self.rows:
            return None
        return [int(x) for x in self.table.column(name)[i].as_py()]

    @classmethod
    def beside(cls, data_file: str) -> tuple[ArrowRows | None, str]:
        """The dataset next to a speculators hidden_states folder, and a note when it cannot be used."""
        folder = os.path.dirname(os.path.abspath(data_file))
        root = os.path.dirname(folder) if os.path.basename(folder) == "hidden_states" else folder
        if not _arrow_shards(root):
            return None, (f"no Arrow dataset beside {folder} (speculators keeps the loss mask there): "
                          f"every position counts, prompt tokens too")
        try:
            return cls(root), ""
        except ImportError:
            return None, (f"pyarrow is not importable here, so the loss mask in {root}'s Arrow dataset "
                          f"was not read: every position counts, prompt tokens too")
        except Exception as err:  # a broken shard: say so, count every position
            return None, f"the Arrow dataset in {root} could not be read ({str(err)[:120]}): every position counts"


def _arrow_shards(directory: str) -> list[str]:
    state = os.path.join(directory, "state.json")
    if os.path.exists(state):
        try:
            with open(state, encoding="utf-8") as f:
                listed = [str(d["filename"]) for d in json.load(f).get("_data_files", [])]
            if listed and all(os.path.exists(os.path.join(directory, n)) for n in listed):
                return listed
        except (OSError, ValueError, KeyError, TypeError):
            pass
    return sorted((n for n in os.listdir(directory) if n.endswith(".arrow")), key=natural_key)


def layout_of(path: str) -> str:
    if path.endswith(".safetensors"):
        return "speculators"
    if path.endswith((".ckpt", ".ckpt.gz")):
        return "specforge"
    if path.endswith((".pt", ".pth")):
        return "speculators-v1"
    raise BadInput(f"{path} is not a known training-data file (expected .pt, .safetensors or .ckpt)")


def _torch_load(path: str) -> Any:
    if path.endswith(".gz"):
        try:
            with gzip.open(path, "rb") as f:
                buf = io.BytesIO(f.read())
        except (OSError, EOFError, zlib.error) as err:
            raise BadInput(f"{path} could not be read as a gzipped torch.save file ({err})") from None
        return torch_load(buf, path, "a torch.save file", mmap=False)
    return torch_load(path, path, "a torch.save file")


def _need(d: Any, key: str, path: str, what: str) -> Any:
    if not isinstance(d, dict) or key not in d:
        have = ", ".join(sorted(map(str, d))) if isinstance(d, dict) else type(d).__name__
        raise BadInput(f"{path} has no {key!r} (expected {what}; it holds {have})")
    return d[key]


def _as_2d(t: Any, path: str, key: str) -> Any:
    import torch

    if not isinstance(t, torch.Tensor):
        raise BadInput(f"{path}: {key!r} is not a tensor")
    if t.dim() == 3 and t.shape[0] == 1:
        t = t[0]
    if t.dim() != 2:
        raise BadInput(f"{path}: {key!r} has shape {list(t.shape)} (expected [seq_len, hidden])")
    return t


def _ids(t: Any, path: str, key: str) -> Any:
    import torch

    if not isinstance(t, torch.Tensor):
        t = torch.as_tensor(t)
    t = t.reshape(-1).long()
    return t


def read_sample(path: str, layout: str | None = None) -> tuple[Sample, dict[str, Any]]:
    """One file -> Sample plus layout facts (training slots, mask shift, final slot)."""
    import torch

    layout = layout or layout_of(path)
    if layout == "speculators":
        from safetensors import SafetensorError
        from safetensors.torch import load_file

        try:
            d = load_file(path)
        except (SafetensorError, OSError, ValueError) as err:
            raise BadInput(f"{path} is not a readable safetensors file ({str(err)[:160]})") from None
        hs = _need(d, "hidden_states", path, "hidden states [seq_len, num_layers, hidden]")
        if hs.dim() != 3:
            raise BadInput(f"{path}: 'hidden_states' has shape {list(hs.shape)} (expected [seq_len, num_layers, hidden])")
        ids = _ids(_need(d, "token_ids", path, "token ids [seq_len]"), path, "token_ids")
        t = hs.shape[0]
        mask = d["loss_mask"].reshape(-1).bool() if "loss_mask" in d else torch.ones(t, dtype=torch.bool)
        slots = [hs[:, i] for i in range(hs.shape[1])]
        s = hs.shape[1]
        facts = {"training_slots": tuple(range(s - 1)), "mask_shift": 1, "final_slot": s - 1,
                 "has_mask": "loss_mask" in d}
        sample = Sample(path, ids, mask, slots)
    elif layout == "speculators-v1":
        d = _torch_load(path)
        if isinstance(d, dict) and "aux_hidden_state" in d:
            return read_sample(path, "specforge")
        lst = _need(d, "hidden_states", path, "a list of hidden states [seq_len, hidden]")
        if isinstance(lst, torch.Tensor):
            lst = [lst[i] for i in range(lst.shape[0])] if lst.dim() == 3 else [lst]
        if not isinstance(lst, (list, tuple)) or not lst:
            raise BadInput(f"{path}: 'hidden_states' is not a list of tensors (expected speculators v1 data)")
        slots = [_as_2d(x, path, "hidden_states") for x in lst]
        ids = _ids(_need(d, "input_ids", path, "token ids [seq_len]"), path, "input_ids")
        mask = _need(d, "loss_mask", path, "a loss mask [seq_len]")
        mask = torch.as_tensor(mask).reshape(-1).bool()
        s = len(slots)
        facts = {"training_slots": tuple(range(s - 1)), "mask_shift": 1, "final_slot": s - 1, "has_mask": True}
        sample = Sample(path, ids, mask, slots)
    elif layout == "specforge":
        d = _torch_load(path)
        if isinstance(d, dict) and "hidden_state" in d and "aux_hidden_state" not in d:
            raise BadInput(f"{path} holds one hidden state per position and no aux_hidden_state (EAGLE-1/2 data "
                           f"from ge_data): an EAGLE-3 draft is fed the aux states of several layers")
        aux = _as_2d(_need(d, "aux_hidden_state", path, "aux hidden states [1, seq_len, A*hidden]"), path,
                     "aux_hidden_state")
        final = d.get("hidden_state") if isinstance(d, dict) else None
        final = _as_2d(final, path, "hidden_state") if final is not None else None
        ids = _ids(_need(d, "input_ids", path, "token ids [seq_len]"), path, "input_ids")
        mask = torch.as_tensor(_need(d, "loss_mask", path, "a loss mask [seq_len]")).reshape(-1).bool()
        if final is not None:
            h = final.shape[-1]
        else:
            h = aux.shape[-1] // 3
        if aux.shape[-1] % h:
            raise BadInput(f"{path}: 'aux_hidden_state' is {aux.shape[-1]} wide, not a multiple of the hidden size {h}")
        a = aux.shape[-1] // h
        slots = [aux[:, i * h : (i + 1) * h] for i in range(a)]
        facts = {"training_slots": tuple(range(a)), "mask_shift": 0, "final_slot": None, "has_mask": True}
        sample = Sample(path, ids, mask, slots, final=final, final_normed=True)
    else:
        raise BadInput(f"unknown data layout {layout!r} (known: {', '.join(LAYOUTS)})")
    t = sample.length
    for i, x in enumerate(sample.slots):
        if x.shape[0] != t:
            raise BadInput(f"{path}: hidden-state slot {i} has {x.shape[0]} positions but the token ids have {t}")
    if sample.loss_mask.shape[0] != t:
        raise BadInput(f"{path}: the loss mask has {sample.loss_mask.shape[0]} positions but the token ids have {t}")
    return sample, facts


def counted_positions(sample: Sample, mask_shift: int, through_last: bool = False) -> Any:
    """Bool [T]: draft positions t that count: the loss mask at t + mask_shift is set and the label exists:
    the token after x_{t+1} for token labels (t <= T-3), the target's state at t+1 for target labels
    (`through_last`: t <= T-2, the position both trainers also score)."""
    import torch

    t = sample.length
    last = t - 1 if through_last else t - 2  # exclusive bound on t
    ok = torch.zeros(t, dtype=torch.bool)
    if last > 0:
        idx = torch.arange(last)
        ok[:last] = sample.loss_mask[idx + mask_shift]
    return ok


def _split_order(files: list[str], layout: str, arrow: ArrowRows | None) -> tuple[list[str], str, str]:
    """(files to read first, split, note): the trainer's own validation rows when they can be found."""
    if layout == "speculators" and arrow is not None and arrow.rows:
        val = _trainers().validation_indices(arrow.rows)
        picked = [f for f in files if file_index(f) in val]
        if picked:
            return picked, "validation", (
                f"measured on speculators' validation rows {val.start}..{arrow.rows - 1} of its {arrow.rows} "
                f"(the rows after train_data_ratio {_trainers().SPECULATORS_TRAIN_RATIO})")
        return files, "training", (f"none of speculators' validation rows {val.start}..{arrow.rows - 1} has a "
                                   f"hidden-state file here: measured on training rows")
    if layout == "specforge":
        return files, "training", ("measured on these files as given: SpecForge validates on a separate folder "
                                   "(--eval-hidden-states-path); give that folder as --data for held-out numbers")
    return files, "training", "measured on these files as given: the draft may have trained on them"


def _trainers() -> Any:
    from eagle3_tui.eagle import trainers

    return trainers


def _arrow_mask(sample: Sample, arrow: ArrowRows, path: str) -> tuple[Sample, bool]:
    """The sample with its row's loss mask from the Arrow dataset; False when the row does not match."""
    import torch

    i = file_index(path)
    mask = arrow.column("loss_mask", i) if i is not None else None
    ids = arrow.column("input_ids", i) if i is not None else None
    if mask is None or len(mask) != sample.length or (ids is not None and ids != sample.input_ids.tolist()):
        return sample, False
    sample.loss_mask = torch.tensor(mask, dtype=torch.bool)
    return sample, True


def _cut(sample: Sample, max_len: int) -> Sample:
    if sample.length <= max_len:
        return sample
    return Sample(sample.file, sample.input_ids[:max_len], sample.loss_mask[:max_len],
                  [x[:max_len] for x in sample.slots],
                  None if sample.final is None else sample.final[:max_len], sample.final_normed)


def _check_first(path: str, s: int, h: int, expect_slots: int | None, expect_hidden: int | None) -> None:
    if expect_slots is not None and s < expect_slots:
        raise BadInput(f"{path} holds {s} hidden-state slots but the draft's fc takes {expect_slots} "
                       f"(expected at least {expect_slots} slots of {expect_hidden or h})")
    if expect_hidden is not None and h != expect_hidden:
        raise BadInput(f"{path} holds hidden states {h} wide but the draft expects {expect_hidden} "
                       f"(its fc width divided by the number of aux states)")


def load(pattern: str, *, max_positions: int = 20000, max_len: int = 4096,
         expect_slots: int | None = None, expect_hidden: int | None = None, through_last: bool = False) -> DataSet:
    """Read files (natural order, the trainer's validation rows first) until `max_positions` counted
    positions are in hand: one file at a time, never the whole folder.

    Every file is checked against the first: the same number of slots and hidden size.
    Sequences longer than `max_len` are cut (attention memory is quadratic in T).
    """
    skipped: list[str] = []
    files = expand(pattern, skipped)
    layout = layout_of(files[0])
    arrow, arrow_note = ArrowRows.beside(files[0]) if layout == "speculators" else (None, "")
    order, split, split_note = _split_order(files, layout, arrow)
    samples: list[Sample] = []
    facts0: dict[str, Any] | None = None
    positions = mismatched = 0
    notes: list[str] = [skipped_note(skipped)] if skipped else []
    for path in order:
        if layout_of(path) != layout:
            raise BadInput(f"{path} is {layout_of(path)} data but {files[0]} is {layout} data (one layout per check)")
        sample, facts = read_sample(path, layout)
        s, h = len(sample.slots), int(sample.slots[0].shape[-1])
        if facts0 is None:
            facts0, s0, h0 = facts, s, h
            _check_first(path, s, h, expect_slots, expect_hidden)
            if arrow is None and not facts.get("has_mask", True):
                notes.append(arrow_note or f"{layout} files carry no loss mask here: every position counts")
        elif s != s0 or h != h0:
            raise BadInput(f"{path} holds {s} slots of {h} but {files[0]} holds {s0} slots of {h0} "
                           f"(expected the same in every file)")
        if arrow is not None:
            sample, matched = _arrow_mask(sample, arrow, path)
            mismatched += not matched
        sample = _cut(sample, max_len)
        ok = counted_positions(sample, facts["mask_shift"], through_last)
        n = int(ok.sum())
        if n == 0:
            continue
        if positions + n > max_positions:
            ok = ok & (ok.cumsum(0) <= max_positions - positions)
            n = max_positions - positions
        sample.counted = ok
        samples.append(sample)
        positions += n
        if positions >= max_positions:
            break
    assert facts0 is not None
    if mismatched:
        notes.append(f"{mismatched} files did not match their Arrow row (token ids or length): their loss mask "
                     f"is the file's own")
    if not samples:
        raise BadInput(f"no file matching {pattern} has a position to check (every loss mask is empty)")
    ds = DataSet(layout, files, samples, s0, h0, tuple(facts0["training_slots"]), int(facts0["mask_shift"]),
                 facts0["final_slot"], notes, positions, len(files))
    ds.split, ds.split_note = split, split_note
    return ds


@dataclass(frozen=True)
class SlotProbe:
    """One data slot: its mean L2 norm and whether it looks like an embedding output."""

    slot: int
    mean_norm: float
    embed_like: bool
    embed_cosine: float | None = None  # cosine with the target's embedding of the input tokens
    boundary: int | None = None

    def to_dict(self) -> dict:
        return {"slot": self.slot, "mean_norm": self.mean_norm, "embed_like": self.embed_like,
                "embed_cosine": self.embed_cosine, "boundary": self.boundary}

    @classmethod
    def from_dict(cls, d: dict) -> SlotProbe:
        return cls(int(d["slot"]), float(d["mean_norm"]), bool(d["embed_like"]),
                   None if d.get("embed_cosine") is None else float(d["embed_cosine"]),
                   None if d.get("boundary") is None else int(d["boundary"]))


def norm_probe(ds: DataSet, *, embed: Any = None, slot_boundaries: Any = None, limit: int = 4096) -> list[SlotProbe]:
    """Mean L2 norm per slot over up to `limit` positions; the embedding slot stands out.

    An embedding output is far smaller than layer outputs (the seeds: ~1.0 against 37-174). With
    the target's embedding at hand the test is exact: the slot equals E[input_ids] (cosine ~1).
    """
    import torch

    norms: list[list[float]] = [[] for _ in range(ds.num_slots)]
    cos: list[list[float]] = [[] for _ in range(ds.num_slots)]
    left = limit
    for smp in ds.samples:
        if left <= 0:
            break
        n = min(left, smp.length)
        left -= n
        e = None
        if embed is not None and int(smp.input_ids.max()) < embed.shape[0] and embed.shape[1] == ds.hidden_size:
            e = embed[smp.input_ids[:n]].float()
        for i, x in enumerate(smp.slots):
            xf = x[:n].float()
            norms[i].append(float(xf.norm(dim=-1).mean()))
            if e is not None:
                cos[i].append(float(torch.nn.functional.cosine_similarity(xf, e, dim=-1).mean()))
    means = [sum(v) / len(v) if v else 0.0 for v in norms]
    out = []
    for i, m in enumerate(means):
        others = sorted(x for j, x in enumerate(means) if j != i)
        med = others[len(others) // 2] if others else m
        c = (sum(cos[i]) / len(cos[i])) if cos[i] else None
        if c is not None:
            like = c > 0.99
        else:
            like = bool(others) and m > 0 and med / m >= 8.0 and math.isfinite(m)
        b = None
        if slot_boundaries is not None and i < len(slot_boundaries):
            b = int(slot_boundaries[i])
        out.append(SlotProbe(i, round(m, 4), like, None if c is None else round(c, 4), b))
    return out


def describe(pattern: str, *, probe_positions: int = 512) -> dict[str, Any]:
    """What the data says about its wiring, from its first file only (the doctor's quick look, never the
    whole folder): layout, file count, slots and their width, which slots the trainer feeds fc, which
    slot is the verifier's last state, and which slots look like the embedding output (norm probe)."""
    files = expand(pattern)
    sample, facts = read_sample(files[0])
    s, h = len(sample.slots), int(sample.slots[0].shape[-1]) if sample.slots else 0
    if s < 2:
        raise BadInput(f"{files[0]} holds {s} hidden-state slot{'' if s == 1 else 's'}: EAGLE-3 data holds "
                       f"one per aux layer (3, or 4 with the verifier's last state)")
    layout = "specforge" if facts["mask_shift"] == 0 else layout_of(files[0])
    ds = DataSet(layout, files[:1], [sample], s, h, tuple(facts["training_slots"]), int(facts["mask_shift"]),
                 facts["final_slot"])
    embed = [p.slot for p in norm_probe(ds, limit=probe_positions) if p.embed_like]
    return {"layout": layout, "files": len(files), "first": files[0], "num_slots": s, "hidden_size": h,
            "training_slots": list(ds.training_slots), "final_slot": ds.final_slot, "embed_slots": embed}
