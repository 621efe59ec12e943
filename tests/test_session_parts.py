"""Pure parts of the session: discovery helpers, presets and apply plans."""

from __future__ import annotations

import json
import shlex
from types import SimpleNamespace

import pytest

from eagle3_tui.errors import UserError
from eagle3_tui.profile import Preset
from eagle3_tui.session.host.discovery import (
    group_servers,
    log_path_from_fd_target,
    output_files,
    parse_environ,
    relaunch_env,
)
from eagle3_tui.session.launch import LaunchSpec, redact_env
from eagle3_tui.session.presets.catalog import (
    NO_GRAPH_PRESET,
    NO_SPEC_PRESET,
    TRAIN_PRESET,
    all_presets,
    builtin_presets,
    find_preset,
    plan_flags,
    plan_layers,
    set_flags,
)
from eagle3_tui.sglang import launch

SIM = ["/usr/bin/python3", "-m", "eagle3_tui.sim.server", "--model-path", "/w/target",
       "--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", "/w/draft",
       "--speculative-num-steps", "1", "--speculative-num-draft-tokens", "16", "--speculative-eagle-topk", "1",
       "--port", "30111", "--sim-background-load", "4", "--sim-embed-capture-patch"]

CFG = '{\n  "architectures": ["LlamaForCausalLMEagle3"],\n  "hidden_size": 64,\n  "num_hidden_layers": 1\n}\n'


def test_relaunch_env_is_the_whole_environment_and_secrets_are_redacted():
    env = parse_environ(b"PATH=/bin\0CUDA_VISIBLE_DEVICES=0,1\0SGLANG_X=1\0HF_TOKEN=hf_secret\0"
                        b"NCCL_DEBUG=INFO\0PYTHONPATH=/p\0AWS_SECRET_ACCESS_KEY=k\0junk\0"
                        b"TMUX=/tmp/t,1,0\0BASH_FUNC_f%%=() { :; }\0OMP_NUM_THREADS=4\0")
    kept = relaunch_env(env)
    assert kept == {"PATH": "/bin", "CUDA_VISIBLE_DEVICES": "0,1", "SGLANG_X": "1", "HF_TOKEN": "hf_secret",
                    "NCCL_DEBUG": "INFO", "PYTHONPATH": "/p", "AWS_SECRET_ACCESS_KEY": "k", "OMP_NUM_THREADS": "4"}
    shown = redact_env(kept)
    assert shown["HF_TOKEN"] == "<redacted>" and shown["NCCL_DEBUG"] == "INFO"
    spec = LaunchSpec.from_argv(SIM, cwd="/w", env=kept, log_path="/w/s.log")
    spec = LaunchSpec(**{**spec.__dict__, "env_whole": True})
    saved = json.loads(spec.to_json())
    assert "HF_TOKEN" not in saved["env"] and saved["port"] == 30111
    assert "env_whole" not in saved  # secrets left out: a relaunch from the record takes them from its shell
    assert LaunchSpec.from_dict(saved).argv == tuple(SIM) and not LaunchSpec.from_dict(saved).env_whole
    plain = LaunchSpec(**{**spec.__dict__, "env": {"PATH": "/bin"}})
    assert LaunchSpec.from_dict(json.loads(plain.to_json())).env_whole


def test_stdout_target_only_regular_files():
    assert log_path_from_fd_target("/var/log/sglang.log\n") == "/var/log/sglang.log"
    for t in ("pipe:[1234]", "socket:[5]", "/dev/pts/3", "/dev/null", "/tmp/x.log (deleted)"):
        assert log_path_from_fd_target(t) is None


def test_output_files_split_log_and_access_lines():
    # (fd 2, fd 1) -> (the log followed, uvicorn's access log)
    assert output_files("/w/server.log", "/w/access.log") == ("/w/server.log", "/w/access.log")
    assert output_files("/w/all.log", "/w/all.log") == ("/w/all.log", None)  # 2>&1
    assert output_files("/dev/pts/1", "/w/out.log") == ("/w/out.log", None)  # stdout is the only file
    assert output_files("/w/server.log", "pipe:[7]") == ("/w/server.log", None)
    assert output_files("", "") == (None, None)


