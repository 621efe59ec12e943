"""The sim server's serving core, without HTTP: requests go through the scheduler and come back
with SGLang's `meta_info`; the warm-up request prints the ready line; `--sim-background-load N`
keeps N requests running so the charts move. routes.py turns HTTP requests into calls on it.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from eagle3_tui.sim.flags import ServerArgs
from eagle3_tui.sim.logfmt import LogWriter
from eagle3_tui.sim.request_log import finish_line
from eagle3_tui.sim.scheduler import CONTEXT_LEN, Request, Scheduler


class BadRequest(Exception):
    """A request SGLang would answer with 400; the message is what the client sees."""


class SimServer:
    """The serving side over the engine: batched generation through the scheduler, SGLang's
    `meta_info`, the warm-up that announces readiness, the optional background load, shutdown."""

    def __init__(
        self, args: ServerArgs, engine: Any, log: LogWriter, background: int, bg_tokens: int
    ) -> None:
        self.args = args
        self.engine = engine
        self.log = log
        self.scheduler = Scheduler(engine, args, log)
        self.ready = False
        self.background = background
        self.bg_tokens = bg_tokens
        self.stopping = threading.Event()
        self.httpd: ThreadingHTTPServer | None = None
        self.bg_threads: list[threading.Thread] = []
        self.ready_gate: str | None = None  # --sim-ready-gate

    # -- generation ------------------------------------------------------------------------------
    def generate_ids(self, prompt_ids: list[int], max_new_tokens: int, *, internal: bool = False) -> Request:
        return self.generate_many([prompt_ids], max_new_tokens, internal=internal)[0]

    def generate_many(
        self, prompts: list[Any], max_new_tokens: int, *, internal: bool = False
    ) -> list[Request]:
        """Validate every prompt, submit them together (they decode in one batch), wait for all."""
        vocab = self.engine.tokenizer.vocab_size
        for prompt_ids in prompts:
            if not isinstance(prompt_ids, list):
                raise BadRequest("input_ids must be a list of integers or a list of lists.")
            if not prompt_ids:
                raise BadRequest("The input_ids is empty.")
            if len(prompt_ids) + max_new_tokens > CONTEXT_LEN:
                raise BadRequest(
                    f"Requested token count exceeds the model's maximum context length of {CONTEXT_LEN} tokens. "
                    f"You requested a total of {len(prompt_ids) + max_new_tokens} tokens."
                )
            if any(not isinstance(i, int) or isinstance(i, bool) or i < 0 or i >= vocab for i in prompt_ids):
                raise BadRequest(f"The input_ids contains an id out of range [0, {vocab}).")
        reqs = [
            Request(
                rid=uuid.uuid4().hex,
                prompt_ids=list(p),
                max_new_tokens=max_new_tokens,
                stop_ids=frozenset({self.engine.tokenizer.eos_id}),
                internal=internal,
            )
            for p in prompts
        ]
        for req in reqs:
            self.scheduler.submit(req)
        for req in reqs:
            while not req.done.wait(0.1):
                if self.stopping.is_set() or self.scheduler.failed:
                    raise BadRequest("The server is shutting down.")
        if self.args.log_requests:
            for req in reqs:
                self._log_finished(req)
        return reqs

    def _log_finished(self, req: Request) -> None:
        """`--log-requests`: the finish line, on stdout as 0.5.23 writes it (its request logger's stream)."""
        a = self.args
        text = self.engine.tokenizer.decode(req.seq.output) if a.log_requests_level >= 2 else None
        line = finish_line(req.rid, self.meta_info(req), level=a.log_requests_level, fmt=a.log_requests_format,
                           text=text)
        self.log.write(line, stream=self.log.access_stream)

    def meta_info(self, req: Request) -> dict[str, Any]:
        seq = req.seq
        n = len(seq.output)
        finish: dict[str, Any]
        if seq.finished == "stop":
            finish = {"type": "stop", "matched": self.engine.tokenizer.eos_id}
        else:
            finish = {"type": "length", "length": n}
        meta: dict[str, Any] = {
            "id": req.rid,
            "finish_reason": finish,
            "prompt_tokens": len(seq.prompt),
            "weight_version": "default",
            "total_retractions": 0,
            "completion_tokens": n,
            "cached_tokens": 0,
            "e2e_latency": time.monotonic() - req.created,
        }
        if self.args.speculative_algorithm:
            meta["spec_accept_rate"] = 0.0
            meta["spec_accept_length"] = 0
            meta["spec_verify_ct"] = seq.verify_ct
            guess = (self.args.speculative_num_draft_tokens or 1) - 1
            total_draft = seq.verify_ct * guess
            if total_draft > 0:
                meta["spec_accept_rate"] = seq.accepted_drafts / total_draft
                meta["spec_accept_length"] = n / seq.verify_ct
                meta["spec_accept_token_num"] = seq.accepted_drafts
                meta["spec_draft_token_num"] = total_draft
        return meta

    def _background_loop(self, index: int) -> None:
        from eagle3_tui.sim.prompts import demo_prompts

        prompts = demo_prompts()
        i = index
        while not self.stopping.is_set():
            text = prompts[i % len(prompts)]
            i += self.background
            try:
                self.generate_ids(self.engine.tokenizer.encode(text), self.bg_tokens, internal=True)
            except BadRequest:
                return

    # -- lifecycle -------------------------------------------------------------------------------
    def _serve_tls(self, httpd: ThreadingHTTPServer) -> bool:
        """Wrap the listening socket as uvicorn does with --ssl-certfile and --ssl-keyfile (both needed)."""
        cert, key = self.args.ssl_certfile, self.args.ssl_keyfile
        if not cert:
            return False
        import ssl

        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        # the handshake in the handler thread, not in accept(): a plain-http client cannot stall the listener
        httpd.socket = ctx.wrap_socket(httpd.socket, server_side=True, do_handshake_on_connect=False)
        return True

    def serve(self, handler: type[BaseHTTPRequestHandler]) -> None:
        """Listen with `handler` (routes.handler_for(self)), start the scheduler, warm up, serve until
        `shutdown`."""
        self.httpd = ThreadingHTTPServer((self.args.host, self.args.port), handler)
        self.httpd.daemon_threads = True
        if self.stopping.is_set():  # `shutdown` came before there was an httpd to stop
            self.httpd.server_close()
            return
        scheme = "https" if self._serve_tls(self.httpd) else "http"
        self.scheduler.start()
        self.log.write(f"INFO:     Started server process [{os.getpid()}]")
        self.log.write("INFO:     Waiting for application startup.")
        self.log.write("INFO:     Application startup complete.")
        self.log.write(
            f"INFO:     Uvicorn running on {scheme}://{self.args.host}:{self.args.port} (Press CTRL+C to quit)"
        )
        threading.Thread(target=self._warmup, daemon=True).start()
        self.httpd.serve_forever(poll_interval=0.1)

    def _warmup(self) -> None:
        try:
            req = self.generate_ids(
                self.engine.tokenizer.encode("The capital city of France is"), 8, internal=True
            )
            assert req.seq is not None
        except Exception:
            return
        self.log.access("127.0.0.1:" + str(self.args.port + 1), "POST", "/generate", 200, "OK")
        if self.ready_gate:
            with open(self.ready_gate, "rb") as gate:  # a FIFO: blocks until a writer comes and goes
                gate.read()
        self.ready = True
        self.log.write("The server is fired up and ready to roll!")
        for i in range(self.background):
            t = threading.Thread(target=self._background_loop, args=(i,), daemon=True, name=f"bg{i}")
            t.start()
            self.bg_threads.append(t)

    def shutdown(self) -> None:
        self.stopping.set()
        if self.httpd is not None:
            threading.Thread(target=self.httpd.shutdown, daemon=True).start()

