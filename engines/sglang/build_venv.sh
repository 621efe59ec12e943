#!/usr/bin/env bash
# Build .venv-sglang (SGLang 0.5.23 on CPU) from nothing, or reuse it while requirements.txt,
# constraints.txt and this script are unchanged (a stamp named by their hash).
#   engines/sglang/build_venv.sh [VENV]   (default: .venv-sglang in the checkout)
# TORCH_PIP_ARGS: extra pip arguments for torch only, as in the Makefile.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
venv="${1:-$root/.venv-sglang}"
python="${PYTHON:-python3}"

key="$(cat "$here/requirements.txt" "$here/constraints.txt" "$here/build_venv.sh" | sha256sum | cut -c1-16)"
stamp="$venv/.built-$key"
if [ -f "$stamp" ]; then
    echo "$venv: up to date ($key)"
    exit 0
fi

start=$(date +%s)
rm -rf "$venv"
"$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip --quiet --disable-pip-version-check)
cons=(-c "$here/constraints.txt")
# torch first, from the local CPU wheel (or TORCH_PIP_ARGS' index): never a CUDA build.
# shellcheck disable=SC2086
"${pip[@]}" install "${cons[@]}" ${TORCH_PIP_ARGS:-} torch==2.13.0
# SGLang's declared dependencies pull CUDA kernels and torch 2.14.1: install it alone, then the pinned set.
"${pip[@]}" install "${cons[@]}" --no-deps sglang==0.5.23
"${pip[@]}" install "${cons[@]}" --no-deps -r "$here/requirements.txt"
PYTHONPATH="$here/cpu_support" SGLANG_USE_CPU_ENGINE=1 "$venv/bin/python" -c "import torch, sglang.version as v; assert torch.__version__.startswith('2.13.0'), torch.__version__; print('sglang', v.__version__, 'torch', torch.__version__)"
touch "$stamp"
echo "$venv: built in $(( $(date +%s) - start )) s ($key)"
