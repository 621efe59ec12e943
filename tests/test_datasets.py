"""Data readers: layouts, alignment (mask shift), bounded sample, norm probe."""

from __future__ import annotations

import gzip
import io
from pathlib import Path

import pytest

from eagle3_tui.eagle import datasets as dsm
from eagle3_tui.eagle.checkpoint import BadInput


@pytest.fixture(autouse=True)
def _one_thread() -> None:
    import torch

    torch.set_num_threads(1)


def _sample(t: int = 10, h: int = 8, s: int = 4):
    import torch

    g = torch.Generator().manual_seed(t)
    ids = torch.arange(t) % 7
    mask = torch.ones(t, dtype=torch.long)
    mask[:3] = 0
    slots = [torch.randn(t, h, generator=g) * (1 if i == 0 else 50) for i in range(s)]
    return ids, mask, slots


def test_three_layouts_read_the_same(tmp_path: Path) -> None:
    import torch
    from safetensors.torch import save_file

    ids, mask, slots = _sample()
    (tmp_path / "v1").mkdir()
    torch.save({"input_ids": ids, "loss_mask": mask, "hidden_states": slots}, tmp_path / "v1" / "data_0.pt")
    (tmp_path / "st" / "hidden_states").mkdir(parents=True)
    save_file({"hidden_states": torch.stack(slots, 1).contiguous(), "token_ids": ids},
              str(tmp_path / "st" / "hidden_states" / "hs_0.safetensors"))
    (tmp_path / "sf").mkdir()
    buf = io.BytesIO()
    torch.save({"input_ids": ids[None], "loss_mask": mask, "aux_hidden_state": torch.cat(slots[:3], -1)[None],
                "hidden_state": slots[3][None]}, buf)
    with gzip.open(tmp_path / "sf" / "data_0.ckpt.gz", "wb") as f:
        f.write(buf.getvalue())

    v1 = dsm.load(str(tmp_path / "v1" / "*.pt"))
    st = dsm.load(str(tmp_path / "st"))  # a directory is searched for known files
    sf = dsm.load(str(tmp_path / "sf" / "*.ckpt.gz"))
    assert (v1.layout, st.layout, sf.layout) == ("speculators-v1", "speculators", "specforge")
    assert v1.num_slots == st.num_slots == 4 and sf.num_slots == 3
    assert v1.training_slots == st.training_slots == sf.training_slots == (0, 1, 2)
    assert (v1.mask_shift, st.mask_shift, sf.mask_shift) == (1, 1, 0)
    for d in (v1, st, sf):
        for i in range(3):
            assert torch.equal(d.samples[0].slots[i], slots[i])
    assert sf.samples[0].final_normed and torch.equal(sf.samples[0].final, slots[3])
    # speculators: position t counts when mask[t+1] is set (t <= T-3): t = 2..7
    assert v1.samples[0].counted.nonzero().flatten().tolist() == list(range(2, 8))
    # SpecForge keeps the mask at t: t = 3..7
    assert sf.samples[0].counted.nonzero().flatten().tolist() == list(range(3, 8))
    # no loss mask in the speculators safetensors file: every position counts, and it says so
    assert st.samples[0].counted.sum() == 8 and "every position counts" in st.notes[0]


def test_bounded_sample_and_natural_order(tmp_path: Path) -> None:
    import torch

    for i in (10, 2, 1):
        ids, mask, slots = _sample(t=10 + i)
        torch.save({"input_ids": ids, "loss_mask": mask, "hidden_states": slots}, tmp_path / f"data_{i}.pt")
    d = dsm.load(str(tmp_path / "*.pt"), max_positions=12)
    assert [Path(s.file).name for s in d.samples] == ["data_1.pt", "data_2.pt"]
    assert d.positions == 12 and sum(int(s.counted.sum()) for s in d.samples) == 12
    assert d.total_files == 3
    d = dsm.load(str(tmp_path / "*.pt"), max_len=8)
    assert all(s.length == 8 for s in d.samples)


def test_norm_probe_without_embedding(tmp_path: Path) -> None:
    import torch

    ids, mask, slots = _sample()
    torch.save({"input_ids": ids, "loss_mask": mask, "hidden_states": slots}, tmp_path / "data_0.pt")
    d = dsm.load(str(tmp_path / "*.pt"))
    probe = dsm.norm_probe(d, slot_boundaries=[0, 3, 31, 59])
    assert [p.embed_like for p in probe] == [True, False, False, False]
    assert probe[0].mean_norm < 5 < 100 < probe[1].mean_norm
    assert probe[2].boundary == 31 and probe[0].embed_cosine is None
    # the exact test with the target's embedding: slot 0 is E[ids]
    embed = torch.randn(7, 8)
    d.samples[0].slots[0] = embed[ids]
    probe = dsm.norm_probe(d, embed=embed)
    assert probe[0].embed_like and probe[0].embed_cosine == pytest.approx(1.0)
    assert not probe[1].embed_like


def test_bad_files(tmp_path: Path) -> None:
    import torch

    with pytest.raises(BadInput, match="matches no files"):
        dsm.load(str(tmp_path / "*.pt"))
    torch.save({"input_ids": torch.zeros(4, dtype=torch.long), "hidden_states": [torch.zeros(4, 2)]},
               tmp_path / "data_0.pt")
    with pytest.raises(BadInput, match=r"data_0\.pt has no 'loss_mask' \(expected a loss mask"):
        dsm.load(str(tmp_path / "*.pt"))
    torch.save({"input_ids": torch.zeros(4, dtype=torch.long), "loss_mask": torch.ones(5),
                "hidden_states": [torch.zeros(4, 2)]}, tmp_path / "data_0.pt")
    with pytest.raises(BadInput, match="the loss mask has 5 positions but the token ids have 4"):
        dsm.load(str(tmp_path / "*.pt"))
    torch.save({"input_ids": torch.zeros(4, dtype=torch.long), "loss_mask": torch.zeros(4),
                "hidden_states": [torch.zeros(4, 2)]}, tmp_path / "data_0.pt")
    with pytest.raises(BadInput, match="every loss mask is empty"):
        dsm.load(str(tmp_path / "*.pt"))
    (tmp_path / "x.txt").write_text("hi")
    with pytest.raises(BadInput, match="not a known training-data file"):
        dsm.load(str(tmp_path / "x.txt"))


def test_legacy_torch_save_format(tmp_path: Path) -> None:
    import torch

    ids, mask, slots = _sample()
    torch.save({"input_ids": ids, "loss_mask": mask, "hidden_states": slots}, tmp_path / "data_0.pt",
               _use_new_zipfile_serialization=False)
    d = dsm.load(str(tmp_path / "*.pt"))
    assert d.num_slots == 4 and torch.equal(d.samples[0].slots[2], slots[2])
