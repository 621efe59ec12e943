"""The shareable report over a real session (the recorded SGLang log fed through its own log feed, the
doctor's real findings, a recorded check, ledger rows in a real SQLite file): its Markdown names every
section and links files that exist, its PNGs are real images with the series the data holds, its numbers
are the console's, and bad input (nothing yet, an unusable folder, a chart that fails) gives one clear
line and leaves nothing half-written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from eagle3_tui.errors import UserError
from eagle3_tui.report import charts as ch
from eagle3_tui.report import gather, write_report
from eagle3_tui.report.data import Header, Live, ReportData
from eagle3_tui.report.markdown import SECTIONS
from eagle3_tui.report.write import default_dir
from eagle3_tui.session import redact_argv
from eagle3_tui.telemetry.changes import change_effects
from eagle3_tui.telemetry.ledger import Ledger
from eagle3_tui.ui import viewmodel as vm
from tests.ui.recorded import recorded_report, recorded_session

PNG = b"\x89PNG\r\n\x1a\n"


def seed_ledger(host: str, t0: float) -> Ledger:
    """The story's rows: a baseline, a benchmark, train-[:-1] applied and restarted, a benchmark after it,
    a second preset never measured after."""
    led = Ledger()
    led.record("baseline", host, {"speculative": False}, {"tok_s": 90.0, "baseline": True}, ts=t0 - 900)
    led.record("benchmark", host, {"steps": 1, "topk": 1, "draft_tokens": 2},
               {"tok_s": 56.8, "accept_len": 1.33, "per_position": [0.33]}, ts=t0 - 600)
    led.record("preset", host, {"preset": "train-[:-1]"}, {"diff": ""}, "applied train-[:-1]", ts=t0 - 300)
    led.record("restart", host, {}, {"ok": True, "seconds": 12.0}, "preset train-[:-1]", ts=t0 - 280)
    led.record("benchmark", host, {"steps": 1, "topk": 1, "draft_tokens": 2},
               {"tok_s": 61.5, "accept_len": 1.73}, ts=t0 - 200)
    led.record("preset", host, {"preset": "steps=15"}, {}, "applied steps=15", ts=t0 - 60)
    return led


def png_size(path: Path) -> tuple[int, int]:
    """The PNG's signature checked and the image decoded whole (PIL), its (width, height)."""
    from PIL import Image

    assert path.read_bytes()[:8] == PNG, path
    with Image.open(path) as im:
        im.load()
        return im.size


def linked(md: str) -> list[str]:
    return re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)


@pytest.fixture
def story(tmp_path):
    session, _ = recorded_session(tmp_path)
    session.known.check = recorded_report()
    end = session.telemetry.last_time()
    assert end is not None
    seed_ledger(session.profile.name, end)
    return session


def test_change_effects_pair_each_change_with_the_benchmarks_around_it():
    led = seed_ledger("h", 1_790_000_000.0)
    led.record("benchmark", "other-host", {}, {"tok_s": 1.0, "accept_len": 1.0})
    effects = change_effects(led.rows(host="h"))
    assert [e.change.note for e in effects] == ["applied train-[:-1]", "applied steps=15"]
    first, second = effects
    assert (first.before.accept_len, first.after.accept_len) == (1.33, 1.73)  # type: ignore[union-attr]
    # the benchmark after the first change is the second's before; nothing measured after the second
    assert second.before is first.after and second.after is None
    # a baseline is never a before, and no measurement crosses another change
    led.record("baseline", "h", {"speculative": False}, {"tok_s": 95.0, "baseline": True})
    led.record("rollback", "h", {}, {}, "rolled back steps=15")
    third = change_effects(led.rows(host="h"))[-1]
    assert third.before is None and third.after is None and third.label.endswith("rolled back steps=15")


