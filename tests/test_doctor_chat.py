"""Chat template: the served one read as tokenizers and SGLang's flag give it, rendered as Hugging Face renders
it, sent by the benchmark; the training data's as speculators' data generator records it; the doctor's
comparison and its word on a raw benchmark. The end-to-end test benchmarks the sim server served with the demo
world's Hugging Face tokenizer folder (the one real SGLang is pointed at)."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from pathlib import Path

from eagle3_tui.doctor import Facts, diagnose
from eagle3_tui.doctor import chat_rules as C
from eagle3_tui.eagle.chat_template import (
    ServedTemplate,
    family_of,
    render,
    served_template,
    trained_template,
)
from eagle3_tui.remote.local import LocalHost
from eagle3_tui.session.host.probe import read_chat_template
from eagle3_tui.session.measure.chat import chat_mode
from eagle3_tui.sglang.client import SGLangClient, chat_result, run_benchmark
from eagle3_tui.sglang.launch import parse_launch
from eagle3_tui.sim.hf_tokenizer import ensure_hf_tokenizer
from eagle3_tui.telemetry.ledger import Ledger, to_text

# Llama 3.1 Instruct's and Qwen2.5 Instruct's templates as their tokenizer_config.json ship them (abridged to
# the part that writes a user turn and the generation prompt; the special tokens are theirs).
LLAMA3 = (
    "{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + "
    "'<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)
QWEN25 = (
    "{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + "
    "'\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def _llama_tokenizer_config() -> dict:
    return {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>", "add_bos_token": True,
            "chat_template": LLAMA3, "tokenizer_class": "PreTrainedTokenizerFast"}


def _speculators_data_config(template: str) -> dict:
    """The shape of speculators' DataGenerationConfig.to_dict() (data_generation/config_generator.py)."""
    return {"version": "2.0", "generated_at": "2026-11-30T10:00:00", "speculators_version": "0.9.0",
            "reproducibility": {"command": "data_generation_offline.py", "cache_key": "x", "gpu": "CPU only",
                                "packages": {}},
            "model": {"target_model_path": "/models/target", "tensor_parallel_size": 1, "max_model_len": 2048,
                      "gpu_memory_utilization": 0.8, "hidden_size": 4096},
            "data": {"train_data_path": "sharegpt", "chat_template": template, "seq_length": 2048,
                     "max_samples": None, "num_samples": 1000, "seed": 0},
            "hidden_states": {"layer_ids": [2, 16, 29, 31]}, "generation": {"batch_size": 8, "cache_dir": "/c"},
            "format": {"file_pattern": "data_{idx}.pt", "schema": {}},
            "example_prompt_token_ids": [1], "example_prompt_str": "x", "example_output_token_ids": [2],
            "example_output_str": "y"}


def test_families_from_template_text_and_from_trainer_names() -> None:
    assert family_of(LLAMA3) == "llama3"
    assert family_of(QWEN25) == "chatml"
    assert family_of("llama3") == family_of("Llama-3.1") == "llama3"
    assert family_of("qwen") == family_of("qwen2.5") == "chatml"
    assert family_of("deepseek-v3") == "deepseek"
    assert family_of("{{ m['role'] }}: {{ m['content'] }}") is None  # a template of no known family
    assert family_of(None) is None


def test_the_served_template_in_sglangs_order() -> None:
    cfg = _llama_tokenizer_config()
    t = served_template(cfg, "/models/target")
    assert t is not None and t.family == "llama3" and t.source == "/models/target/tokenizer_config.json"
    # chat_template.jinja beside it wins over the config's (transformers >= 4.43 writes it there)
    t = served_template(cfg, "/m", jinja_file=QWEN25)
    assert t is not None and t.family == "chatml" and t.source == "/m/chat_template.jinja"
    # the list form: "default" is the one a chat request gets
    listed = {**cfg, "chat_template": [{"name": "tool_use", "template": QWEN25}, {"name": "default", "template": LLAMA3}]}
    assert served_template(listed, "/m").family == "llama3"  # type: ignore[union-attr]
    # --chat-template: a file's text, else SGLang's built-in name (the server renders it itself)
    t = served_template(cfg, "/m", flag="/t/qwen.jinja", flag_text=QWEN25)
    assert t is not None and t.family == "chatml" and t.source == "--chat-template /t/qwen.jinja"
    t = served_template(cfg, "/m", flag="qwen")
    assert t is not None and t.text is None and t.family == "chatml"
    assert served_template({"bos_token": "<s>"}, "/m") is None


def test_render_as_hugging_face_renders_one_user_turn() -> None:
    t = served_template(_llama_tokenizer_config(), "/m")
    assert t is not None
    # the template writes BOS and the tokenizer adds its own: /generate would get two, so the template's goes
    assert render(t, "Hi") == ("<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
                               "<|start_header_id|>assistant<|end_header_id|>\n\n")
    broken = ServedTemplate("{% if %}", "/m/tokenizer_config.json")
    try:
        render(broken, "Hi")
    except Exception as err:
        assert type(err).__name__ == "UserError" and "cannot be rendered" in str(err)
    else:
        raise AssertionError("a broken template must be one clear error")


