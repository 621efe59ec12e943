"""A draft whose config names the target's class: the sim dies at load with real SGLang 0.5.23's line (held
to the real server in tests/test_real_sglang_conformance.py)."""

from __future__ import annotations

import json

import pytest

from eagle3_tui.sim.draft_class import check_draft_class
from tests.plugins.world import make_draft_dir

CRASH = "Received sigquit from a child process. It usually means the child failed."


def test_only_eagle3_draft_classes_load():
    check_draft_class({"architectures": ["LlamaForCausalLMEagle3"], "vocab_size": 259}, 160)
    check_draft_class({"vocab_size": 259}, 160)  # no architectures: SGLang's EAGLE-3 default
    with pytest.raises(AssertionError, match=r"self.org_vocab_size=259 .* loaded_weight.shape\[output_dim\]=160"):
        check_draft_class({"architectures": ["LlamaForCausalLM"], "vocab_size": 259}, 160)
    with pytest.raises(ValueError, match="not an EAGLE-3 draft class"):
        check_draft_class({"architectures": ["LlamaForCausalLM"], "vocab_size": 259}, 259)


def test_the_sim_fails_to_load_a_draft_named_as_the_target(sim_server, demo_world, tmp_path):
    draft = make_draft_dir(demo_world, tmp_path / "draft")
    cfg = json.loads((draft / "config.json").read_text())
    (draft / "config.json").write_text(json.dumps({**cfg, "architectures": ["LlamaForCausalLM"]}))
    srv = sim_server(draft_dir=draft, wait_ready=False)
    assert srv.proc.wait(timeout=120) != 0
    log = srv.log_text()
    said = f"AssertionError: self.org_vocab_size={cfg['vocab_size']} self.use_presharded_weights=False"
    assert said in log and CRASH in log, log[-1500:]
    assert "The server is fired up" not in log
