"""The demo's whole story on its SGLang 0.5.6-like sim (Qwen3 target), through the Session API.

(a) the doctor names the steps override and the wiring mismatch; (b) the wiring fix reaches prefill
only, so the accept length barely moves; (c) the doctor names the CUDA-graph cause and offers its flag
preset; (d) `--disable-cuda-graph` makes the ids reach decode and the accept length rises clearly.
Accept lengths come from the benchmark's own requests (greedy, so they do not depend on timing).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from eagle3_tui.profile import DEMO_SGLANG_VERSION, demo_profile
from eagle3_tui.session import Session
from eagle3_tui.session.presets.catalog import NO_GRAPH_PRESET, TRAIN_PRESET, set_flags
from tests.plugins.ports import free_port
from tests.plugins.world import stop_processes_under

pytestmark = pytest.mark.slow

BENCH = {"num_prompts": 4, "concurrency": 4, "max_tokens": 48}


def _ids(findings: list) -> set[str]:
    return {f.rule_id for f in findings}


async def test_demo_story_on_0_5_6_steps_wiring_cuda_graph(demo_world, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("EAGLE3_TUI_DATA_DIR", str(tmp_path / "data"))
    profile = demo_profile(demo_world, port=free_port(), state_dir=tmp_path / "demo")
    # No background load (CPU is scarce); the benchmark's own requests give the accept length.
    profile.launch_command = set_flags(profile.launch_command, {"sim-background-load": 0, "decode-log-interval": 4})
    session = Session(profile)
    try:
        await session.attach()
        await session.control.start()
        assert session.server.state == "ready" and session.server.version == DEMO_SGLANG_VERSION
        # (a) the seeds' two causes, and not yet the CUDA-graph one (no ids: the defaults everywhere)
        found = _ids(await session.survey.refresh_findings())
        assert {"steps-override", "wiring-mismatch"} <= found and "ids-prefill-only" not in found, sorted(found)
        first = await session.bench.run(**BENCH)
        start = first.accept_len
        # chat by default, in the template of the tokenizer folder the demo serves (hf-tokenizer)
        assert first.prompt_format == "chat" and "hf-tokenizer/tokenizer_config.json" in (first.chat_template or "")

        # (b) the wiring fix: prefill gets the trained boundaries, graphed decode still the defaults
        plan = await session.presets.plan(TRAIN_PRESET)
        assert plan.ok, plan.problems
        assert any("only prefill gets them" in w for w in plan.warnings), plan.warnings
        await session.presets.apply(plan)
        trained = tuple(demo_world.slot_boundaries[:-1])
        assert session.server.boundaries == trained
        wired = (await session.bench.run(**BENCH)).accept_len

        # (c) the doctor names the cause and its fix; the flag preset is offered
        by_id = {f.rule_id: f for f in await session.survey.refresh_findings()}
        assert "wiring-mismatch" not in by_id and "ids-prefill-only" in by_id, sorted(by_id)
        assert "--disable-cuda-graph" in by_id["ids-prefill-only"].fix
        assert NO_GRAPH_PRESET in {p.name for p in session.presets.available()}

        # (d) without CUDA graphs the ids reach every decode step
        graph_plan = await session.presets.plan(NO_GRAPH_PRESET)
        assert graph_plan.ok and "--disable-cuda-graph" in graph_plan.diff
        await session.presets.apply(graph_plan)
        assert "--disable-cuda-graph" in session.server.argv
        assert "ids-prefill-only" not in _ids(await session.survey.refresh_findings())
        fixed = (await session.bench.run(**BENCH)).accept_len
        print(f"\naccept length: defaults {start:.3f}, wiring fix {wired:.3f}, --disable-cuda-graph {fixed:.3f}")
        assert start is not None and wired is not None and fixed is not None
        # the fix barely moves it (only each request's first draft sees the new ids: up or down by
        # the world's luck); the ids reaching decode help clearly, more than twice as much
        assert fixed > wired and fixed > start and fixed - wired > 2 * abs(wired - start), (start, wired, fixed)
    finally:
        try:
            if session.server.pgid:
                await session.control.stop()
        finally:
            await session.close()
            stop_processes_under(tmp_path)
