"""The sim server's command line: SGLang's launch flags and the rules SGLang 0.5.6 applies to them.

`build_parser` takes SGLang's flags (plus a few `--sim-*` ones); `effective_args` applies
`ServerArgs._handle_speculative_decoding` (topk 1 forces draft tokens = steps + 1; auto-choice only
when steps, topk and draft tokens are all unset) and returns the effective args that `/server_info`
reports, with the warnings SGLang would log. Pure: no I/O, no torch.
"""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from eagle3_tui.eagle.spec_config import SpecConfig
from eagle3_tui.sglang.installed.source import version_key
from eagle3_tui.sim.logfmt import STYLE_ALIASES, STYLES
from eagle3_tui.sim.release import SIM_ARCHS
from eagle3_tui.sim.request_log import FORMATS, LEVELS

SGLANG_VERSION = "0.5.6"
DESCRIPTION = "A simulated SGLang server: SGLang's flags, log format and HTTP API over the demo world's tiny models."


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m eagle3_tui.sim.server", description=DESCRIPTION)
    p.add_argument("--model-path", "--model", dest="model_path", required=True)
    p.add_argument("--tokenizer-path", default=None)
    p.add_argument("--served-model-name", default=None)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=30000)
    p.add_argument(
        "--speculative-algorithm", choices=["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM"], default=None
    )
    p.add_argument("--speculative-draft-model-path", "--speculative-draft-model", default=None)
    p.add_argument("--speculative-num-steps", type=int, default=None)
    p.add_argument("--speculative-eagle-topk", type=int, default=None)
    p.add_argument("--speculative-num-draft-tokens", type=int, default=None)
    p.add_argument("--speculative-token-map", default=None)
    p.add_argument("--decode-log-interval", type=int, default=40)
    p.add_argument("--tp-size", "--tp", dest="tp_size", type=int, default=1)
    p.add_argument("--dp-size", "--dp", dest="dp_size", type=int, default=1)
    p.add_argument("--enable-metrics", action="store_true")
    p.add_argument("--api-key", default=None, help="every endpoint but /health and /metrics wants this Bearer token")
    # SGLang 0.5.12+ server_args.py: --ssl-keyfile/--ssl-certfile make the HTTP server https
    p.add_argument("--ssl-keyfile", default=None)
    p.add_argument("--ssl-certfile", default=None)
    p.add_argument("--max-running-requests", type=int, default=None)
    p.add_argument("--mem-fraction-static", type=float, default=None)
    p.add_argument("--context-length", type=int, default=None)
    p.add_argument("--dtype", default="auto")
    p.add_argument("--trust-remote-code", action="store_true")
    p.add_argument("--disable-cuda-graph", action="store_true")
    # SGLang's own flags for a CPU server (0.5.23 on CPU needs both: research real_engines.md)
    p.add_argument("--device", default=None, choices=["cuda", "cpu"])
    p.add_argument("--max-total-tokens", type=int, default=None)
    p.add_argument("--cuda-graph-max-bs", type=int, default=None)
    p.add_argument("--attention-backend", default=None)
    p.add_argument("--page-size", type=int, default=1)
    p.add_argument("--chunked-prefill-size", type=int, default=None)
    p.add_argument("--log-level", default="info")
    # each finished request's meta_info in the log (sim/request_log.py)
    p.add_argument("--log-requests", action="store_true")
    p.add_argument("--log-requests-level", type=int, default=2, choices=LEVELS)
    p.add_argument("--log-requests-format", default="text", choices=FORMATS)
    p.add_argument("--random-seed", type=int, default=None)
    p.add_argument("--nnodes", type=int, default=1, help="nodes serving the model together (sim/nodes.py)")
    p.add_argument("--node-rank", type=int, default=0, help="this node's rank; 0 is the head (HTTP and stats)")
    p.add_argument("--dist-init-addr", default=None, metavar="HOST:PORT",
                   help="where the head waits for the other nodes")
    p.add_argument("--dist-timeout", type=int, default=None, help="seconds a node waits for the head")
    p.add_argument(
        "--sim-embed-capture-patch", action="store_true", help="the seeds' patch: layer id -1 = embedding"
    )
    p.add_argument("--sim-background-load", type=int, default=0, metavar="N", help="keep N requests running")
    p.add_argument("--sim-log-style", default=None, choices=[*STYLES, *STYLE_ALIASES],
                   help="the Decode line's form (default: that of --sglang-version, else 0.5.6)")
    p.add_argument(
        "--sglang-version", default=None, metavar="V",
        help="behave as SGLang V does (e.g. 0.4.9, 0.5.6, 0.5.23): start line, layer-id rule, embedding capture, "
        "decode under CUDA graphs, auto-choice; unset: a CPU server with the generic +1 rule",
    )
    p.add_argument("--sim-target-arch", default=None, choices=sorted(SIM_ARCHS),
                   help="the architecture the tiny target is served as (its tensors stay the world's)")
    p.add_argument("--sim-exit-with-pid", type=int, default=None, metavar="PID",
                   help="shut down when process PID is gone (the demo console: its server never outlives it)")
    p.add_argument("--sim-bg-max-new-tokens", type=int, default=96, help=argparse.SUPPRESS)
    p.add_argument("--sim-ready-gate", default=None, metavar="FIFO",
                   help="before announcing readiness, read FIFO to its end: a test holds the server in its "
                        "loading phase until it opens the pipe for writing and closes it (an event, not a delay)")
    return p


