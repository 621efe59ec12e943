"""The view model as plain unit tests (no App, no Pilot): status-bar parts, chart series, strips, and
the one predicted accept length, over snapshots built from the project's own views and telemetry."""

from __future__ import annotations

import dataclasses

from eagle3_tui.doctor.findings import Finding
from eagle3_tui.eagle.accuracy import predicted_accept_len
from eagle3_tui.session import ConnView, ServerView
from eagle3_tui.sglang.logline import DecodeStats, LogReader
from eagle3_tui.telemetry.metrics import Telemetry
from eagle3_tui.ui import viewmodel as vm
from tests.ui.recorded import recorded_lines, recorded_predict_report, recorded_report

SERVED = ServerView(
    state="ready",
    pid=4242,
    started_at=1000.0,
    speculative=True,
    steps=1,
    topk=1,
    draft_tokens=2,
    requested_draft_tokens=16,
    layer_ids=None,
    boundaries=(2, 6, 9),
    active_preset="sglang-default",
)


def recorded_telemetry() -> tuple[Telemetry, float]:
    tel = Telemetry()
    tel.baseline_tps = 90.0
    reader = LogReader()
    for line in recorded_lines():
        for ev in reader.feed(line):
            if isinstance(ev, DecodeStats):
                tel.ingest(ev)
    last = tel.last_time()
    assert last is not None
    return tel, last


def snap(**changes) -> vm.Snapshot:
    tel, _ = recorded_telemetry()
    base = vm.Snapshot(host="gpu-box", conn=ConnView("connected"), server=SERVED, telemetry=tel)
    return dataclasses.replace(base, **changes)


def test_status_parts_say_what_the_server_runs_and_how_it_does():
    s = snap(findings=(Finding("steps-override", "warning", "t"), Finding("wiring-mismatch", "error", "t")))
    parts = vm.status_parts(s, now=1398.0, restart_note="restart: launching (3s)")
    top, bottom = " │ ".join(parts.top), " │ ".join(parts.bottom)
    assert top.startswith("[b]gpu-box[/b] [$success]● connected[/]")
    assert "server [$success]ready[/] pid 4242 up 6m38s" in top
    assert "draft tokens [$accept-warn]2 (asked 16)[/]" in top
    assert "restart: launching (3s)" in top and "READONLY" not in top
    assert bottom.startswith("ids unset → h2, h6, h9 │ preset sglang-default")
    assert "tok/s (base 90.0)" in bottom and "1✖" in bottom and "1▲" in bottom
    assert parts.markup().count("\n") == 1


def test_a_vllm_server_is_described_in_vllms_words():
    """vLLM's one knob is num_speculative_tokens (a chain); the status bar says that, not SGLang's three flags."""
    server = ServerView(state="ready", speculative=True, steps=3, topk=1, draft_tokens=4, engine="vllm")
    assert vm.flags_text(server) == "num_speculative_tokens 3"
    assert vm.flags_text(dataclasses.replace(server, engine="sglang")) == "steps 3 topk 1 draft tokens 4"


def test_status_parts_readonly_reconnecting_and_no_speculation():
    s = snap(conn=ConnView("reconnecting", attempt=2, next_try_s=4.0), readonly=True,
             server=dataclasses.replace(SERVED, speculative=False, state="starting"))  # fmt: skip
    parts = vm.status_parts(s, now=0.0)
    assert "reconnecting 2, next try in 4s" in parts.top[0]
    assert "speculation off" in parts.top and "READONLY" in parts.top[-1]
    assert " up " not in parts.top[1]


def test_the_predicted_accept_length_is_the_checks_for_the_served_boundaries():
    report = recorded_report()
    s = snap(check=report)
    expected = predicted_accept_len(report, SERVED.boundaries)
    assert expected is not None and vm.predicted(s) == expected
    assert f"(check {expected:.2f})" in " ".join(vm.status_parts(s, now=0.0).bottom)
    # other boundaries than any wiring measured: no prediction, no reference line
    other = snap(check=report, server=dataclasses.replace(SERVED, boundaries=(1, 2, 3)))
    assert vm.predicted(other) is None
    assert vm.accept_series(other, t_end=0.0, window_s=300, points=50).references == []


def test_accept_series_has_the_prediction_the_tps_series_the_baseline():
    tel, t_end = recorded_telemetry()
    tel.mark(t_end - 100, "preset steps=15")
    s = snap(telemetry=tel, check=recorded_report())
    acc = vm.accept_series(s, t_end=t_end, window_s=300, points=60)
    assert 0 < len(acc.xs) <= 60 and all(-300 <= x <= 0 for x in acc.xs)
    assert acc.references[0][1].startswith("check predicts ")
    assert acc.markers == [(-100.0, "preset steps=15")]
    tps = vm.tps_series(s, t_end=t_end, window_s=60, points=500)
    assert tps.references == [(90.0, "baseline 90.0")]
    assert len(tps.xs) < len(acc.xs) or len(tps.xs) <= 31  # a one-minute window holds fewer points


