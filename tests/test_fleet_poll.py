"""The fleet refreshed over real HTTP on loopback: healthy servers of both engines beside one that answers
garbage, one that hangs and one that is gone. Each failure marks its own row; the others keep refreshing."""

from __future__ import annotations

import httpx

from eagle3_tui.fleet import DirectFleet, FleetSpec, parse_fleet
from tests.fleet_fakes import Inflight, fake_server, scale_vllm, sglang_metrics, vllm_metrics
from tests.plugins.ports import free_port

LAUNCH = ("python -m sglang.launch_server --model-path /models/target --speculative-algorithm EAGLE3 "
          "--speculative-draft-model-path /models/k2-eagle3 --speculative-num-steps 3 --speculative-eagle-topk 1 "
          "--speculative-num-draft-tokens 16")


def server_info(draft_tokens: int = 4) -> dict[str, object]:
    return {"version": "0.5.23", "speculative_draft_model_path": "/models/k2-eagle3", "speculative_num_steps": 3,
            "speculative_eagle_topk": 1, "speculative_num_draft_tokens": draft_tokens,
            "served_model_name": "target", "launch_command": LAUNCH}


def spec(servers: list[dict[str, object]], timeout_s: float = 1.0) -> FleetSpec:
    return parse_fleet({"server": servers, "timeout_s": timeout_s, "window_s": 60})


async def test_each_failure_marks_its_row_and_the_others_keep_refreshing() -> None:
    with fake_server() as a, fake_server() as b, fake_server() as v, fake_server() as bad, fake_server() as hang:
        a.set("/metrics", sglang_metrics(2.4, 1000.0))
        a.set("/server_info", server_info())
        b.set("/metrics", sglang_metrics(1.3, 1000.0))
        b.set("/server_info", server_info())
        v.set("/metrics", vllm_metrics())
        v.set("/version", {"version": "0.32.0"})
        bad.set("/metrics", "<html><body><h1>502 Bad Gateway</h1></body></html>\n", content_type="text/html")
        hang.set("/metrics", sglang_metrics(2.4, 10.0), delay_s=5.0)
        gone = f"http://127.0.0.1:{free_port()}"
        fleet_spec = spec([
            {"name": "a", "base_url": a.base_url, "engine": "sglang"},
            {"name": "b", "base_url": b.base_url, "engine": "sglang"},
            {"name": "v", "base_url": v.base_url, "engine": "vllm", "draft": "k2-eagle3-speculators"},
            {"name": "bad", "base_url": bad.base_url, "engine": "sglang"},
            {"name": "hang", "base_url": hang.base_url, "engine": "sglang"},
            {"name": "gone", "base_url": gone, "engine": "vllm"},
        ])
        async with httpx.AsyncClient() as http:
            fleet = DirectFleet(fleet_spec, http)
            rows = {r.name: r for r in await fleet.refresh()}
            a.set("/metrics", sglang_metrics(2.5, 1500.0))
            v.set("/metrics", scale_vllm(vllm_metrics(), 2.0))
            first_a = rows["a"].updated
            rows = {r.name: r for r in await fleet.refresh()}

            ra, rb, rv = rows["a"], rows["b"], rows["v"]
            assert ra.status == "ok" and ra.updated is not None and first_a is not None and ra.updated > first_a
            assert (ra.release, ra.draft, ra.steps, ra.topk, ra.draft_tokens) == ("0.5.23", "k2-eagle3", 3, 1, 4)
            assert ra.accept_now == 2.5 and ra.accept_window == (2.4 + 2.5) / 2
            assert ra.finding == "warning steps-override"  # 16 asked for, topk 1: the launch command says so
            assert rb.outlier.startswith("accept 1.30 vs 2.45") and not ra.outlier
            assert rv.status == "ok" and rv.release == "0.32.0" and (rv.steps, rv.topk, rv.draft_tokens) == (3, 1, 4)
            assert rv.accept_now is not None and abs(rv.accept_now - (1 + 1899 / 1193)) < 1e-9
            assert len(rv.per_position) == 3 and rv.tok_s is not None and rv.tok_s > 0
            assert rows["bad"].status == "garbage" and "no sglang:* metrics" in rows["bad"].reason
            assert rows["hang"].status == "down" and rows["hang"].reason == "no answer in 1 s"
            assert rows["gone"].status == "down" and rows["gone"].reason.startswith("not reachable")
            assert all("\n" not in r.reason for r in rows.values())

            # the garbage server comes back: its row is read again; a cut answer is garbage too
            bad.set("/metrics", sglang_metrics(2.45, 100.0))
            a.set("/metrics", sglang_metrics(2.5, 1500.0)[:-12])
            rows = {r.name: r for r in await fleet.refresh()}
            assert rows["bad"].status == "ok" and rows["bad"].accept_now == 2.45
            assert rows["a"].status == "garbage" and "cut short" in rows["a"].reason
            assert rows["a"].accept_window == (2.4 + 2.5) / 2  # the last values stay on a marked row
            assert not rows["b"].outlier or rows["b"].status == "ok"


async def test_servers_are_read_at_once_each_with_its_deadline() -> None:
    """Three hanging servers are waited on together (all three requests in flight at once), each cut off by
    its own deadline, and the healthy one is read beside them."""
    inflight = Inflight()
    with fake_server() as h1, fake_server() as h2, fake_server() as h3, fake_server() as ok:
        for h in (h1, h2, h3):
            h.inflight = inflight
            h.set("/metrics", "", delay_s=3.0)
        ok.set("/metrics", sglang_metrics(2.0, 10.0))
        fleet_spec = spec([{"name": n, "base_url": s.base_url, "engine": "sglang"}
                           for n, s in (("h1", h1), ("h2", h2), ("h3", h3), ("ok", ok))], timeout_s=0.5)
        async with httpx.AsyncClient() as http:
            fleet = DirectFleet(fleet_spec, http)
            rows = await fleet.refresh()
        assert inflight.peak == 3
        assert [r.status for r in rows] == ["down", "down", "down", "ok"]
        assert [r.reason for r in rows[:3]] == ["no answer in 0.5 s"] * 3