@dataclass
class ServerArgs:
    """The effective server args (after SGLang's adjustments), as /server_info reports them."""

    model_path: str
    tokenizer_path: str
    served_model_name: str
    host: str
    port: int
    speculative_algorithm: str | None
    speculative_draft_model_path: str | None
    speculative_num_steps: int | None
    speculative_eagle_topk: int | None
    speculative_num_draft_tokens: int | None
    speculative_token_map: str | None
    decode_log_interval: int
    tp_size: int
    dp_size: int
    enable_metrics: bool
    max_running_requests: int | None
    mem_fraction_static: float | None
    context_length: int | None
    dtype: str
    page_size: int
    chunked_prefill_size: int | None
    log_level: str
    random_seed: int
    log_requests: bool = False
    log_requests_level: int = 2
    log_requests_format: str = "text"
    device: str = "cpu"
    disable_cuda_graph: bool = True
    attention_backend: str | None = None  # echoed in /server_info as SGLang does (held to 0.5.23 by a test)
    skip_server_warmup: bool = False
    api_key: str | None = None
    ssl_keyfile: str | None = None
    ssl_certfile: str | None = None
    sglang_version: str = SGLANG_VERSION
    """The release /server_info reports (`--sglang-version`, else the one the sim's rules follow)."""
    warnings: list[str] = field(default_factory=list)


def effective_args(ns: argparse.Namespace, target_arch: str, *, auto: SpecConfig | None = None) -> ServerArgs:
    """Apply `ServerArgs._handle_speculative_decoding` (SGLang 0.5.6; `auto`: the release's own auto-choice)."""
    warnings: list[str] = []
    algo = ns.speculative_algorithm
    if algo == "NEXTN":
        algo = "EAGLE"
    steps, topk, draft_tokens = (
        ns.speculative_num_steps,
        ns.speculative_eagle_topk,
        ns.speculative_num_draft_tokens,
    )
    max_running = ns.max_running_requests
    if algo in ("EAGLE", "EAGLE3", "STANDALONE"):
        if max_running is None:
            max_running = 48
            warnings.append(
                "Max running requests is reset to 48 for speculative decoding. You can override this by "
                "explicitly setting --max-running-requests."
            )
        warnings.append(
            "Overlap scheduler is disabled because of using eagle3 or standalone speculative decoding."
        )
        if steps is None:
            if topk is not None or draft_tokens is not None:
                raise AssertionError(
                    "speculative_eagle_topk and speculative_num_draft_tokens must be unset when "
                    "speculative_num_steps is unset (auto-choice)"
                )
            if algo == "STANDALONE":
                steps, topk, draft_tokens = 3, 1, 4
            else:
                steps, topk, draft_tokens = auto or SpecConfig(5, 4, 8)  # 0.5.6: LlamaForCausalLM and every other arch
        if topk is None or draft_tokens is None:
            raise AssertionError(
                "speculative_eagle_topk and speculative_num_draft_tokens must be set with speculative_num_steps"
            )
        if topk == 1 and draft_tokens != steps + 1:
            warnings.append(
                "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1"
            )
            draft_tokens = steps + 1
        if ns.speculative_token_map and algo == "EAGLE3":
            warnings.append(
                "Speculative token map specified, but EAGLE3 models already have this. Ignoring the specified token map."
            )
    return ServerArgs(
        model_path=ns.model_path,
        tokenizer_path=ns.tokenizer_path or ns.model_path,
        served_model_name=ns.served_model_name or ns.model_path,
        host=ns.host,
        port=ns.port,
        speculative_algorithm=algo,
        speculative_draft_model_path=ns.speculative_draft_model_path,
        speculative_num_steps=steps,
        speculative_eagle_topk=topk,
        speculative_num_draft_tokens=draft_tokens,
        speculative_token_map=ns.speculative_token_map,
        decode_log_interval=ns.decode_log_interval,
        tp_size=ns.tp_size,
        dp_size=ns.dp_size,
        enable_metrics=ns.enable_metrics,
        max_running_requests=max_running,
        mem_fraction_static=ns.mem_fraction_static,
        context_length=ns.context_length,
        dtype=ns.dtype,
        page_size=ns.page_size,
        chunked_prefill_size=ns.chunked_prefill_size,
        log_level=ns.log_level,
        log_requests=ns.log_requests,
        log_requests_level=ns.log_requests_level,
        log_requests_format=ns.log_requests_format,
        random_seed=ns.random_seed if ns.random_seed is not None else 0,
        device=sim_device(ns),
        disable_cuda_graph=bool(ns.disable_cuda_graph) if ns.sglang_version else True,
        attention_backend=ns.attention_backend,
        sglang_version=ns.sglang_version or SGLANG_VERSION,
        api_key=ns.api_key,
        ssl_keyfile=ns.ssl_keyfile,
        ssl_certfile=ns.ssl_certfile,
        warnings=warnings,
    )


def sim_device(ns: argparse.Namespace) -> str:
    """`--device`, else cuda for a versioned sim (it plays a GPU server), cpu for the plain one."""
    return str(ns.device or ("cuda" if ns.sglang_version else "cpu"))


def args_dict(args: ServerArgs) -> dict[str, Any]:
    d = dataclasses.asdict(args)
    d.pop("warnings")
    d.pop("sglang_version")
    d.pop("api_key")  # never echoed back
    return d


def log_style(ns: argparse.Namespace) -> str:
    """The Decode line's form: `--sim-log-style`, else the release's. 0.4.9 `managers/scheduler.py` prints
    `Decode batch. ... accept len: X, cuda graph: ...` with no accept rate: the 0.4.6 form, as every 0.4."""
    if ns.sim_log_style:
        return str(STYLE_ALIASES.get(ns.sim_log_style, ns.sim_log_style))
    if ns.sglang_version and version_key(ns.sglang_version) < version_key("0.5.0"):
        return "0.4.6"
    return "0.5.6"
