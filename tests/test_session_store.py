"""The local store (last launch, undo stack) on real files, and the served fields of a launch."""

from __future__ import annotations

import json
from pathlib import Path

from eagle3_tui.profile import Profile
from eagle3_tui.session.host.served import parse_argv, served
from eagle3_tui.session.launch import LaunchSpec
from eagle3_tui.session.presets.catalog import NO_SPEC_PRESET, builtin_presets
from eagle3_tui.session.store.local import UNDO_DEPTH, LocalStore

ARGV = ["python", "-m", "sglang.launch_server", "--model-path", "/m", "--speculative-algorithm", "EAGLE3",
        "--speculative-num-steps", "1", "--speculative-num-draft-tokens", "16", "--speculative-eagle-topk", "1",
        "--port", "30001"]


def profile(tmp_path: Path, **kw) -> Profile:
    return Profile(name="h", state_dir=str(tmp_path / "state"), **kw)


def test_launch_round_trip_without_secrets(tmp_path: Path) -> None:
    store = LocalStore(profile(tmp_path))
    assert store.load_launch() is None
    spec = LaunchSpec.from_argv(ARGV, cwd="/srv", env={"HF_TOKEN": "s3cret", "CUDA_VISIBLE_DEVICES": "0"},
                                log_path="/var/log/s.log")
    store.save_launch(spec)
    back = store.load_launch()
    assert back is not None and back.argv == tuple(ARGV) and back.port == 30001 and back.cwd == "/srv"
    assert back.env == {"CUDA_VISIBLE_DEVICES": "0"}
    assert "s3cret" not in (tmp_path / "state").joinpath("launch.json").read_text()


def test_a_changed_profile_command_forgets_the_saved_launch(tmp_path: Path) -> None:
    LocalStore(profile(tmp_path, launch_command=ARGV)).save_launch(LaunchSpec.from_argv(ARGV, cwd=None))
    assert LocalStore(profile(tmp_path, launch_command=ARGV)).load_launch() is not None
    assert LocalStore(profile(tmp_path, launch_command=[*ARGV, "--x"])).load_launch() is None


def test_undo_stack_newest_first_and_bounded(tmp_path: Path) -> None:
    store = LocalStore(profile(tmp_path))
    assert store.peek_undo() is None and store.rollback_preset() is None
    for i in range(UNDO_DEPTH + 5):
        store.push_undo({"kind": "flags", "argv_before": [], "argv_after": [], "preset": f"p{i}"})
    assert store.rollback_preset() == f"p{UNDO_DEPTH + 4}"
    store.pop_undo()
    assert store.rollback_preset() == f"p{UNDO_DEPTH + 3}"
    stack = json.loads((tmp_path / "state" / "undo.json").read_text())["stack"]
    assert len(stack) == UNDO_DEPTH - 1


def test_a_broken_undo_file_is_an_empty_stack(tmp_path: Path) -> None:
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "undo.json").write_text('{"stack": [{"kind": "rm -rf"}, 3]}')
    assert LocalStore(profile(tmp_path)).peek_undo() is None
    (tmp_path / "state" / "undo.json").write_text("not json")
    assert LocalStore(profile(tmp_path)).peek_undo() is None


def test_served_fields_follow_sglangs_rules() -> None:
    args = parse_argv(ARGV)
    assert args is not None and parse_argv(["bash"]) is None and parse_argv(None) is None
    presets = builtin_presets(data_slots=(0, 2, 6, 9), current=args)
    view, eff = served(args, target_arch=None, draft_text='{"architectures": ["LlamaForCausalLMEagle3"]}',
                       num_layers=12, presets=presets)
    assert (view.steps, view.topk, view.draft_tokens, view.requested_draft_tokens) == (1, 1, 2, 16)
    assert view.layer_ids is None and view.boundaries == (2, 6, 9) and view.active_preset == "sglang-default"
    assert eff.steps == 1 and view.adjusted
    plain = parse_argv(["python", "-m", "sglang.launch_server", "--model-path", "/m"])
    assert plain is not None
    view, _ = served(plain, target_arch=None, draft_text=None, num_layers=None, presets=presets)
    assert not view.speculative and view.active_preset == NO_SPEC_PRESET and view.boundaries is None
