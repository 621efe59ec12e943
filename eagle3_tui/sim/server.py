"""A simulated SGLang server: SGLang's flags, log format and HTTP API over the demo world's tiny models.

    python -m eagle3_tui.sim.server --model-path W/target --speculative-algorithm EAGLE3 \\
        --speculative-draft-model-path W/draft --speculative-num-steps 3 \\
        --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 --port 30000

Decoding is real: greedy, one request after another within each decode iteration, with EAGLE-3
chain drafting (topk 1) or SGLang's tree drafting (topk > 1) verified by the target, so accept
length and tok/s are measured. Flags
apply SGLang 0.5.6's rules (topk 1 forces draft tokens = steps + 1, auto-choice when all three are
unset). Sim-only flags: `--sim-embed-capture-patch` (the seeds' source patch that lets layer id -1
capture the embedding output), `--sim-background-load N` (N requests kept running so charts move),
`--sim-log-style {0.5.6,0.4.6,0.4.1-tp0}`, `--sglang-version V` (that release's rules, sim/release.py),
`--sim-target-arch {llama,qwen3,deepseek_v3}`. Like SGLang, the log goes to stderr and uvicorn's access
lines to stdout; SIGTERM stops it cleanly.

`--nnodes/--node-rank/--dist-init-addr` run several nodes (nodes.py: the head serves and logs, the
others join it). This module is the entry point; the parts are flags.py (the flags and SGLang's rules for them),
scheduler.py (the decode loop and its counters), service.py (generation, warm-up, lifecycle) and
routes.py (the HTTP endpoints).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

from eagle3_tui.remote.procgroup import pid_alive
from eagle3_tui.sim import nodes
from eagle3_tui.sim.flags import ServerArgs, args_dict, build_parser, effective_args, log_style, sim_device
from eagle3_tui.sim.logfmt import FORWARD_ITERS_ENV, LogWriter, env_bool, start_line
from eagle3_tui.sim.release import apply_release, auto_spec, sim_release, target_arch
from eagle3_tui.sim.routes import handler_for
from eagle3_tui.sim.scheduler import CONTEXT_LEN, MAX_TOTAL_NUM_TOKENS
from eagle3_tui.sim.service import SimServer

__all__ = ["build_parser", "effective_args", "main"]

CRASH_LINE = "Received sigquit from a child process. It usually means the child failed."


def _configure(ns: argparse.Namespace, log: LogWriter) -> tuple[ServerArgs, str] | int:
    """The effective args and the target's architecture, with SGLang's start-up lines; or the exit code."""
    model_path = Path(ns.model_path)
    if not (model_path / "config.json").exists():
        log.write(f"Error: the model path {ns.model_path} has no config.json")
        return 1
    target_cfg = json.loads((model_path / "config.json").read_text())
    arch = target_arch(ns.sim_target_arch, (target_cfg.get("architectures") or ["LlamaForCausalLM"])[0])
    try:
        args = effective_args(ns, arch, auto=auto_spec(ns.sglang_version, arch))
    except AssertionError as exc:
        log.write(f"AssertionError: {exc}")
        return 1
    if args.speculative_algorithm not in (None, "EAGLE3"):
        log.write(f"Error: the sim server simulates EAGLE3 only, not {args.speculative_algorithm}")
        return 2
    if args.speculative_algorithm and not args.speculative_draft_model_path:
        log.write("Error: --speculative-draft-model-path is required with --speculative-algorithm")
        return 2
    for w in args.warnings:
        log.write(w)
    log.write(start_line(args_dict(args), ns.sglang_version))
    return args, arch


def _crashed(log: LogWriter) -> int:
    log.write(f"Scheduler hit an exception: {traceback.format_exc().rstrip()}", scheduler=True)
    log.write(CRASH_LINE)
    return 1


def _load(engine_cls: Any, ns: argparse.Namespace, args: ServerArgs, arch: str, log: LogWriter) -> Any:
    """Load the target (and the draft) with SGLang's load lines. Raises what loading raised."""
    draft = args.speculative_draft_model_path if args.speculative_algorithm else None
    engine = engine_cls(
        Path(ns.model_path),
        Path(draft) if draft else None,
        num_steps=args.speculative_num_steps or 0,
        topk=args.speculative_eagle_topk or 1,
        num_draft_tokens=args.speculative_num_draft_tokens,
        embed_patch=ns.sim_embed_capture_patch,
        dtype=args.dtype,
    )
    if engine.plan is not None:
        rel = sim_release(ns.sglang_version, arch, engine.num_layers, engine.plan.layer_ids,
                          cuda_graph=not ns.disable_cuda_graph)
        if rel is not None:
            apply_release(engine, rel)
    log.write(
        f"Load weight end. type={arch}, dtype=torch.{engine.dtype}, avail mem=126.00 GB, mem usage=0.01 GB.",
        scheduler=True,
    )
    if engine.draft is not None:
        draft_arch = (engine.draft_config.get("architectures") or ["LlamaForCausalLMEagle3"])[0]
        log.write(
            f"Load weight end. type={draft_arch}, dtype=torch.{engine.dtype}, avail mem=126.00 GB, mem usage=0.00 GB.",
            scheduler=True,
        )
    log.write(
        f"KV Cache is allocated. #tokens: {MAX_TOTAL_NUM_TOKENS}, K size: 0.05 GB, V size: 0.05 GB",
        scheduler=True,
    )
    return engine