def test_the_training_datas_template_from_speculators_data_config() -> None:
    t = trained_template(_speculators_data_config("llama3"), "/data/data_config.json")
    assert t is not None and t.family == "llama3" and t.source == "/data/data_config.json"
    assert trained_template({"data": {"chat_template": ""}}, "x") is None
    assert trained_template({"chat_template": "qwen"}, "x").family == "chatml"  # type: ignore[union-attr]


def _facts(**kw) -> Facts:
    return Facts(**kw)


def test_chat_template_mismatch_rule() -> None:
    trained = trained_template(_speculators_data_config("llama3"), "/data/data_config.json")
    qwen = served_template({"chat_template": QWEN25}, "/models/target")
    found = C.chat_template_mismatch(_facts(trained_template=trained, served_template=qwen, served_template_read=True))
    assert found is not None and found.severity == "warning"
    assert "chatml" in found.title and "llama3" in found.title
    assert [e.source for e in found.evidence] == ["/data/data_config.json", "/models/target/tokenizer_config.json"]
    llama = served_template(_llama_tokenizer_config(), "/models/target")
    assert C.chat_template_mismatch(_facts(trained_template=trained, served_template=llama)) is None
    # read, and none there: the draft's chat format never reaches it
    none = C.chat_template_mismatch(_facts(trained_template=trained, served_template_read=True))
    assert none is not None and "has none" in none.title
    # not read: silent
    assert C.chat_template_mismatch(_facts(trained_template=trained)) is None
    # a diagnosis carries it
    ids = [f.rule_id for f in diagnose(_facts(trained_template=trained, served_template=qwen))]
    assert C.CHAT_TEMPLATE_MISMATCH in ids


def test_raw_bench_rule() -> None:
    trained = trained_template(_speculators_data_config("llama3"), "/data/data_config.json")
    llama = served_template(_llama_tokenizer_config(), "/models/target")
    raw = C.raw_bench(_facts(trained_template=trained, served_template=llama, bench_prompt_format="raw",
                             bench_source="ledger row 7 (benchmark)"))
    assert raw is not None and raw.severity == "warning" and raw.evidence[0].source == "ledger row 7 (benchmark)"
    # the training data unknown, a template served: said, as information
    info = C.raw_bench(_facts(served_template=llama, bench_prompt_format="raw"))
    assert info is not None and info.severity == "info"
    assert C.raw_bench(_facts(trained_template=trained, bench_prompt_format="chat")) is None
    assert C.raw_bench(_facts(bench_prompt_format="raw")) is None  # nothing says the draft knows chat
    assert C.raw_bench(_facts(trained_template=trained)) is None  # no benchmark (or one from before the field)


def test_a_chat_completion_with_sglangs_spec_details() -> None:
    """SGLang 0.5.20+ answers `return_spec_tokens_details` in sglext (entrypoints/openai/protocol.py SglExt)."""
    answer = {"id": "x", "object": "chat.completion", "created": 1, "model": "default",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "length"}],
              "usage": {"prompt_tokens": 9, "completion_tokens": 14, "total_tokens": 23},
              "sglext": {"spec_tokens_details": {"spec_accept_rate": 0.45, "spec_accept_length": 3.5,
                                                 "spec_verify_ct": 4, "spec_num_correct_drafts": 9}}}
    r = chat_result(answer, 0.1)
    assert r.completion_tokens == 14 and r.spec_verify_ct == 4 and r.spec_accept_length == 3.5
    bare = chat_result({**answer, "sglext": None}, 0.1)  # older releases: no per-request fields
    assert bare.spec_verify_ct is None and bare.spec_accept_length is None


