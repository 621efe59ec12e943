"""A fake SGLang on 127.0.0.1 answering garbage: bench, watch and doctor end in one sentence (or carry
on polling), never a traceback. Plus the one validating reader on its own.

The fake is started as `python -m sglang.launch_server --port P` (a module in a temp dir), so the
session discovers it as a running server; what it answers is read from a mode file on every request.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eagle3_tui.errors import UserError
from eagle3_tui.formats.readers import json_object, parse_json, sub_object, text_file
from tests.plugins.world import free_port, stop_processes_under
from tests.test_apply_killed_midway import cli

FAKE = r'''
import http.server, json, pathlib, sys, time
port = int(sys.argv[sys.argv.index("--port") + 1])
mode_file = pathlib.Path(sys.argv[sys.argv.index("--mode-file") + 1])
ANSWERS = {
    "garbage": b"\xff\xfe\x00garbage",
    "list": b"[1, 2]",
    "string": b'"fine"',
    "meta-list": b'{"text": "x", "meta_info": [1], "internal_states": "no"}',
    "infinity": b'{"text": "x", "meta_info": {"e2e_latency": Infinity}, "avg_spec_accept_length": NaN}',
    "deep": b"[" * 100000 + b"]" * 100000,
    "ok": b'{"text": "x", "meta_info": {"completion_tokens": 4, "e2e_latency": 0.01}}',
}

class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def answer(self):
        mode = mode_file.read_text().strip()
        if self.path == "/health":
            self.send_response(200); self.send_header("Content-Length", "0"); self.end_headers(); return
        if mode == "drop":
            self.close_connection = True
            self.connection.close()
            return
        body = ANSWERS.get(mode, b"{}")
        self.send_response(500 if mode == "500" else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.answer()

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(n)
        self.answer()

server = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)  # bound before it says it is ready
print("The server is fired up and ready to roll!", file=sys.stderr, flush=True)
server.serve_forever()
'''

MODES = ["garbage", "list", "string", "meta-list", "infinity", "deep", "500", "drop"]


@pytest.fixture
def fake_sglang(tmp_path):
    pkg = tmp_path / "fake" / "sglang"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "launch_server.py").write_text(FAKE)
    mode = tmp_path / "mode"
    mode.write_text("garbage")
    port = free_port()
    log = tmp_path / "server.log"
    with open(log, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "sglang.launch_server", "--model-path", str(tmp_path),
                                 "--port", str(port), "--mode-file", str(mode)],
                                cwd=pkg.parent, stdout=out, stderr=out, start_new_session=True)
    deadline = time.monotonic() + 30
    while "fired up" not in log.read_text() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    assert "fired up" in log.read_text(), f"the fake server did not start: {log.read_text()[-500:]}"
    prof = tmp_path / "hosts.toml"
    prof.write_text(f'["here"]\nlocal = true\nport = {port}\nlog_path = "{log}"\nstate_dir = "{tmp_path}/state"\n')
    try:
        yield prof, mode
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(10)
        stop_processes_under(tmp_path)


@pytest.mark.parametrize("mode", MODES)
def test_bench_on_garbage_is_one_sentence(fake_sglang, mode):
    prof, mode_file = fake_sglang
    mode_file.write_text(mode)
    r = cli(prof, "here", "bench", "-n", "2", "-c", "1", "--max-tokens", "4", timeout=120)
    assert "Traceback" not in r.stderr and "never retrieved" not in r.stderr, r.stderr
    assert r.returncode == 2, (r.returncode, r.stderr)
    line = r.stderr.strip()
    assert line.startswith("eagle3-tui: every benchmark request failed: ") and "\n" not in line, line


@pytest.mark.parametrize("mode", ["garbage", "meta-list", "infinity", "drop"])
def test_watch_and_doctor_carry_on_through_garbage(fake_sglang, mode):
    prof, mode_file = fake_sglang
    mode_file.write_text(mode)
    r = cli(prof, "here", "watch", "--no-ui", "--duration", "4", timeout=120)
    assert r.returncode == 0 and "Traceback" not in r.stderr and "never retrieved" not in r.stderr, r.stderr
    assert r.stdout.startswith("server: ready")
    r = cli(prof, "here", "doctor", timeout=120)
    assert "Traceback" not in r.stderr and r.returncode == 0, r.stderr


def test_the_reader_says_what_is_wrong_in_one_sentence(tmp_path: Path) -> None:
    cases = {
        b"\xff{}": "is not UTF-8 text (byte 0 is 0xff)",
        b'{"a": NaN}': "holds NaN, which is not a JSON number",
        b'{"a": -Infinity}': "holds -Infinity",
        b'{"a": 1e999}': "holds 1e999",
        b"[" * 100000: "nested too deeply",
        b'{"a": ': "is not valid JSON: Expecting value (line 1, column 7)",
        b"": "is not valid JSON",
    }
    for data, says in cases.items():
        with pytest.raises(UserError, match=None) as info:
            parse_json(data, "config.json")
        assert says in str(info.value) and str(info.value).startswith("config.json ") and "\n" not in str(info.value)
    with pytest.raises(UserError, match=r"config\.json is a JSON list, not an object"):
        json_object(b"[]", "config.json")
    with pytest.raises(UserError, match=r"config\.json is a JSON string, not an object"):
        json_object(b'"x"', "config.json")
    assert sub_object({"m": None}, "m", "answer") == {}
    with pytest.raises(UserError, match="answer: meta_info is a JSON list, not an object"):
        sub_object({"meta_info": []}, "meta_info", "answer")
    assert json_object(json.dumps({"a": [1.5]}), "x") == {"a": [1.5]}
    binary = tmp_path / "prompts.bin"
    binary.write_bytes(b"hello\0\x01\x02")
    with pytest.raises(UserError, match="is a binary file, not text"):
        text_file(binary, "the prompts file")
    latin = tmp_path / "prompts.txt"
    latin.write_bytes("caf\xe9\n".encode("latin-1"))
    with pytest.raises(UserError, match="is not UTF-8 text"):
        text_file(latin, "the prompts file")
    with pytest.raises(UserError, match="cannot read the prompts file"):
        text_file(tmp_path / "missing", "the prompts file")


def test_bench_with_a_binary_prompts_file_is_one_sentence(tmp_path: Path) -> None:
    prof = tmp_path / "hosts.toml"
    prof.write_text(f'["here"]\nlocal = true\nport = 1\nstate_dir = "{tmp_path}/state"\n')
    prompts = tmp_path / "p.bin"
    prompts.write_bytes(bytes(range(256)))
    r = cli(prof, "here", "bench", "--prompts", str(prompts))
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "is a binary file, not text" in r.stderr, r.stderr


def test_a_corrupt_ledger_is_said_by_bench(fake_sglang):
    prof, mode_file = fake_sglang
    mode_file.write_text("ok")
    data = prof.parent / "data"
    data.mkdir(exist_ok=True)
    (data / "ledger.sqlite3").write_bytes(b"not a database at all " * 200)
    # --raw: the fake answers /generate's shape on every path (its chat endpoint is garbage, another test's case)
    r = cli(prof, "here", "bench", "--raw", "-n", "2", "-c", "1", "--max-tokens", "4", timeout=120)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "output tok/s" in r.stdout
    assert "eagle3-tui: warning: " in r.stderr and "this benchmark run is not recorded" in r.stderr, r.stderr