def test_group_servers_picks_one_per_group_and_ignores_others():
    P = SimpleNamespace
    procs = [
        P(pid=200, pgid=100, argv=SIM),  # a forked child with the same argv
        P(pid=100, pgid=100, argv=SIM),  # the leader
        P(pid=300, pgid=300, argv=["python", "-m", "sglang.launch_server", "--model-path", "m"]),
        P(pid=400, pgid=400, argv=["/venv/bin/sglang", "serve", "--model-path", "m"]),
        P(pid=500, pgid=500, argv=["vim", "launch_server.txt"]),
        P(pid=600, pgid=600, argv=[]),
    ]
    got = group_servers(procs)
    assert [p.pid for p in got] == [100, 300, 400]


def test_builtin_presets_and_boundaries():
    cur = launch.parse_launch(SIM)
    pres = all_presets(builtin_presets(data_slots=(0, 2, 6, 9), current=cur),
                       [Preset("mine", "layers", (1, 4, 6))], num_layers=9)
    by = {p.name: p for p in pres}
    assert by["sglang-default"].layer_ids is None and by["sglang-default"].boundaries == (2, 4, 6)
    assert by[TRAIN_PRESET].layer_ids == (-1, 1, 5) and by[TRAIN_PRESET].boundaries == (0, 2, 6)
    assert by["mine"].boundaries == (2, 5, 7) and not by["mine"].builtin
    assert by["steps=15"].flags == {"speculative-num-steps": 15}
    assert by[NO_SPEC_PRESET].kind == "flags"
    # no data slots: no train preset
    assert TRAIN_PRESET not in {p.name for p in builtin_presets(data_slots=None)}
    with pytest.raises(UserError, match="no preset named"):
        find_preset(pres, "nope")


def test_the_disable_cuda_graph_preset_on_0_5_6_reads_and_applies_as_one_flag():
    from eagle3_tui.sglang.installed import answer, lookup, read_release
    from eagle3_tui.ui.format import fmt_flags

    installed = answer(read_release(None, version="0.5.6"), lookup("Qwen3ForCausalLM"), 12, None)
    cur = launch.parse_launch(SIM)
    nograph = find_preset(builtin_presets(data_slots=(0, 2, 6, 9), current=cur, installed=installed),
                          NO_GRAPH_PRESET)
    assert fmt_flags(dict(nograph.flags)) == "--disable-cuda-graph"  # not "----disable-cuda-graph"
    assert plan_flags(nograph, argv=SIM).after.split() == [*SIM, "--disable-cuda-graph"]
    with_flag = launch.parse_launch([*SIM, "--disable-cuda-graph"])
    assert NO_GRAPH_PRESET not in {p.name for p in builtin_presets(data_slots=(0, 2, 6, 9), current=with_flag,
                                                                   installed=installed)}


