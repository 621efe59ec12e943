"""Real SGLang releases for the tests: wheels fetched once with `pip download`, read straight from the zip.

The wheels are cached in ~/.cache/eagle3-tui/sglang-wheels (or $EAGLE3_TUI_SGLANG_WHEELS) and reused
across runs; nothing is installed or imported, and no SGLang code is ever written into this repository.
A wheel's Python files are the same on every platform, so one pinned platform is asked for.
When the package registry cannot be reached the tests that need a wheel are skipped, saying so.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import tempfile
import zipfile
from functools import cache
from pathlib import Path

import pytest

from eagle3_tui.sglang.installed import ARCHS, Read, answer, read_release

CACHE = Path(os.environ.get("EAGLE3_TUI_SGLANG_WHEELS", "~/.cache/eagle3-tui/sglang-wheels")).expanduser()
PIN = ["--only-binary=:all:", "--python-version", "3.11", "--platform", "manylinux_2_34_x86_64",
       "--implementation", "cp"]


def _cached(version: str) -> Path | None:
    hits = sorted(CACHE.glob(f"sglang-{version}-*.whl"))
    return hits[0] if hits else None


@cache
def wheel(version: str) -> Path:
    """The cached wheel of `version`, downloaded on first use; skips the test if the registry is unreachable."""
    hit = _cached(version)
    if hit is not None:
        return hit
    CACHE.mkdir(parents=True, exist_ok=True)
    # The suite runs in several pytest-xdist workers: one downloads while the others wait on the lock,
    # and the wheel enters the cache whole (a rename), so no reader ever opens a half-written zip.
    with open(CACHE / f".sglang-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        hit = _cached(version)
        if hit is not None:
            return hit
        with tempfile.TemporaryDirectory(dir=CACHE, prefix=".download-") as tmp:
            cmd = [sys.executable, "-m", "pip", "download", f"sglang=={version}", "--no-deps", "-d", tmp, "-q", *PIN]
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
            except (OSError, subprocess.TimeoutExpired) as err:
                pytest.skip(f"cannot run pip download for sglang {version}: {err}")
            got = sorted(Path(tmp).glob(f"sglang-{version}-*.whl"))
            if proc.returncode != 0 or not got:
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
                pytest.skip(f"package registry unreachable, sglang {version} wheel not fetched: {tail[0]}")
            os.replace(got[0], CACHE / got[0].name)
    return CACHE / got[0].name


@cache
def _zip(version: str) -> zipfile.ZipFile:
    return zipfile.ZipFile(wheel(version))


def reader(version: str) -> Read:
    """A `Read` over the wheel's `sglang/` files, without unpacking it."""
    zf = _zip(version)
    names = set(zf.namelist())

    def read(rel: str) -> str | None:
        member = f"sglang/{rel}"
        return zf.read(member).decode("utf-8", "replace") if member in names else None

    return read


def needed_files(version: str) -> dict[str, str]:
    """Every file a full analysis of `version` (all architectures) reads, by path inside the package."""
    base = reader(version)
    seen: dict[str, str] = {}

    def read(rel: str) -> str | None:
        text = base(rel)
        if text is not None:
            seen[rel] = text
        return text

    release = read_release(read)
    for arch in ARCHS:
        answer(release, arch, 32, [1, 15, 28])
    return seen


def package_dir(version: str, root: Path) -> Path:
    """`root/sglang` holding only the files the analysis needs (for the CLI's --sglang-dir)."""
    pkg = root / "sglang"
    for rel, text in needed_files(version).items():
        dest = pkg / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text, encoding="utf-8")
    return pkg
