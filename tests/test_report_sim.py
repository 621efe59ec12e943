"""The report end to end against the real sim server through LocalHost: the seeds' broken server started,
benchmarked, the `train-[:-1]` preset applied (a restart), benchmarked again; the report's before/after is
the ledger's two benchmarks, its chart marks the restarts, and `eagle3-tui report --local` from its own
event loop writes the same story (the ledger is the host's) with the points it watched."""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
from pathlib import Path

import pytest

from eagle3_tui.cli import main
from eagle3_tui.report import charts as ch
from eagle3_tui.report import gather, write_report
from eagle3_tui.report.markdown import SECTIONS
from eagle3_tui.session import Session
from eagle3_tui.telemetry.changes import change_effects
from tests.test_report import linked, png_size
from tests.test_session_e2e import BENCH, _profile, _stop

pytestmark = pytest.mark.slow


def _cli(session: Session, world, *argv: str) -> tuple[int, str, str]:
    """`eagle3-tui ARGV --host NAME` (the real entry point), NAME the session's host as a local profile: its
    server, state dir and ledger rows."""
    name = session.profile.name
    prof = Path(session.profile.local_state_dir()).parent / "hosts.toml"
    prof.write_text(f'["{name}"]\nlocal = true\ndata_slots = {list(world.slot_boundaries)}\n'
                    f'state_dir = "{session.profile.local_state_dir()}"\n')
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main([*argv, "--host", name, "--profile", str(prof), "--port", str(session.server.port)])
    return rc, out.getvalue(), err.getvalue()


async def test_report_after_a_benchmark_and_an_applied_change(demo_world, tmp_path):
    session = Session(_profile(demo_world, tmp_path))
    try:
        await session.attach()
        await session.control.start()
        before = await session.bench.run(**BENCH)
        await session.presets.apply(await session.presets.plan("train-[:-1]"))
        after = await session.bench.run(**BENCH)

        data = gather(session)
        path = write_report(data, tmp_path / "report")
        md = path.read_text(encoding="utf-8")
        assert re.findall(r"^## (.+)$", md, flags=re.M) == list(SECTIONS)
        for link in linked(md):
            png_size(path.parent / link)
        assert "charts/changes-before-after.png" in linked(md)

        (effect,) = change_effects(session.records.rows())
        assert effect.change.note == "applied train-[:-1]"
        assert effect.before is not None and effect.after is not None
        assert effect.before.tok_s == pytest.approx(before.output_tps)
        assert effect.after.tok_s == pytest.approx(after.output_tps)
        row = (f"| {effect.label} |", f"| {effect.before.accept_len:.2f} | {effect.after.accept_len:.2f} | "
               f"{before.output_tps:.1f} | {after.output_tps:.1f} |")
        assert all(r in md for r in row), row
        # the server now runs the trained wiring: the report's header says so, and the doctor no longer
        # reports the mismatch the seeds' server had
        assert "| preset | train-[:-1] |" in md and "`wiring-mismatch`" not in md

        # the restarts the session made are labelled markers on the chart, on both panels
        restarts = [m.label for m in data.over_time.markers if m.restart]
        assert "start" in restarts and "preset train-[:-1]" in restarts
        top, bottom = ch.over_time_chart(data.over_time, tmp_path / "t.png", "h").panels
        assert top.markers == bottom.markers == len(data.over_time.markers)
        assert top.legend[0] == "accept length, each decode line (server log)" and "restart / change" in top.legend
        assert bottom.legend[0] == "generation tok/s, each decode line (server log)"

        # headless, from its own event loop: the same ledger story, the points it watched
        rc, out, err = await asyncio.to_thread(_cli, session, demo_world, "report", "--watch", "3", "-o",
                                               str(tmp_path / "cli"))
        assert rc == 0, err
        assert out.strip() == str(tmp_path / "cli" / "report.md")
        cli_md = (tmp_path / "cli" / "report.md").read_text(encoding="utf-8")
        assert all(r in cli_md for r in row)
        assert "The points are the 3 s `eagle3-tui report` watched the server." in cli_md
        # --readonly does not refuse it (it writes only here), and an earlier report is replaced
        rc, out, err = await asyncio.to_thread(_cli, session, demo_world, "report", "--watch", "0", "--readonly",
                                               "-o", str(tmp_path / "cli"))
        assert rc == 0, err
        assert "watched the server" not in (tmp_path / "cli" / "report.md").read_text(encoding="utf-8")
    finally:
        await _stop(session)


def test_report_refuses_bad_input_in_one_line_before_attaching(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    # the host does not exist: each refusal must come before any connection attempt
    for argv, said in (
        (["-o", str(blocker / "sub")], f"cannot write the report to {blocker / 'sub'}: {blocker} is not a folder; name another with -o"),
        (["-o", str(blocker)], f"cannot write the report to {blocker}: it exists and is not a folder; name another with -o"),
        (["--watch", "-1"], "--watch must be 0 or more seconds, not -1"),
        (["--demo"], "--demo reports on the demo world: give it without --host or --local"),
    ):
        rc = main(["report", "--host", "no-such-host.invalid", *argv])
        err = capsys.readouterr().err
        assert (rc, err) == (2, f"eagle3-tui: {said}\n"), argv
    assert [p.name for p in tmp_path.iterdir()] == ["file"]
