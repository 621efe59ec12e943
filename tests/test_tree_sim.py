"""The sim engine's tree drafting on the demo world: lossless (the output is the target's own greedy
text), topk 1 through the tree code is the chain, and trees accept more per verify than a chain."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.plugins.world import make_draft_dir

pytestmark = pytest.mark.slow


def _engine(world: Any, tmp: Path, steps: int, topk: int, draft_tokens: int) -> Any:
    import torch

    from eagle3_tui.sim.engine import Engine

    torch.set_num_threads(1)
    draft = make_draft_dir(world, tmp / "draft", layer_ids=world.fix_layer_ids)
    # float32, not the float16 a server resolves for the world: losslessness is the algorithm's; in
    # half precision a one-token decode and a many-token verify may break a near-tie differently
    return Engine(Path(world.target_dir), draft, num_steps=steps, embed_patch=True, topk=topk,
                  num_draft_tokens=draft_tokens, dtype="float32")


def _run(engine: Any, prompts: list[list[int]], new: int, *, tree: bool = False) -> tuple[list[list[int]], float]:
    outs, acc, ver = [], 0, 0
    for p in prompts:
        seq = engine.new_sequence(p, new, frozenset())
        engine.prefill(seq)
        while not seq.finished:
            engine._tree_step(seq) if tree else engine.step(seq)
        outs.append(seq.output)
        acc, ver = acc + seq.accepted_drafts, ver + seq.verify_ct
    return outs, (acc + ver) / ver if ver else 1.0


@pytest.fixture(scope="module")
def prompts(demo_world: Any) -> list[list[int]]:
    from eagle3_tui.sim.prompts import demo_prompts
    from eagle3_tui.sim.tokenizer import ByteTokenizer

    tok = ByteTokenizer.load(Path(demo_world.target_dir))
    return [tok.encode(t) for t in demo_prompts()[:4]]


def test_tree_decoding_is_lossless_and_accepts_more(demo_world: Any, tmp_path: Path, prompts: list[list[int]]) -> None:
    plain = _engine(demo_world, tmp_path, 0, 1, 1)
    want, _ = _run(plain, prompts, 32)
    chain = _engine(demo_world, tmp_path, 3, 1, 4)
    got_chain, chain_len = _run(chain, prompts, 32)
    tree = _engine(demo_world, tmp_path, 5, 4, 16)
    got_tree, tree_len = _run(tree, prompts, 32)
    assert got_chain == want and got_tree == want
    assert tree_len > chain_len > 1.0


def test_topk_one_through_the_tree_path_is_the_chain(demo_world: Any, tmp_path: Path,
                                                     prompts: list[list[int]]) -> None:
    chain = _engine(demo_world, tmp_path, 3, 1, 4)
    a, len_a = _run(chain, prompts[:2], 24)
    b, len_b = _run(chain, prompts[:2], 24, tree=True)
    assert a == b and len_a == pytest.approx(len_b)


def test_the_sim_server_drafts_trees_over_http(sim_server: Any) -> None:
    """--speculative-eagle-topk 4 reaches the engine: meta_info's accept length is the tree's, the log's
    decode lines say the same, and nothing says trees are not simulated."""
    import httpx

    from eagle3_tui.sglang.logline import DecodeStats, parse_line

    tree = ("--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "5", "--speculative-eagle-topk",
            "4", "--speculative-num-draft-tokens", "16", "--sim-embed-capture-patch", "--decode-log-interval", "1")
    srv = sim_server(*tree, layer_ids=[-1, 1, 5])
    with httpx.Client(base_url=srv.base_url, timeout=60) as c:
        meta = c.post("/generate", json={"text": "The quick brown fox", "sampling_params": {"max_new_tokens": 32}}
                      ).json()["meta_info"]
        info = c.get("/server_info").json()
    assert meta["completion_tokens"] == 32 and meta["spec_verify_ct"] < 32
    assert meta["spec_draft_token_num"] == meta["spec_verify_ct"] * 15
    assert info["speculative_eagle_topk"] == 4 and info["speculative_num_draft_tokens"] == 16
    text = srv.log_text()
    assert "not simulated" not in text
    decodes = [e for e in (parse_line(x) for x in text.splitlines()) if isinstance(e, DecodeStats)]
    assert decodes and max(d.accept_len or 0 for d in decodes) > 2.0


def test_more_draft_tokens_than_the_tree_proposes_fails_at_start(sim_server: Any) -> None:
    srv = sim_server("--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "1",
                     "--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "8", wait_ready=False)
    assert srv.proc.returncode not in (None, 0)
    text = srv.log_text()
    assert "Scheduler hit an exception" in text and "selected index k out of range" in text
