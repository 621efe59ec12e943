"""Data-parallel ranks in the session's telemetry: each DP rank logs its own Decode line; the live tok/s
is their sum and the accept length their throughput-weighted mean (a 2-rank server reads 2x, not 1x)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eagle3_tui.profile import Profile
from eagle3_tui.session import Session
from eagle3_tui.session.live.ranks import RankMerger
from eagle3_tui.sglang.logline import DecodeStats, parse_line


def line(sec: int, dp: int, accept: float, tps: float, running: int = 4) -> str:
    return (f"[2026-04-05 20:00:{sec:02d} DP{dp} TP{dp * 4}] Decode batch, #running-req: {running}, #token: 900, "
            f"token usage: 0.01, accept len: {accept:.2f}, accept rate: 0.40, cuda graph: True, "
            f"gen throughput (token/s): {tps:.2f}, #queue-req: 0, ")


async def test_session_sums_dp_ranks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    session = Session(Profile(name="dp", local=True, port=1, state_dir=str(tmp_path / "st")))
    try:
        session.ingest_log([line(1, 0, 3.0, 100.0), line(1, 1, 2.0, 300.0), line(2, 0, 3.0, 100.0)], log_time=True)
        tps = session.telemetry.series["gen_tps"].values()
        acc = session.telemetry.series["accept_len"].values()
        assert tps == pytest.approx([100.0, 400.0, 400.0])
        assert acc[-1] == pytest.approx((3.0 * 100 + 2.0 * 300) / 400)
        assert session.telemetry.series["running_req"].values()[-1] == 8
    finally:
        await session.close()


def test_plain_and_stale_ranks_pass_through() -> None:
    merger = RankMerger(stale_s=30.0)
    plain = parse_line("[2026-04-05 20:00:01 TP0] Decode batch, #running-req: 1, accept len: 2.00, "
                       "gen throughput (token/s): 50.00, #queue-req: 0")
    assert isinstance(plain, DecodeStats) and merger.merge(plain) is plain
    first = parse_line(line(1, 0, 3.0, 100.0))
    late = parse_line(line(59, 1, 2.0, 300.0))
    assert isinstance(first, DecodeStats) and isinstance(late, DecodeStats)
    merger.merge(first)
    assert merger.merge(late).gen_throughput == pytest.approx(300.0)  # rank 0 fell silent 58 s ago
