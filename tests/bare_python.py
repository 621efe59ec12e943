"""A Python without the project on sys.path, where the check's zip must run (the GPU host's Python)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def bare_python(tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    """A Python with only torch and safetensors on sys.path (`-S`: no site dirs, so no .pth line puts the
    project there), as on a GPU host where eagle3-tui is not installed."""
    import safetensors
    import torch

    dirs = {str(Path(m.__file__).resolve().parent.parent) for m in (torch, safetensors)}
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": os.pathsep.join(sorted(dirs))}
    argv = [sys.executable, "-S", "-s"]
    probe = subprocess.run([*argv, "-c", "import eagle3_tui"], capture_output=True, text=True, env=env,
                           cwd=tmp_path, timeout=60)
    assert "No module named 'eagle3_tui'" in probe.stderr, "the bare Python must not see the project"
    return argv, env
