"""Run speculators 0.9.0's trainer on this CPU (executed by `.venv-vllm`'s Python, not imported by tests).

    python speculators_cpu.py PREP_JSON DATA_DIR -- ARGS of `speculators train`...

First writes DATA_DIR's Arrow dataset (speculators' `prepare-data` output: input_ids, loss_mask, seq_len)
from PREP_JSON's rows, token ids as given (text that re-tokenises differently trains a draft that
accepts nothing), and its d2t/t2d as DATA_DIR/d2t.npy, t2d.npy; then runs `speculators train` with the device pointed
at the CPU. speculators' Trainer moves the model and batches to the int local rank (trainer.py
`.to(self.local_rank)`, a CUDA index), its autocast and checkpointer ask `torch.accelerator` for the
device, and its step timer calls `torch.accelerator.synchronize` (speculators 0.9.0
`train/trainer.py`, `utils/util.py`): with no accelerator each of those is answered "cpu" here.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def write_dataset(prep: Path, data_dir: Path) -> None:
    import numpy as np
    from datasets import Dataset

    p = json.loads(prep.read_text())
    rows = p["rows"]
    ds = Dataset.from_dict({
        "input_ids": [r["input_ids"] for r in rows],
        "loss_mask": [r["loss_mask"] for r in rows],
        "seq_len": [len(r["input_ids"]) for r in rows],
    })
    ds.set_format(type="torch")  # as prepare-data saves it: the trainer compares tensors
    ds.save_to_disk(str(data_dir))
    np.save(data_dir / "d2t.npy", np.array(p["d2t"], dtype=np.int64))
    np.save(data_dir / "t2d.npy", np.array(p["t2d"], dtype=np.bool_))


def on_cpu() -> None:
    import speculators.train.trainer as trainer
    import torch

    patches: list[tuple[object, str, object]] = [
        (torch.accelerator, "current_accelerator", lambda *_a, **_k: torch.device("cpu")),
        (torch.accelerator, "current_device_index", lambda *_a: 0),
        (torch.accelerator, "synchronize", lambda *_a, **_k: None),
        (torch.accelerator, "is_available", lambda *_a: False),
        (trainer, "get_local_rank", lambda *_a: "cpu"),  # the Trainer's `.to(self.local_rank)`
    ]
    if not hasattr(torch.cpu, "empty_cache"):  # the trainer's last step empties the accelerator's cache
        patches.append((torch.cpu, "empty_cache", lambda: None))
    for owner, name, value in patches:
        setattr(owner, name, value)


def main(argv: list[str]) -> int:
    write_dataset(Path(argv[0]), Path(argv[1]))
    on_cpu()
    from speculators.__main__ import app

    sys.argv = ["speculators", *argv[argv.index("--") + 1:]]
    return int(app() or 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