def test_plan_layers_valid_and_invalid():
    train = Preset(TRAIN_PRESET, "layers", (-1, 1, 5))
    plan = plan_layers(train, path="/d/config.json", before=CFG, num_layers=9, embed_capture=True, fc_num_aux=3)
    assert plan.ok and plan.changes
    assert json.loads(plan.after)["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [-1, 1, 5]
    assert "+" in plan.diff and "eagle_aux_hidden_state_layer_ids" in plan.diff
    assert any("embed, h2, h6" in w for w in plan.warnings)
    no_patch = plan_layers(train, path="p", before=CFG, num_layers=9, embed_capture=False, fc_num_aux=3)
    assert any("embed-capture patch" in p for p in no_patch.problems)
    out_of_range = plan_layers(Preset("x", "layers", (1, 4, 9)), path="p", before=CFG, num_layers=9,
                               embed_capture=True, fc_num_aux=3)
    assert any("boundary 10" in p for p in out_of_range.problems)
    width = plan_layers(Preset("x", "layers", (1, 2, 3, 4)), path="p", before=CFG, num_layers=9,
                        embed_capture=True, fc_num_aux=3)
    assert any("fc takes 3" in p for p in width.problems)


def test_plan_flags_and_generic_flags():
    steps = Preset("steps=15", "flags", flags={"speculative-num-steps": 15})
    plan = plan_flags(steps, argv=SIM)
    after = shlex.split(plan.after)
    assert after[after.index("--speculative-num-steps") + 1] == "15"
    assert plan.ok and any("draft tokens 16" in w for w in plan.warnings)
    assert "-  --speculative-num-steps 1" not in plan.diff and "--speculative-num-steps 15" in plan.diff
    nospec = plan_flags(Preset(NO_SPEC_PRESET, "flags", flags=dict.fromkeys(
        ["speculative-algorithm", "speculative-draft-model-path", "speculative-num-steps",
         "speculative-eagle-topk", "speculative-num-draft-tokens"])), argv=SIM)
    assert "speculative" not in nospec.after and "--sim-background-load 4" in nospec.after
    # generic flags: remove a bare flag, set a value, add a bare flag
    argv = set_flags(SIM, {"sim-embed-capture-patch": None, "sim-background-load": "2", "--enable-metrics": True})
    assert "--sim-embed-capture-patch" not in argv and argv[argv.index("--sim-background-load") + 1] == "2"
    assert argv[-1] == "--enable-metrics"
    bad = plan_flags(Preset("b", "flags", flags={"speculative-num-steps": None}), argv=SIM)
    assert bad.problems and "assert" in bad.problems[0]


PATCHED = '''class DeepseekV2ForCausalLM:
    def set_eagle3_layers_to_capture(self, layer_ids):
        # Handle -1 as "capture embedding output" (before any layers run)
        self.model.capture_embedding_for_eagle3 = (-1 in layer_ids)
        self.model.layers_to_capture = [val + 1 for val in layer_ids if val >= 0]
'''
UNPATCHED = '''class DeepseekV2ForCausalLM:
    def set_eagle3_layers_to_capture(self, layer_ids):
        self.model.layers_to_capture = [val + 1 for val in layer_ids]
'''


@pytest.mark.parametrize(("source", "expected"), [(PATCHED, True), (UNPATCHED, False)])
async def test_embed_capture_found_in_the_servers_sglang_source(tmp_path, source, expected):
    """Real SGLang: the target arch's model file in the server's own sglang (found via its PYTHONPATH)."""
    import sys

    from eagle3_tui.profile import Profile
    from eagle3_tui.remote.local import LocalHost
    from eagle3_tui.session.host.probe import embed_capture_support

    models = tmp_path / "site" / "sglang" / "srt" / "models"
    models.mkdir(parents=True)
    (tmp_path / "site" / "sglang" / "__init__.py").write_text("raise RuntimeError('never imported')\n")
    (models / "llama.py").write_text("class LlamaForCausalLM:\n    pass\n")
    (models / "deepseek_v2.py").write_text(source)
    spec = LaunchSpec.from_argv([sys.executable, "-m", "sglang.launch_server", "--model-path", "/m"], cwd=str(tmp_path),
                                env={"PYTHONPATH": str(tmp_path / "site")})
    host = LocalHost()
    try:
        ok, why = await embed_capture_support(host, spec, Profile("h", local=True), "DeepseekV2ForCausalLM")
        assert ok is expected and "deepseek_v2.py" in why
        unknown, _ = await embed_capture_support(host, spec, Profile("h", local=True), "NoSuchArch")
        assert unknown is None
        sim = LaunchSpec.from_argv(SIM, cwd=None)
        assert (await embed_capture_support(host, sim, Profile("h", local=True), None))[0] is True
    finally:
        await host.close()
