"""The sim's /v1/chat/completions: the world's chat template rendered as SGLang renders it, tokenized without
BOS, answered in SGLang's ChatCompletionResponse shape; bad input is a 400 with the reason. (Held to real
SGLang 0.5.23 in tests/test_real_sglang_conformance.py.)"""

from __future__ import annotations

import httpx
import pytest

from eagle3_tui.sim.chat import chat_messages, chat_template, render_chat
from eagle3_tui.sim.hf_tokenizer import BOS, EOS, ensure_hf_tokenizer
from eagle3_tui.sim.service import BadRequest
from eagle3_tui.sim.tokenizer import ByteTokenizer

MESSAGES = [{"role": "user", "content": "def fibonacci(n):"}]


def test_the_worlds_template_renders_the_conversation(tmp_path):
    from eagle3_tui.sim.hf_tokenizer import write_hf_tokenizer

    (tmp_path / "tokenizer.json").write_text(ByteTokenizer().to_json())
    folder = write_hf_tokenizer(tmp_path)
    assert chat_template(tmp_path) == chat_template(folder) is not None
    text = render_chat(chat_template(folder), MESSAGES, bos=BOS, eos=EOS)
    assert text == "user: def fibonacci(n):\nassistant: "
    assert chat_template(tmp_path / "nowhere") is None
    with pytest.raises(BadRequest, match="chat template"):
        render_chat(None, MESSAGES, bos=BOS, eos=EOS)
    for bad in ({}, {"messages": []}, {"messages": [{"role": "user"}]}, {"messages": "hi"}):
        with pytest.raises(BadRequest, match="messages"):
            chat_messages(bad)


def test_the_sim_answers_chat_completions(sim_server, demo_world):
    folder = ensure_hf_tokenizer(demo_world.target_dir)
    srv = sim_server("--tokenizer-path", str(folder))
    r = httpx.post(srv.base_url + "/v1/chat/completions", timeout=60,
                   json={"messages": MESSAGES, "max_tokens": 8, "temperature": 0})
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["object"] == "chat.completion" and doc["choices"][0]["message"]["role"] == "assistant"
    prompt = render_chat(chat_template(folder), MESSAGES, bos=BOS, eos=EOS)
    tok = ByteTokenizer.load(demo_world.target_dir)
    usage = doc["usage"]
    assert usage["prompt_tokens"] == len(tok.encode(prompt, add_bos=False))
    assert 0 < usage["completion_tokens"] <= 8 and usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    bad = httpx.post(srv.base_url + "/v1/chat/completions", timeout=60, json={"max_tokens": 8})
    assert bad.status_code == 400 and "messages" in bad.json()["message"]
    assert "Traceback" not in srv.log_text()
