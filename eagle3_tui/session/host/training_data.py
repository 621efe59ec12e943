"""The trained wiring from the training data: what its first file says, and the boundaries its slots hold.

The doctor's `wiring-mismatch` compares what the draft was trained on with what is served, and only the
training data knows the former. A quick look reads the first data file on the host, next to the data,
with the check's own reader (`eagle.datasets.describe`, imported from the check's zip): the
layout, how many slots, which of them the trainer fed fc. The slots' boundaries come from the operator
(`--data-slots`, the profile's `data_slots`), else from speculators' generator layout where it applies.
Bad input (a glob matching nothing, a file of the wrong shape, slots that do not fit) is one sentence.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eagle3_tui.eagle.chat_template import TrainedTemplate, trained_template
from eagle3_tui.errors import UserError
from eagle3_tui.remote.host import Host
from eagle3_tui.session.check.job import run_shipped

HOW_TO_GIVE = ("give it with --data GLOB [--data-slots B0,B1,..] (or data_glob and data_slots in the host's "
               "profile; in the console: d in the Accuracy pane)")

_DESCRIBE = (
    "import json, sys\n"
    "sys.path.insert(0, sys.argv[1])\n"
    "try:\n"
    "    from eagle3_tui.eagle import datasets\n"
    "except ImportError as e:\n"
    "    print(json.dumps({'missing': str(e)})); raise SystemExit(0)\n"
    "try:\n"
    "    print(json.dumps({'head': datasets.describe(sys.argv[2])}))\n"
    "except ImportError as e:\n"
    "    print(json.dumps({'missing': str(e)}))\n"
    "except datasets.BadInput as e:\n"
    "    print(json.dumps({'bad': str(e)}))\n"
)


@dataclass(frozen=True)
class DataHead:
    """What the first file of the data says (eagle/datasets.py `describe`)."""

    glob: str
    layout: str
    files: int
    first: str
    num_slots: int
    hidden_size: int
    training_slots: tuple[int, ...]
    final_slot: int | None
    embed_slots: tuple[int, ...] = ()

    @classmethod
    def from_json(cls, glob: str, d: dict[str, Any]) -> DataHead:
        final = d.get("final_slot")
        return cls(glob, str(d["layout"]), int(d["files"]), str(d["first"]), int(d["num_slots"]),
                   int(d["hidden_size"]), tuple(int(x) for x in d["training_slots"]),
                   None if final is None else int(final), tuple(int(x) for x in d.get("embed_slots") or ()))

    @property
    def convention(self) -> str:
        """The slots the trainer feeds fc, as the doctor's slice over them ("[:-1]": all but the last)."""
        t, n = self.training_slots, self.num_slots
        if t == tuple(range(n)):
            return "[:]"
        if t == tuple(range(n - 1)):
            return "[:-1]"
        return f"[{t[0]}:{t[-1] + 1}]" if t else "[:]"


@dataclass(frozen=True)
class TrainingData:
    """The trained wiring's inputs for the doctor: the data, its slots' boundaries (None: unknown), the slice."""

    glob: str
    slots: tuple[int, ...] | None
    convention: str
    head: DataHead | None = None
    note: str = ""
    """How the slots are known, or why they are not."""
    template: TrainedTemplate | None = None
    """The chat template the data was made with, as its data_config.json records it (None: not recorded)."""

    def summary(self) -> str:
        h = self.head
        what = f"{h.files} {h.layout} file(s), {h.num_slots} slots of {h.hidden_size}" if h is not None else "data"
        if self.slots is None:
            return f"training data {self.glob}: {what}; {self.note}"
        bounds = ", ".join(map(str, self.slots))
        return f"training data {self.glob}: {what}, slots hold boundaries {bounds}, trainer feeds {self.convention}" + (
            f" ({self.note})" if self.note else "")


def parse_slots(text: str | None, what: str = "--data-slots") -> tuple[int, ...] | None:
    """'0,3,31,59' -> boundaries; empty -> None; one sentence for anything else (eagle.wiring's rule)."""
    from eagle3_tui.eagle.wiring import parse_slots as parse

    try:
        return parse(text)
    except ValueError as err:
        raise UserError(f"{what}: {err}") from None


def resolve(head: DataHead, slots: Sequence[int] | None, *, num_layers: int | None,
            config_ids: Sequence[int] | None = None) -> TrainingData:
    """The trained wiring's inputs: `slots` checked against the data, else inferred where the layout tells."""
    from eagle3_tui.eagle.trainers import speculators_slot_boundaries

    if slots is not None:
        given = tuple(int(b) for b in slots)
        if len(given) != head.num_slots:
            raise UserError(f"the data slots name {len(given)} boundaries but {head.first} holds "
                            f"{head.num_slots} hidden-state slots")
        if num_layers is not None and any(b > num_layers for b in given):
            raise UserError(f"the data slots name boundary {max(given)} but the target has {num_layers} layers "
                            f"(boundaries are 0..{num_layers})")
        return TrainingData(head.glob, given, head.convention, head)
    if head.layout == "speculators":
        assumed, note = speculators_slot_boundaries(head.num_slots, num_layers, config_ids)
        if assumed is not None and not (head.embed_slots and 0 not in assumed):
            return TrainingData(head.glob, tuple(assumed), head.convention, head, note)
    why = (f"slot {head.embed_slots[0]} looks like the embedding output (boundary 0), " if head.embed_slots else "")
    return TrainingData(head.glob, None, head.convention, head,
                        f"{why}which boundaries its {head.num_slots} slots hold is unknown: give --data-slots "
                        f"B0,B1,.. (e.g. 0,3,31,59)")


async def read_head(host: Host, python: str, glob: str) -> DataHead:
    """The data's first file read on `host` with its own Python (torch and safetensors there)."""
    # the zip's path (the job's folder and a slash) on the command line: a check starting meanwhile sees
    # the folder in use (session/check/leftovers.py) and leaves it alone
    got = await run_shipped(host, python, lambda zip_path: [python, "-c", _DESCRIBE, zip_path, glob], timeout=120)
    line = next((ln for ln in reversed(got.stdout.splitlines()) if ln.startswith("{")), "")
    try:
        out = json.loads(line)
    except ValueError:
        out = None
    if not isinstance(out, dict):
        tail = (got.stderr.strip().splitlines() or [f"exit {got.exit_code}"])[-1]
        raise UserError(f"{python} on {host.name} could not read the training data: {tail}")
    if "bad" in out:
        raise UserError(str(out["bad"]))
    if "missing" in out:
        raise UserError(f"{python} on {host.name} cannot read the training data: {out['missing']} (it needs torch "
                        f"and safetensors; set remote_python in the profile)")
    return DataHead.from_json(glob, out["head"])


async def read_trained_template(host: Host, first_file: str) -> TrainedTemplate | None:
    """The data's chat template from the data_config.json beside its first file (speculators' generator writes
    one), best effort: none there, or one that names no template, is None."""
    import posixpath

    path = posixpath.join(posixpath.dirname(first_file), "data_config.json")
    try:
        cfg = json.loads(await host.read_text(path))
    except (UserError, ValueError):
        return None
    return trained_template(cfg, path) if isinstance(cfg, dict) else None


def unknown_line() -> str:
    """What the doctor says when it has no training data to learn the trained wiring from."""
    return f"trained wiring unknown: the doctor needs the training data to see it; {HOW_TO_GIVE}"