def _announce(engine: Any, args: ServerArgs, log: LogWriter, t0: float) -> None:
    log.write(
        f"max_total_num_tokens={MAX_TOTAL_NUM_TOKENS}, chunked_prefill_size={args.chunked_prefill_size or 8192}, "
        f"max_prefill_tokens=16384, max_running_requests={args.max_running_requests or 64}, "
        f"context_len={args.context_length or CONTEXT_LEN}, available_gpu_mem=126.00 GB",
        scheduler=True,
    )
    if engine.plan is not None:
        log.write(
            f"sim: EAGLE3 aux hidden states captured at boundaries {list(engine.plan.boundaries)} "
            f"(layers_to_capture={list(engine.plan.layers_to_capture)}, "
            f"capture_embedding={engine.plan.capture_embedding}); load took {time.monotonic() - t0:.2f}s"
        )


def _on_signals(stop: threading.Event, holder: dict[str, SimServer]) -> None:
    """SIGTERM/SIGINT: shut the server down if it runs, else leave at once."""

    def on_term(signum: int, frame: Any) -> None:
        stop.set()
        srv = holder.get("server")
        if srv is not None:
            srv.shutdown()
        else:
            raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)


def _exit_with(pid: int, log: LogWriter, poll_s: float = 1.0, grace_s: float = 30.0) -> None:
    """Send ourselves SIGTERM (the normal shutdown) once `pid` is gone: a SIGKILLed demo console
    cannot stop its server, so the server watches the console instead. A main thread that cannot
    take the signal in `grace_s` (stuck in a C call while loading) is left behind: the process exits."""

    def watch() -> None:
        while pid_alive(pid):
            time.sleep(poll_s)
        try:
            log.write(f"sim: process {pid} (--sim-exit-with-pid) is gone: shutting down")
        finally:
            os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace_s)
        log.write(f"sim: still up {grace_s:.0f}s after SIGTERM: exiting at once")
        sys.stderr.flush()
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-pid", daemon=True).start()


def _serve(server: SimServer, log: LogWriter) -> int:
    args = server.args
    try:
        server.serve(handler_for(server))
    except OSError as exc:
        log.write(
            f"ERROR:    [Errno {exc.errno}] error while attempting to bind on address ('{args.host}', {args.port}): {exc.strerror}"
        )
        return 1
    server.scheduler.stop()
    if server.scheduler.failed:
        return 1
    log.write("INFO:     Shutting down")
    log.write(f"INFO:     Finished server process [{os.getpid()}]")
    return 0


def main(argv: list[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    versioned = bool(ns.sglang_version)
    log = LogWriter(sys.stderr, style=log_style(ns), access_stream=sys.stdout,
                    device=sim_device(ns), graph=versioned and not ns.disable_cuda_graph)
    try:
        log.forward_iters = env_bool(os.environ.get(FORWARD_ITERS_ENV))
    except ValueError as err:  # SGLang's scheduler dies on it at import: one line, nothing started
        log.write(f"ValueError: {err} ({FORWARD_ITERS_ENV})")
        return 1
    bad_nodes = nodes.check_flags(ns)
    if bad_nodes:
        log.write(f"Error: {bad_nodes}")
        return 2
    configured = _configure(ns, log)
    if isinstance(configured, int):
        return configured
    args, arch = configured
    stop = threading.Event()
    holder: dict[str, SimServer] = {}
    _on_signals(stop, holder)
    if ns.sim_exit_with_pid:
        _exit_with(ns.sim_exit_with_pid, log)
    if ns.node_rank > 0:
        return nodes.run_follower(ns, log)
    head = nodes.open_head(ns, log)
    if isinstance(head, int):
        return head
    try:
        return _run_head(ns, args, arch, log, stop, holder)
    finally:
        if head is not None:
            head.close()


def _run_head(ns: argparse.Namespace, args: ServerArgs, arch: str, log: LogWriter, stop: threading.Event,
              holder: dict[str, SimServer]) -> int:
    """Load, warm up and serve (one node, or the head of several)."""
    from eagle3_tui.sim.engine import Engine  # torch: only once the flags are known to be good

    log.write("Load weight begin. avail mem=126.00 GB", scheduler=True)
    t0 = time.monotonic()
    try:
        engine = _load(Engine, ns, args, arch, log)
    except Exception:
        return _crashed(log)
    try:
        engine.warmup(engine.tokenizer.encode("The capital city of France is"))
    except Exception:
        return _crashed(log)
    _announce(engine, args, log, t0)
    if stop.is_set():
        return 0
    server = SimServer(args, engine, log, max(0, ns.sim_background_load), ns.sim_bg_max_new_tokens)
    server.ready_gate = ns.sim_ready_gate
    holder["server"] = server
    return _serve(server, log)


if __name__ == "__main__":
    try:
        code = main()
    except SystemExit as leave:  # argparse, or SIGTERM before the server was up
        code = leave.code if isinstance(leave.code, int) else 0 if leave.code is None else 1
    sys.stdout.flush()
    sys.stderr.flush()
    # Every line is written and flushed: skip the interpreter's teardown of torch (slow on a busy CPU:
    # benchmarks/MEASURED.md), which every stop and restart of a sim server would wait for.
    os._exit(code)
