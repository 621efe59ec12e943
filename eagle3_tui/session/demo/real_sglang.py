"""Real SGLang 0.5.23 serving the demo world on this CPU: where its venv is, its flags and environment.

`make sglang` builds `.venv-sglang` in the checkout; the checkout's `real_engines/sglang/cpu_support` folder holds
the test and demo support SGLang needs on a CPU (a torchvision import seed and a pure-torch `sgl_kernel`).
The product only names that folder on the server's PYTHONPATH; it never imports it.
The flags are the ones SGLang 0.5.23 needs here (research: real_engines.md): `--device cpu
--disable-cuda-graph --max-total-tokens 32768` (without the last the KV cache is sized from free RAM),
`--attention-backend intel_amx` (EAGLE-3 refuses torch_native), float32, and `SGLANG_USE_CPU_ENGINE=1`
(else `is_cpu()` is false), `OMP_NUM_THREADS=1` (two threads collapse when anything else runs).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from eagle3_tui.profile import Profile

SGLANG_VERSION = "0.5.23"
VENV = ".venv-sglang"
MISSING = (
    "real SGLang is not installed here: run `make sglang` in the eagle3-tui checkout (about 5 minutes, once) "
    f"to build {VENV} with SGLang {SGLANG_VERSION} for this CPU"
)


@dataclass(frozen=True)
class RealSglang:
    """An installed SGLang 0.5.23 for CPU: its interpreter and the support folder for PYTHONPATH."""

    python: Path
    support: Path

    def env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The variables the server needs on a CPU, over `base` (PYTHONPATH gets the support folder first)."""
        env = dict(base or {})
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = str(self.support) + (os.pathsep + path if path else "")
        env["SGLANG_USE_CPU_ENGINE"] = "1"
        env["OMP_NUM_THREADS"] = "1"
        return env


def checkout_root() -> Path:
    return Path(__file__).resolve().parents[3]


def find_real_sglang(root: Path | str | None = None) -> RealSglang | None:
    """The checkout's `.venv-sglang` with its support folder; None where either is missing."""
    base = Path(root) if root is not None else checkout_root()
    python = base / VENV / "bin" / "python"
    support = base / "real_engines" / "sglang" / "cpu_support"
    if not python.exists() or not (support / "sgl_kernel" / "__init__.py").exists():
        return None
    return RealSglang(python=python, support=support)


def server_argv(
    real: RealSglang,
    *,
    target: Path | str,
    draft: Path | str | None,
    port: int,
    steps: int | None = 3,
    topk: int | None = 1,
    draft_tokens: int | None = 4,
    decode_log_interval: int = 40,
    extra: tuple[str, ...] = (),
) -> list[str]:
    """`python -m sglang.launch_server ...` for the demo world's target (and draft, speculating when given)."""
    from eagle3_tui.sim.hf_tokenizer import ensure_hf_tokenizer

    tokenizer = ensure_hf_tokenizer(target)
    argv = [
        str(real.python), "-m", "sglang.launch_server",
        "--model-path", str(target),
        "--tokenizer-path", str(tokenizer),
        "--device", "cpu",
        "--dtype", "float32",
        "--disable-cuda-graph",
        "--max-total-tokens", "32768",
        "--attention-backend", "intel_amx",
        "--enable-metrics",
        "--decode-log-interval", str(decode_log_interval),
        "--host", "127.0.0.1",
        "--port", str(port),
    ]
    if draft is not None:
        argv += ["--speculative-algorithm", "EAGLE3", "--speculative-draft-model-path", str(draft)]
        for flag, value in (
            ("--speculative-num-steps", steps),
            ("--speculative-eagle-topk", topk),
            ("--speculative-num-draft-tokens", draft_tokens),
        ):
            if value is not None:
                argv += [flag, str(value)]
    return argv + list(extra)


def demo_profile(world: Any, real: RealSglang, *, port: int, state_dir: str | Path) -> Profile:
    """The demo host on real SGLang 0.5.23: the seeds' broken flags (steps 1, 16 draft tokens, topk 1)
    and a draft copy without a layer-id key, like the sim's demo (`profile.demo_profile`)."""
    from eagle3_tui.profile import demo_profile as sim_demo_profile

    profile = sim_demo_profile(world, port=port, state_dir=state_dir)
    draft = Path(profile.draft_path or "")
    profile.launch_command = server_argv(
        real, target=world.target_dir, draft=draft, port=port, steps=1, topk=1, draft_tokens=16,
        # a decode stat every 10 iterations (SGLang's default is 40) so the demo's charts move at once
        decode_log_interval=10,
        # each finished request's meta_info (no text) in the log: the Live tab's per-request row
        extra=("--log-requests", "--log-requests-level", "0"),
    )
    profile.launch_env = real.env()
    profile.remote_python = str(real.python)
    # A real server loads in 20-40 s on 2 cores; the restart deadline leaves room for a busy machine.
    profile.restart_deadline_s = 240.0
    return profile