def test_a_chart_line_breaks_where_the_server_reported_nothing():
    """Two benchmarks on a real vLLM server, minutes apart (it logs SpecDecoding lines only while busy, every
    10 s): the line is drawn within each and not across the idle gap between them, where nothing was measured."""
    tel = Telemetry()
    times = [0.0, 10.0, 20.0, 30.0, 200.0, 210.0, 220.0]
    for t, a in zip(times, [1.4, 1.5, 1.4, 1.5, 2.3, 2.2, 2.3], strict=True):
        tel.series["accept_len"].append(t, a)
    data = vm.series(tel, "accept_len", t_end=230.0, window_s=300, points=300)
    runs = data.runs()
    assert [len(xs) for xs, _ in runs] == [4, 3]
    assert runs[0][1] == [1.4, 1.5, 1.4, 1.5] and runs[1][1] == [2.3, 2.2, 2.3]
    assert [len(xs) for xs, _ in vm.ChartData(xs=[0.0, 5.0, 10.0], ys=[1, 2, 3]).runs()] == [3]
    assert vm.ChartData().runs() == []


def test_strips_and_windows():
    tel, t_end = recorded_telemetry()
    name, fmt = vm.STRIPS[0][1], vm.STRIPS[0][2]
    strip = vm.strip_view(tel, name, fmt, t_end=t_end, window_s=300, width=40)
    assert 0 < len(strip.values) <= 40 and strip.last == f"{tel.series[name].last()[1]:.0f}"
    assert vm.strip_view(Telemetry(), name, fmt, t_end=0, window_s=300, width=40) == vm.StripView()
    assert vm.step_window(300.0, -1) == 60.0 and vm.step_window(60.0, -1) == 60.0
    assert vm.step_window(123.0, 1) == 900.0 and vm.step_window(6 * 3600.0, 1) == 6 * 3600.0
    assert vm.window_label(900) == "window 15 min (-/+)" and vm.window_label(3600) == "window 1 h (-/+)"


def test_restart_note_is_empty_once_the_restart_ended():
    assert vm.restart_note("launching", "pid 7", 3.2) == "restart: launching pid 7 (3s)"
    for phase in ("ready", "failed", "done"):
        assert vm.restart_note(phase, "x", 9.0) == ""


def test_the_check_number_and_the_chart_line_follow_the_served_flags():
    """One function feeds both: with the check's grid, the status bar and the chart predict the
    flags served now, so applying steps=15 moves them (the served wiring's 15/1/16, not the
    steps-1 chain)."""
    report = recorded_predict_report()
    before = snap(check=report)
    assert vm.served_config(SERVED) == (1, 1, 2)
    assert vm.predicted(before) == predicted_accept_len(report, SERVED.boundaries, (1, 1, 2)) == 1.3305
    steps15 = dataclasses.replace(SERVED, steps=15, draft_tokens=16, active_preset="steps=15")
    after = snap(check=report, server=steps15)
    assert vm.predicted(after) == predicted_accept_len(report, (2, 6, 9), (15, 1, 16)) == 1.4969
    assert "(check 1.50)" in " ".join(vm.status_parts(after, now=0.0).bottom)
    assert "(check 1.33)" in " ".join(vm.status_parts(before, now=0.0).bottom)
    line = vm.accept_series(after, t_end=0.0, window_s=300, points=50).references
    assert line == [(1.4969, "check predicts 1.50 (15/1/16)")]
    # the training wiring served: its own grid
    trained = snap(check=report, server=dataclasses.replace(steps15, boundaries=(0, 2, 6)))
    assert vm.predicted(trained) == 3.512
    # flags the check did not predict: the chain of the check's steps, and the line says so
    odd = snap(check=report, server=dataclasses.replace(SERVED, steps=7, draft_tokens=8))
    assert vm.predicted(odd) == 1.3305 and not vm.predicted_for_flags(odd)
    assert vm.accept_series(odd, t_end=0.0, window_s=300, points=50).references[0][1] == "check predicts 1.33 (chain of 1)"
    # no speculation: no served flags
    assert vm.served_config(dataclasses.replace(SERVED, speculative=False)) is None