def test_report_over_a_session_names_every_section_links_real_charts_and_shows_the_consoles_numbers(story, tmp_path):
    data = gather(story)
    path = write_report(data, tmp_path / "out")
    assert path == tmp_path / "out" / "report.md"
    md = path.read_text(encoding="utf-8")
    heads = re.findall(r"^## (.+)$", md, flags=re.M)
    assert heads == list(SECTIONS)
    links = linked(md)
    assert sorted(links) == ["charts/accept-and-tps-over-time.png", "charts/changes-before-after.png",
                             "charts/per-position-acceptance.png"]
    for link in links:
        w, h = png_size(path.parent / link)
        assert w >= 800 and h >= 450, (link, w, h)
    assert sorted(p.name for p in (path.parent / "charts").iterdir()) == sorted(Path(x).name for x in links)

    # the status bar's numbers, from the same functions
    snap = vm.snapshot_of(story)
    summary = story.telemetry.summary(vm.SUMMARY_WINDOW_S)
    expected = vm.predicted(snap)
    assert expected is not None and summary.accept_len is not None
    assert f"| accept length | {summary.accept_len:.2f} |" in md
    assert re.search(rf"\| check predicts \| {expected:.2f} \((\d+/\d+/\d+|chain of \d+)\) \|", md)
    assert f"| baseline tok/s (no speculation) | {story.telemetry.baseline_tps:.1f} |" in md
    # the check's side-by-side table, the served wiring marked, as the Accuracy pane marks it
    served = story.check.served_wiring(story.server.fed_boundaries())
    assert served is not None and f"{served.name} (served)" in md
    assert f"{100 * served.top1:.1f}%" in md
    # before/after each change, from the ledger rows
    assert "| #3 applied train-[:-1] |" in md and "| 1.33 | 1.73 | 56.8 | 61.5 |" in md
    assert "| #6 applied steps=15 |" in md and "not measured" in md
    # the findings with their evidence and fix, as the doctor gave them
    assert story.findings
    for f in story.findings:
        assert f"`{f.rule_id}`: {f.title}" in md
        for e in f.evidence:
            assert e.detail in md
    # secrets of the launch command never reach the report
    assert "```sh\n" in md


def test_each_chart_draws_the_series_its_data_holds(story, tmp_path):
    data = gather(story)
    ot = ch.over_time_chart(data.over_time, tmp_path / "t.png", "h")
    top, bottom = ot.panels
    # the prediction's line is labelled as the console's accept chart labels its own
    snap = vm.snapshot_of(story)
    ((_, console_label),) = vm.accept_series(snap, t_end=story.telemetry.last_time() or 0.0, window_s=300.0,
                                             points=10).references
    assert console_label.startswith("check predicts ")
    restarts = [m for m in data.over_time.markers if m.restart]
    # the console's marker and the ledger's restart inside the points' span, each a vertical line on both panels
    assert [m.label for m in restarts] == ["preset train-[:-1]", "preset training-wiring"]
    for panel, points, what, reference in (
            (top, data.over_time.accept, "accept length", console_label),
            (bottom, data.over_time.tps, "generation tok/s",
             f"baseline {story.telemetry.baseline_tps:.1f} tok/s (no speculation)")):
        # each decode line a dot; past MEAN_BUCKETS points the bucket means as the line too
        series = [f"{what}, each decode line (server log)"]
        if len(points) > ch.MEAN_BUCKETS:
            series.append(ch.mean_label(what, points[-1][0] - points[0][0]))
        extra = ("restart / change",) if panel is top else ()
        assert panel.legend == (*series, reference, *extra)
        assert (panel.lines, panel.markers, panel.bars) == (len(series) + 1, len(restarts), 0)

    pos = ch.positions_chart(data.positions, tmp_path / "p.png", "h")
    (panel,) = pos.panels
    assert panel.bars == len(data.positions) == 2
    assert panel.legend == ("benchmark #2, the requests'", f"check predicts ({story.check.served_wiring(story.server.fed_boundaries()).name})")

    chg = ch.changes_chart(data.changes, tmp_path / "c.png", "h")
    assert [(p.bars, p.legend) for p in chg.panels] == [(2, ("before", "after"))] * 2
    for chart in (ot, pos, chg):
        png_size(chart.path)


def test_a_session_with_nothing_yet_says_what_is_missing_in_every_section(tmp_path):
    session, _ = recorded_session(tmp_path)
    session.telemetry.reset()
    session.survey.findings = []
    path = write_report(gather(session), tmp_path / "empty")
    md = path.read_text(encoding="utf-8")
    assert re.findall(r"^## (.+)$", md, flags=re.M) == list(SECTIONS)
    assert linked(md) == [] and not any((path.parent / "charts").iterdir())
    for said in ("No live numbers", "No chart: the server has logged no accept length",
                 "No per-position acceptance: SGLang does not report it live (vLLM does); no benchmark recorded it; "
                 "no accuracy check ran", "No change applied", "No accuracy check ran", "No findings",
                 "No runs recorded for recorded yet"):
        assert said in md, said
    # every section has text under it
    for body in re.split(r"^## .+$", md, flags=re.M)[1:]:
        assert body.strip()


def test_a_check_stored_in_the_ledger_is_shown_when_the_session_ran_none(tmp_path):
    session, _ = recorded_session(tmp_path)
    Ledger().record("check", session.profile.name, {}, recorded_report().to_dict(), "accuracy check")
    data = gather(session)
    assert data.check is not None and data.check.source.startswith("the newest check in the ledger (row 1,")
    assert data.live.predicted == session.server.predicted(data.check.report)


def _data(host: str = "h") -> ReportData:
    return ReportData(Header(host, 1_790_000_000.0, "0"), Live(60.0))


