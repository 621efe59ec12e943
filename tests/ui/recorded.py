"""A real `Session` built on recorded state, for deterministic UI tests and snapshots.

Nothing here is a fake: the Session, Telemetry, LogReader, doctor and preset planner are the
project's own. Only the inputs are recorded: a server log (tests/ui/data/recorded_server.log) fed
with its own timestamps, the seeds' launch flags, and a draft config on disk. The session is not
attached (no host, no server), so its state cannot move while a snapshot is taken, and the app
gets a clock frozen at the log's last line.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from eagle3_tui.doctor import diagnose
from eagle3_tui.doctor.facts import Facts
from eagle3_tui.eagle.draft_config import DraftConfig
from eagle3_tui.profile import Profile
from eagle3_tui.session import ServerView, Session
from eagle3_tui.sglang import launch
from eagle3_tui.sglang.logline import DecodeStats, LogReader

DATA = Path(__file__).parent / "data"
LOG = DATA / "recorded_server.log"
SEEDS_ARGV = [
    "python",
    "-m",
    "sglang.launch_server",
    "--model-path",
    "/models/target",
    "--speculative-algorithm",
    "EAGLE3",
    "--speculative-draft-model-path",
    "/models/draft",
    "--speculative-num-steps",
    "1",
    "--speculative-num-draft-tokens",
    "16",
    "--speculative-eagle-topk",
    "1",
    "--port",
    "30000",
]
DRAFT_CONFIG = (
    '{\n  "architectures": ["LlamaForCausalLMEagle3"],\n  "hidden_size": 64,\n  "num_hidden_layers": 1\n}\n'
)
NUM_LAYERS = 12


def recorded_lines() -> list[str]:
    return LOG.read_text(encoding="utf-8").splitlines()


def recorded_session(tmp: Path, *, readonly: bool = False) -> tuple[Session, float]:
    """(session, t_end): a Session holding the recorded log's telemetry, findings and server view."""
    profile = Profile(
        name="recorded",
        local=True,
        log_path=str(LOG),
        launch_command=SEEDS_ARGV,
        baseline_tps=90.0,
        data_slots=(0, 2, 6, 9),
        state_dir=str(tmp / "state"),
    )
    session = Session(profile, readonly=readonly)
    reader = LogReader()
    t_end = 0.0
    for line in recorded_lines():
        for ev in reader.feed(line):
            if isinstance(ev, DecodeStats) and ev.timestamp is not None:
                session.telemetry.ingest(ev, ev.timestamp)
                t_end = max(t_end, ev.timestamp)
    session.telemetry.mark(t_end - 120, "preset training-wiring")
    args = launch.parse_launch(SEEDS_ARGV)
    eff = launch.effective(args)
    session.telemetry.num_steps = eff.steps
    cfg = DraftConfig.parse(DRAFT_CONFIG)
    served = cfg.served_boundaries(NUM_LAYERS)
    session.server = dataclasses.replace(
        ServerView(),
        state="ready",
        pid=4242,
        pgid=4242,
        started_at=t_end - 398,
        port=30000,
        speculative=True,
        steps=eff.steps,
        topk=eff.topk,
        draft_tokens=eff.draft_tokens,
        requested_draft_tokens=args.num_draft_tokens,
        layer_ids=cfg.sglang_layer_ids,
        boundaries=served,
        log_path=str(LOG),
    )
    summary = session.telemetry.summary(60.0)
    facts = Facts(
        launch=args,
        effective=eff,
        draft_config=cfg,
        draft_config_path="/models/draft/config.json",
        target_num_layers=NUM_LAYERS,
        data_slot_boundaries=(0, 2, 6, 9),
        training_convention="specforge",
        served_boundaries=served,
        live_accept_len=summary.accept_len,
        live_gen_tps=summary.gen_tps,
        baseline_tps=90.0,
        log_has_accept_stats=True,
    )
    session.findings = diagnose(facts)
    return session, t_end


def recorded_report():
    """A CheckReport recorded from a real check run (checkjob.run_check on the demo world through
    LocalHost, 2,000 positions, steps 1; the two paths replaced by neutral ones), for the accuracy pane."""
    import json

    from eagle3_tui.eagle.accuracy import CheckReport

    return CheckReport.from_dict(json.loads((DATA / "check_report.json").read_text(encoding="utf-8")))


def recorded_plan(session: Session):
    """The plan for the `train-[:-1]` preset against the recorded draft config (the real planner)."""
    from eagle3_tui.session.presets import find_preset, plan_layers

    preset = find_preset(session.presets(), "train-[:-1]")
    return plan_layers(
        preset,
        path="/models/draft/config.json",
        before=DRAFT_CONFIG,
        num_layers=NUM_LAYERS,
        embed_capture=True,
        fc_num_aux=3,
    )


async def until_ready(pilot, timeout: float = 20.0) -> None:
    """Wait until the console mounted its panes and wired the session (they mount after the first frame)."""
    import asyncio
    import time

    deadline = time.monotonic() + timeout
    while not (pilot.app.panes_ready and pilot.app.session_wired):
        if time.monotonic() > deadline:
            raise AssertionError("the console never finished mounting")
        await asyncio.sleep(0.02)
    await pilot.pause()
