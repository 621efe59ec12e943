"""A real `Session` fed a recorded server log, for deterministic UI tests and snapshots.

Nothing here is hand-built state: the Session attaches through LocalHost to a profile whose launch
command and draft/target configs are real files in a temp dir (the seeds' broken flags, no layer-id
key), reads them as it would on a host (discovery, target probe, served boundaries), then the recorded
log (tests/ui/data/recorded_server.log) goes through the session's own log feed (LogReader -> run
state -> telemetry, under the log's own timestamps) and the doctor runs on that. No server runs, so
the session is closed before the app sees it: its state cannot move while a snapshot is taken. The
app's clock is frozen at the newest data point (`clock_of`).
"""

from __future__ import annotations

import asyncio
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from eagle3_tui.profile import Profile
from eagle3_tui.session import Session

DATA = Path(__file__).parent / "data"
LOG = DATA / "recorded_server.log"
PORT = 30000
DRAFT_CONFIG = (
    '{\n  "architectures": ["LlamaForCausalLMEagle3"],\n  "hidden_size": 64,\n  "num_hidden_layers": 1\n}\n'
)
TARGET_CONFIG = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "num_hidden_layers": 12, "hidden_size": 64}
NUM_LAYERS = 12


def recorded_lines() -> list[str]:
    return LOG.read_text(encoding="utf-8").splitlines()


def log_end(lines: list[str]) -> float:
    """The timestamp of the log's last timestamped line."""
    from eagle3_tui.sglang.logline import parse_timestamp

    return next(t for t in map(parse_timestamp, reversed(lines)) if t is not None)


def seeds_argv(target: Path, draft: Path) -> list[str]:
    return [
        "python", "-m", "sglang.launch_server",
        "--model-path", str(target),
        "--speculative-algorithm", "EAGLE3",
        "--speculative-draft-model-path", str(draft),
        "--speculative-num-steps", "1",
        "--speculative-num-draft-tokens", "16",
        "--speculative-eagle-topk", "1",
        "--port", str(PORT),
    ]  # fmt: skip


def _put(path: Path, text: str) -> None:
    """Write `text` unless it is there already, atomically (tests running side by side share the files)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return
    part = path.with_name(f"{path.name}.{os.getpid()}.part")
    part.write_text(text, encoding="utf-8")
    os.replace(part, path)


def recorded_profile(tmp: Path) -> Profile:
    """The host's files live at one fixed place (the findings quote their paths, and snapshots must not
    depend on pytest's temp dir); the session's own state goes to `tmp`."""
    host = Path("/tmp") / "eagle3-tui-recorded"  # not gettempdir(): each run's TMPDIR is its own (conftest)
    target, draft = host / "target", host / "draft"
    _put(target / "config.json", json.dumps(TARGET_CONFIG))
    _put(draft / "config.json", DRAFT_CONFIG)
    live_log = host / "server.log"  # what the session follows: stays empty, the recording is fed directly
    _put(live_log, "")
    return Profile(
        name="recorded",
        local=True,
        log_path=str(live_log),
        launch_command=seeds_argv(target, draft),
        baseline_tps=90.0,
        data_slots=(0, 2, 6, 9),
        state_dir=str(tmp / "state"),
    )


def recorded_session(tmp: Path, *, readonly: bool = False, hold_back: int = 0) -> tuple[Session, list[str]]:
    """(session, held): a closed Session that attached and read all but the last `hold_back` lines of
    the recorded log; `held` are those lines, for a test to feed (`session.ingest_log`) once the app
    listens, so they reach the log pane as a real LogBatch."""
    lines = recorded_lines()
    fed, held = (lines[:-hold_back], lines[-hold_back:]) if hold_back else (lines, [])

    async def build() -> Session:
        session = Session(recorded_profile(tmp), readonly=readonly)
        await session.attach()
        session.ingest_log(fed, log_time=True)
        session.telemetry.mark(log_end(lines) - 120, "preset training-wiring")
        await session.survey.refresh_findings()
        await session.close()
        return session

    # Its own loop in a thread: the tests that call this run inside pytest-asyncio's loop.
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, build()).result(), held


def clock_of(session: Session):
    """The app's clock: the newest data point the session holds (frozen: the session is closed)."""
    return lambda: session.telemetry.last_time() or 0.0


def recorded_report():
    """A CheckReport recorded from a real check run (checkjob.run_check on the demo world through
    LocalHost, 2,000 positions, steps 1; the two paths replaced by neutral ones), for the accuracy pane."""
    from eagle3_tui.eagle.accuracy import CheckReport

    return CheckReport.from_dict(json.loads((DATA / "check_report.json").read_text(encoding="utf-8")))


def recorded_predict_report():
    """A CheckReport with a predictions grid, recorded from a real check run (checkjob.run_check on the
    demo world through LocalHost, 2,000 positions, steps 1, `--predict` for 1/1/2, 15/1/16 and the
    standard grid; the two paths replaced by neutral ones): the best wiring's grid and the served one's."""
    from eagle3_tui.eagle.accuracy import CheckReport

    return CheckReport.from_dict(json.loads((DATA / "check_report_predict.json").read_text(encoding="utf-8")))


def recorded_plan(session: Session):
    """The plan for the `train-[:-1]` preset against the recorded draft config (the real planner)."""
    from eagle3_tui.session.presets.catalog import find_preset, plan_layers

    preset = find_preset(session.presets.available(), "train-[:-1]")
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
    import time

    main = pilot.app.main
    deadline = time.monotonic() + timeout
    while not (main.panes_ready and main.session_wired):
        if time.monotonic() > deadline:
            raise AssertionError("the console never finished mounting")
        await asyncio.sleep(0.02)
    await pilot.pause()
