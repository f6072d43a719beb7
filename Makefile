# Two commands for learners:  make lab   |   make test
# Quick/full switch: MULTIGPU_MODE=quick (default) or full, e.g. `make lab MULTIGPU_MODE=full`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
MULTIGPU_MODE ?= quick
export MULTIGPU_MODE
LAB_ARGS ?=
# JupyterLab refuses to run as root (containers, CI) unless told to.
LAB_ROOT := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)
PYTEST_ARGS ?=
NB_CELL_TIMEOUT ?= 600

# Test-time environment: quiet TensorFlow, headless matplotlib, reproducible hashing.
TEST_ENV := TF_CPP_MIN_LOG_LEVEL=2 MPLBACKEND=Agg PYTHONHASHSEED=0 PYTHONUNBUFFERED=1

.PHONY: help install lab test unit notebooks capsule gpu-check sync-notebooks clean bench rerun-check html

help:
	@echo "make lab        - create .venv if needed, install, start JupyterLab on notebooks/00_start_here.ipynb"
	@echo "make test       - unit tests + every notebook through nbval, with a per-notebook time table"
	@echo "make capsule    - build the 2017 time capsule (Python 3.6 + TF 1.3 + Keras 2.1.3) if Python 3.6 exists"
	@echo "make gpu-check  - run every notebook on a GPU machine (1 GPU split into 2 logical GPUs), timed"
	@echo "MULTIGPU_MODE=quick|full selects quick (CI, laptops) or full (real GPUs) training."

$(STAMP): requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (keras multi-GPU course)" >/dev/null
	@touch $@

install: $(STAMP)

lab: $(STAMP)
	$(VENV)/bin/jupyter lab --ServerApp.root_dir="$(CURDIR)" \
	  --ServerApp.default_url=/lab/tree/notebooks/00_start_here.ipynb $(LAB_ROOT) $(LAB_ARGS)

# The time capsule: the original 2017 stack, built once and cached in .capsule/ (see helpers/capsule.py).
CAPSULE := .capsule
# A Python 3.6 that really runs (a pyenv shim for an unselected version does not): pyenv's own build first.
PY36 := $(shell for c in $${PYENV_ROOT:-$$HOME/.pyenv}/versions/3.6*/bin/python3.6 $$(command -v python3.6); do \
	  [ -x "$$c" ] && "$$c" -c 'import sys; assert sys.version_info[:2] == (3, 6)' >/dev/null 2>&1 && { echo "$$c"; break; }; done)
CAPSULE_REQ := helpers/capsule_requirements.txt

capsule:
	@if [ -z "$(PY36)" ]; then echo "time capsule: no Python 3.6 found; lessons 04/05 will show the recorded transcript"; \
	elif [ -f $(CAPSULE)/.installed ] && [ $(CAPSULE)/.installed -nt $(CAPSULE_REQ) ]; then echo "time capsule: ready ($(CAPSULE))"; \
	else set -e; echo "time capsule: building with $(PY36) (one time, ~500 MB)"; \
	  rm -rf $(CAPSULE); $(PY36) -m venv $(CAPSULE); \
	  $(CAPSULE)/bin/python -m pip install -q --disable-pip-version-check pip==21.3.1; \
	  $(CAPSULE)/bin/python -m pip install -q --disable-pip-version-check "wheel<0.38"; \
	  $(CAPSULE)/bin/python -m pip install -q --disable-pip-version-check -r $(CAPSULE_REQ); \
	  touch $(CAPSULE)/.installed; echo "time capsule: built"; fi

test: $(STAMP) capsule
	$(TEST_ENV) $(PY) -m pytest tests notebooks --nbval-lax --nbval-current-env \
	  --nbval-cell-timeout=$(NB_CELL_TIMEOUT) -p no:cacheprovider $(PYTEST_ARGS)

unit: $(STAMP)
	$(TEST_ENV) $(PY) -m pytest tests -p no:cacheprovider $(PYTEST_ARGS)

notebooks: $(STAMP)
	$(TEST_ENV) $(PY) -m pytest notebooks --nbval-lax --nbval-current-env \
	  --nbval-cell-timeout=$(NB_CELL_TIMEOUT) -p no:cacheprovider $(PYTEST_ARGS)

# On a GPU machine: one physical GPU (CUDA_VISIBLE_DEVICES=0) split into 2 logical GPUs by
# helpers.devices.ensure_devices(2); every notebook runs once, with a per-notebook time table.
GPU_CHECK_DEVICE ?= 0
gpu-check: $(STAMP)
	$(PY) -m pip install -q "tensorflow[and-cuda]==$$(sed -n 's/^tensorflow==//p' requirements.txt)"
	CUDA_VISIBLE_DEVICES=$(GPU_CHECK_DEVICE) $(PY) -c "import tensorflow as tf; g = tf.config.list_physical_devices('GPU'); \
	  print('GPUs seen by TensorFlow:', g); assert len(g) == 1, 'gpu-check needs exactly one visible GPU'"
	CUDA_VISIBLE_DEVICES=$(GPU_CHECK_DEVICE) $(TEST_ENV) $(PY) -m pytest notebooks --nbval-lax --nbval-current-env \
	  -p no:cacheprovider --nbval-cell-timeout=$(NB_CELL_TIMEOUT) $(PYTEST_ARGS)

sync-notebooks: $(STAMP)
	$(PY) -m helpers.template sync
	$(PY) -m helpers.template check

clean:
	rm -rf $(VENV) $(CAPSULE) _build _output

# Scaling benchmark for instructors / GPU machines: writes a CSV and a PNG under _output/bench/.
bench: $(STAMP)
	$(TEST_ENV) $(PY) -m helpers.bench --out _output/bench

# Run every notebook twice in one kernel from a temporary working directory (slow; not part of `make test`).
rerun-check: $(STAMP)
	$(TEST_ENV) $(PY) tests/run_twice.py $(NOTEBOOKS)

# Executed copies with outputs and figures, for reading without running (ignored folder _build/html).
HTML_NOTEBOOKS ?= notebooks/*.ipynb
HTML_DIR ?= _build/html
html: $(STAMP)
	$(TEST_ENV) $(VENV)/bin/jupyter nbconvert --to html --execute --ExecutePreprocessor.timeout=$(NB_CELL_TIMEOUT) \
	  --ExecutePreprocessor.kernel_name=python3 --output-dir "$(HTML_DIR)" $(HTML_NOTEBOOKS)
	@echo "executed copies written to $(HTML_DIR)/ (open 00_start_here.html)"