def test_old_ledger_rows_without_the_field_still_load(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.sqlite3")
    ledger.record("benchmark", "h", {"steps": 3}, {"accept_len": 2.0, "tok_s": 50.0}, "")
    ledger.record("benchmark", "h", {"steps": 3}, {"accept_len": 2.5, "tok_s": 60.0, "prompt_format": "chat"}, "")
    old, new = ledger.rows(host="h")
    assert old.prompt_format is None and new.prompt_format == "chat"
    text = to_text([old, new])
    assert "benchmark (chat)" in text and text.count("(chat)") == 1
    ledger.close()
    with sqlite3.connect(tmp_path / "ledger.sqlite3") as conn:  # the row as written: the field in its results
        assert json.loads(conn.execute("select results from runs order by id desc").fetchone()[0])["prompt_format"] == "chat"


def test_bench_sends_chat_in_the_served_template_by_default(sim_server, demo_world) -> None:
    hf = ensure_hf_tokenizer(demo_world.target_dir)
    srv = sim_server("--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "3",
                     "--speculative-num-draft-tokens", "4", "--speculative-eagle-topk", "1",
                     "--tokenizer-path", str(hf))  # fmt: skip
    args = parse_launch(["python", "-m", "sglang.launch_server", "--model-path", str(demo_world.target_dir),
                         "--tokenizer-path", str(hf)])

    async def go():
        template = await read_chat_template(LocalHost(), str(hf), args, None)
        async with SGLangClient(srv.base_url) as c:
            chat = await run_benchmark(c, num_prompts=4, concurrency=2, max_tokens=16, chat=chat_mode(template))
            raw = await run_benchmark(c, num_prompts=4, concurrency=2, max_tokens=16)
        return template, chat, raw

    template, chat, raw = asyncio.run(go())
    assert template is not None and template.source == f"{hf}/tokenizer_config.json"
    assert chat.prompt_format == "chat" and chat.errors == 0 and "sent to /generate" in (chat.chat_template or "")
    assert chat.accept_len_client is not None and chat.accept_len_client >= 1.0  # per-request meta_info
    assert raw.prompt_format == "raw" and raw.chat_template is None
    assert chat.as_dict()["prompt_format"] == "chat"
    # the server saw the rendered turn: the template's generation prompt is in what it was sent
    assert render(template, "x").endswith("assistant: ")


def test_how_chat_is_sent_depends_on_what_the_tokenizer_holds() -> None:
    llama = served_template(_llama_tokenizer_config(), "/m")
    mode = chat_mode(llama)
    assert mode is not None and mode.render is not None
    named = chat_mode(served_template({}, "/m", flag="qwen"))  # SGLang renders its built-in template itself
    assert named is not None and named.render is None
    assert chat_mode(None, tokenizer_read=True) is None  # a tokenizer with no template: raw, said so
    unread = chat_mode(None)
    assert unread is not None and unread.render is None


async def test_the_training_datas_template_read_beside_its_files(tmp_path) -> None:
    from eagle3_tui.session.host.training_data import read_trained_template

    (tmp_path / "data_0.pt").write_bytes(b"")
    host = LocalHost()
    assert await read_trained_template(host, str(tmp_path / "data_0.pt")) is None  # none written: unknown
    (tmp_path / "data_config.json").write_text(json.dumps(_speculators_data_config("qwen"), indent=2))
    got = await read_trained_template(host, str(tmp_path / "data_0.pt"))
    assert got is not None and got.family == "chatml" and got.source == str(tmp_path / "data_config.json")
    (tmp_path / "data_config.json").write_text("{broken")
    assert await read_trained_template(host, str(tmp_path / "data_0.pt")) is None


# Real SGLang 0.5.23's answer to /v1/chat/completions with return_spec_tokens_details, recorded on the demo world
# (steps 3, topk 1, 4 draft tokens; CPU): the server's own template, the spec fields in sglext.
REAL_CHAT_ANSWER = {
    "id": "5c1f", "object": "chat.completion", "created": 1764780000, "model": "default",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "the s"}, "finish_reason": "length"}],
    "usage": {"prompt_tokens": 26, "total_tokens": 34, "completion_tokens": 8, "prompt_tokens_details": None,
              "reasoning_tokens": 0, "completion_tokens_details": None},
    "sglext": {"spec_tokens_details": {"spec_accept_rate": 0.2222222222222222, "spec_accept_length": 1.3333333333333333,
                                       "spec_cap_length": 0.0, "spec_block_accept_length": 0.0,
                                       "spec_num_correct_drafts": 4, "spec_num_proposed_drafts": 18,
                                       "spec_verify_ct": 6, "spec_correct_drafts_histogram": [4, 1, 0, 1],
                                       "spec_cap_lens_histogram": []}},
}


async def test_the_chat_endpoint_where_it_answers_the_spec_fields() -> None:
    """The route: SGLang 0.5.20+ answers per-request spec fields on its chat endpoint (used, exact tokens);
    one that answers without them (older releases) or not at all (the sim: 404) gets the template rendered
    here. The server is stood in by its recorded answers (httpx.MockTransport): real SGLang runs only in
    its own lane."""
    import httpx

    from eagle3_tui.sglang.client import choose_chat_route

    def server(chat_answer: dict | None):
        def handle(request: httpx.Request) -> httpx.Response:
            if request.url.path == "/v1/chat/completions":
                if chat_answer is None:
                    return httpx.Response(404, json={"detail": "Not Found"})
                assert json.loads(request.content)["return_spec_tokens_details"] is True
                return httpx.Response(200, json=chat_answer)
            return httpx.Response(404)
        return httpx.AsyncClient(transport=httpx.MockTransport(handle))

    llama = served_template(_llama_tokenizer_config(), "/m")
    old = {k: v for k, v in REAL_CHAT_ANSWER.items() if k != "sglext"}
    for answer, route in ((REAL_CHAT_ANSWER, "endpoint"), (old, "render"), (None, "render")):
        mode = chat_mode(llama)
        assert mode is not None
        async with SGLangClient("http://127.0.0.1:9", client=server(answer)) as c:
            await choose_chat_route(c, mode, "Hi there")
        assert mode.route == route, (answer is None, route)
        assert ("/v1/chat/completions" if route == "endpoint" else "sent to /generate") in mode.describe()