def test_an_unusable_folder_is_one_line_and_nothing_is_written(tmp_path):
    tmp_path = tmp_path / "reports"
    tmp_path.mkdir()
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    with pytest.raises(UserError) as err:
        write_report(_data(), blocker / "report")
    assert "\n" not in str(err.value) and str(blocker) in str(err.value)

    other = tmp_path / "notes"
    other.mkdir()
    (other / "mine.txt").write_text("keep")
    with pytest.raises(UserError, match="holds other files"):
        write_report(_data(), other)
    assert [p.name for p in other.iterdir()] == ["mine.txt"]
    with pytest.raises(UserError, match="not a folder"):
        write_report(_data(), blocker)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "notes"]


def test_an_earlier_report_is_replaced_whole_and_a_failed_chart_leaves_it_untouched(tmp_path, monkeypatch, story):
    out = tmp_path / "reports" / "r"
    write_report(_data(), out)
    first = (out / "report.md").read_text()
    write_report(gather(story), out)
    assert (out / "report.md").read_text() != first and any((out / "charts").iterdir())
    second = (out / "report.md").read_text()

    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ch, "changes_chart", broken)
    with pytest.raises(UserError, match="No space left on device"):
        write_report(gather(story), out)
    assert (out / "report.md").read_text() == second
    assert [p.name for p in out.parent.iterdir()] == ["r"], "no temp folder left beside it"


def test_the_default_folder_is_named_for_the_host_and_the_time_in_the_current_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert default_dir("gpu box/1", 1_790_000_000.0) == tmp_path / "eagle3-report-gpu_box_1-20260921-141320"
    path = write_report(_data("gpu1"))
    assert path.parent.parent == tmp_path and path.parent.name.startswith("eagle3-report-gpu1-")


def test_secret_flag_values_are_redacted_and_nothing_else():
    argv = ["python", "-m", "sglang.launch_server", "--api-key", "s3cret", "--hf-token=tok", "--skip-tokenizer-init",
            "--tokenizer-path", "/t", "--max-total-tokens", "8", "--speculative-num-draft-tokens", "16"]
    assert redact_argv(argv) == ["python", "-m", "sglang.launch_server", "--api-key", "<redacted>",
                                 "--hf-token=<redacted>", "--skip-tokenizer-init", "--tokenizer-path", "/t",
                                 "--max-total-tokens", "8", "--speculative-num-draft-tokens", "16"]


def test_per_position_acceptance_comes_from_each_source_that_has_it(story):
    """vLLM's live rates (the newest per position, as the console's row shows them), the newest benchmark's,
    the check's chain on the served wiring; SGLang's missing live rates are said, not drawn as zeros."""
    from eagle3_tui.eagle.predict import chain_positions
    from eagle3_tui.engines.base import SpecStats
    from eagle3_tui.report.gather import check_part as part_of
    from eagle3_tui.report.gather import position_series
    from eagle3_tui.telemetry.metrics import Telemetry

    rows = story.records.rows()
    check = part_of(story.check, rows, story.server)
    got, note = position_series(story.telemetry, "sglang", rows, check)
    assert note == "SGLang does not report it live (vLLM does)"
    served = story.check.served_wiring(story.server.fed_boundaries())
    assert [s.label for s in got] == ["benchmark #2, the requests'", f"check predicts ({served.name})"]
    assert got[0].rates == (0.33,) and got[1].rates == tuple(chain_positions(served.step_accept))

    tele = Telemetry()
    for t, rates in ((1.0, (0.9, 0.5, 0.2)), (2.0, (0.6, 0.4, 0.25))):
        tele.ingest_spec(SpecStats("vllm", "log", t, 2.0, rates, 0.4, 50.0))
    got, note = position_series(tele, "vllm", [], None)
    assert [(s.label, s.rates) for s in got] == [("vllm, live (newest)", tele.last_positions())]
    assert tele.last_positions() == (0.6, 0.4, 0.25)
    assert note == "no benchmark recorded it; no accuracy check ran"


def test_an_unreadable_ledger_is_said_in_the_report_which_is_still_written(tmp_path):
    session, _ = recorded_session(tmp_path)
    db = Ledger().path
    db.parent.mkdir(parents=True, exist_ok=True)
    db.write_bytes(b"not a database" * 100)
    path = write_report(gather(session), tmp_path / "out")
    md = path.read_text(encoding="utf-8")
    assert re.findall(r"^## (.+)$", md, flags=re.M) == [*SECTIONS, "Not read"]
    assert f"- the ledger could not be read: the ledger {db} is not a usable SQLite database" in md
    assert "charts/accept-and-tps-over-time.png" in linked(md)  # the live part does not need the ledger