def test_prediction_rows_mark_the_served_wiring_and_flags():
    report = recorded_predict_report()
    rows = vm.prediction_rows(report, SERVED.boundaries, (1, 1, 2))
    assert [r.wiring for r in rows] == ["training"] * 8 + ["draft config"] * 8
    assert rows[0] == vm.PredictionRow("training", "embed, h2, h6", (1, 1, 2), 1.751)
    served = [r for r in rows if r.served_flags]
    assert served == [vm.PredictionRow("draft config", "h2, h6, h9", (1, 1, 2), 1.3305, True, True)]
    assert all(r.served_wiring for r in rows[8:]) and not any(r.served_wiring for r in rows[:8])
    assert {r.config for r in rows[8:]} == {(1, 1, 2), (15, 1, 16), (3, 1, 4), (5, 1, 6), (3, 4, 8), (5, 4, 8),
                                            (5, 4, 16), (6, 8, 32)}
    # boundaries unknown: nothing marked; no report, no rows
    assert not any(r.served_wiring for r in vm.prediction_rows(report, None, (1, 1, 2)))
    assert vm.prediction_rows(None, (2, 6, 9), None) == []
    assert vm.prediction_rows(recorded_report(), (2, 6, 9), (1, 1, 2)) == []  # a check without --predict


def test_check_grid_holds_the_served_flags_and_the_flag_presets():
    presets = [{"speculative-num-steps": 15}, dict.fromkeys(("speculative-algorithm", "speculative-num-steps")),
               {"--disable-cuda-graph": True}, {"speculative-eagle-topk": 1, "speculative-num-steps": 3}]
    grid = vm.check_grid(SERVED, presets)
    assert grid[:3] == [(1, 1, 2), (15, 1, 16), (3, 1, 4)]  # served, steps=15 (topk 1: draft 16), 3/1/4
    assert (3, 4, 8) in grid and (6, 8, 32) in grid and len(grid) == len(set(grid))
    rows = [{"steps": 7, "topk": 1, "draft_tokens": 8}, {"steps": None}, {"steps": 7, "topk": 1, "draft_tokens": 8}]
    assert vm.ledger_configs(rows) == [(7, 1, 8)]
    assert vm.check_grid(dataclasses.replace(SERVED, steps=15, draft_tokens=16), (), [(1, 1, 2)])[:2] == [
        (15, 1, 16), (1, 1, 2)]  # rolling back finds its prediction
    off = vm.check_grid(dataclasses.replace(SERVED, speculative=False), presets)
    assert (15, 1, 16) not in off and (3, 4, 8) in off


def test_sweep_progress_and_summary():
    from eagle3_tui.session.sweep import SweepResult, SweepStep

    first = vm.sweep_progress(0, 3, None, None, (3, 4, 8))
    assert (first.done, first.total) == (0, 3)
    assert first.text == "sweep 0/3 · serving 3/4/8… · esc stops after this step and restores"
    step = SweepStep((3, 4, 8), 1.85, 1.91, 40.5)
    mid = vm.sweep_progress(1, 3, step, 42.0, (5, 4, 16))
    assert mid.text == ("sweep 1/3 · 3/4/8 accept 1.91 (predicted 1.85), 40.5 tok/s · serving 5/4/16… · ETA 42s"
                        " · esc stops after this step and restores")
    bad = vm.sweep_progress(3, 3, SweepStep((6, 8, 32), None, error="server failed to start\ntail"), 0.0, None)
    assert bad.text == "sweep 3/3 · 6/8/32 [$accept-bad]failed[/]: server failed to start · restoring the start…"
    stopped = vm.sweep_progress(1, 3, step, 42.0, None, stopping=True)
    assert stopped.text.endswith("40.5 tok/s · restoring the start…")
    done = SweepResult(["x"], [step, SweepStep((6, 8, 32), None, error="e")], restored=True, stopped=True)
    assert vm.sweep_summary(done) == ("sweep stopped after 2 configurations (1 failed to serve); start restored", False)
    lost = SweepResult(["x"], [step], restored=False, restore_error="port busy")
    assert vm.sweep_summary(lost) == (
        "sweep done: 1 configuration; the starting launch command was NOT restored: port busy", True)


def test_job_progress_lines():
    p = vm.check_progress(20, 40, 3.0, "train [:-1]")
    assert (p.done, p.total) == (20, 40) and p.text == "checking 20/40 · train [:-1] · ETA 3s · esc cancels"
    assert vm.check_progress(0, 0, None, None).total == 1 and vm.CHECK_STARTING.total is None
    assert vm.bench_progress(3, 16, "benchmark") == vm.JobProgress("benchmark: 3/16 requests", 3, 16)
