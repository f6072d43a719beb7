# Two commands for learners:  make lab   |   make test   (and `make notebooks`: every lesson top to bottom)
# Quick/full switch: MULTIGPU_MODE=quick (default) or full, e.g. `make lab MULTIGPU_MODE=full`.
# Stacks: STACK=pinned (default; requirements.txt, Python 3.11, .venv) or STACK=hosted
# (requirements-hosted.txt: Colab's versions, Python 3.13, .venv-hosted, helpers installed without -e),
# STACK=kaggle (requirements-kaggle.txt: Kaggle's image, Python 3.12, .venv-kaggle, helpers without -e),
# STACK=latest (requirements-latest.txt: lower bounds, so the newest TensorFlow/Keras/JAX; Python 3.13,
# .venv-latest) or STACK=nightly (requirements-nightly.txt: keras-nightly and the pinned stack's other pins, Python
# 3.11, .venv-nightly). CI runs kaggle, latest and nightly on a schedule (CONTRIBUTING.md, "What CI checks").
SHELL := /bin/bash
.DEFAULT_GOAL := help

STACK ?= pinned
# The lessons' registry entries say on which stacks `make test` runs them (tools/pytest_course.py reads STACK).
export STACK
PYENV_VERSIONS := $${PYENV_ROOT:-$$HOME/.pyenv}/versions
# An interpreter of the wanted version that really runs (a pyenv shim of an unselected version does not).
find_python = $(shell for c in $(PYENV_VERSIONS)/$(1)*/bin/python$(1) $$(command -v python$(1)); do \
	  [ -x "$$c" ] && "$$c" -c 'import sys; assert "%d.%d" % sys.version_info[:2] == "$(1)"' >/dev/null 2>&1 \
	  && { echo "$$c"; break; }; done)
# The website is built from the pinned stack's run: its nbval run leaves the executed copies the site renders.
BOOK_DIR ?= _build/book
ifeq ($(STACK),pinned)
  PY_VERSION := 3.11
  VENV ?= .venv
  REQUIREMENTS := requirements.txt
  LOCK := requirements.lock
  TORCH_REQUIREMENTS := requirements-torch.txt
  HELPERS_INSTALL := --no-deps --no-build-isolation -e .
  NB_RUN_ENV := NB_EXECUTED_DIR=$(BOOK_DIR)/executed
  # make test runs each cell twice here (the plain run plus each cell's second run, in one pass).
  TEST_RERUN := each
else ifeq ($(STACK),hosted)
  PY_VERSION := 3.13
  VENV ?= .venv-hosted
  REQUIREMENTS := requirements-hosted.txt
  LOCK := requirements-hosted.lock
  TORCH_REQUIREMENTS := requirements-torch-hosted.txt
  HELPERS_INSTALL := --no-deps --no-build-isolation --force-reinstall .
  # A non-editable install is a snapshot: refresh it before every run so tests see the working tree.
  REFRESH_HELPERS := $(VENV)/bin/python -m pip install -q --no-deps --no-build-isolation --force-reinstall . && rm -rf build
  # The JAX lessons on Kaggle's T4 x2 count, 2 devices (the pinned stack runs them on 4): Kaggle's versions and
  # Kaggle's device count together, and each lesson still runs once per stack.
  NB_RUN_ENV := MULTIGPU_JAX_DEVICES=2
else ifeq ($(STACK),kaggle)
  # Kaggle's image (docker-python, 2026-08) is built on Colab's base of 2026-05: Colab's TensorFlow, Keras and JAX
  # with Python 3.12, numpy 2.0.2 and torch 2.10. The JAX lessons on its T4 x2 count, 2 devices, as on hosted.
  PY_VERSION := 3.12
  VENV ?= .venv-kaggle
  REQUIREMENTS := requirements-kaggle.txt
  LOCK := requirements-kaggle.lock
  TORCH_REQUIREMENTS := requirements-torch-kaggle.txt
  HELPERS_INSTALL := --no-deps --no-build-isolation --force-reinstall .
  REFRESH_HELPERS := $(VENV)/bin/python -m pip install -q --no-deps --no-build-isolation --force-reinstall . && rm -rf build
  NB_RUN_ENV := MULTIGPU_JAX_DEVICES=2
else ifeq ($(STACK),latest)
  PY_VERSION := 3.13
  VENV ?= .venv-latest
  REQUIREMENTS := requirements-latest.txt
  TORCH_REQUIREMENTS := requirements-torch.txt
  HELPERS_INSTALL := --no-deps -e .
else ifeq ($(STACK),nightly)
  # Python 3.11, as pinned: `pip install torch==2.13.0` takes the CPU build where a machine has it on disk.
  PY_VERSION := 3.11
  VENV ?= .venv-nightly
  REQUIREMENTS := requirements-nightly.txt
  TORCH_REQUIREMENTS := requirements-torch.txt
  HELPERS_INSTALL := --no-deps -e .
  # Keras's main branch is outside the supported range, whose messages TROUBLESHOOTING.md indexes: no index check.
  NB_RUN_ENV := CHECK_ERROR_INDEX=0
  # keras-nightly installs the import name `keras`, as keras does, which TensorFlow and keras-hub pull in: remove
  # keras, then write keras-nightly's files again (the removal took the files both wrote), and check what imports.
  # (pip's later installs then say that tensorflow and keras-hub require keras, "which is not installed": expected.)
  POST_INSTALL = $(PY) -m pip uninstall -q -y keras && v=$$($(PY) -c 'import importlib.metadata as m; \
    print(m.version("keras-nightly"))') && $(PY) -m pip install -q --no-deps --force-reinstall "keras-nightly==$$v" && \
    KERAS_BACKEND=numpy $(PY) -c "import keras; assert keras.__version__ == '$$v', keras.__version__; \
    print('keras-nightly', '$$v', 'imports as keras')"
else
  $(error STACK=$(STACK) is not a stack; use STACK=pinned (default), hosted, kaggle, latest or nightly)
endif
PYTHON ?= $(call find_python,$(PY_VERSION))
PY     := $(VENV)/bin/python
# The pinned, hosted and kaggle stacks install their lock (`make lock` writes it from the requirements file): every
# package, dependencies included, at one version with its hashes, refused if a downloaded file differs
# (--require-hashes). The latest and nightly stacks look for drift (lower bounds; the newest keras-nightly), so
# they install their requirements files.
INSTALL_FROM := $(or $(LOCK),$(REQUIREMENTS))
HASHES := $(if $(LOCK),--require-hashes)
STAMP  := $(VENV)/.installed
TORCH_STAMP := $(VENV)/.torch-installed
MULTIGPU_MODE ?= quick
export MULTIGPU_MODE
LAB_ARGS ?=
# JupyterLab refuses to run as root (containers, CI) unless told to.
LAB_ROOT := $(shell [ "$$(id -u)" = 0 ] && echo --allow-root)
PYTEST_ARGS ?=
# INSTALLER=pip installs with pip even where uv can be had (the default, auto, prefers uv).
INSTALLER ?= auto
NB_CELL_TIMEOUT ?= 600

# The kernel name and display name every notebook records (tools/nbtemplate.py; a test keeps them equal).
KERNEL_DISPLAY_NAME := Python 3 (ipykernel)
# Test-time environment: reproducible hashing. No TensorFlow log variable and no matplotlib backend are set:
# notebooks run as a learner's kernel does (tests/conftest.py sets them for unit tests only, and the course's
# pytest plugin starts each notebook's kernel without them).
TEST_ENV := env -u MPLBACKEND PYTHONHASHSEED=0 PYTHONUNBUFFERED=1
NBVAL := --nbval-lax --nbval-current-env --nbval-cell-timeout=$(NB_CELL_TIMEOUT) -p no:cacheprovider
# Re-runs (tools/pytest_course.py): RERUN=each runs every cell a second time right after its first run, RERUN=all
# the whole notebook a second time, RERUN=off neither. Unset: make test on the pinned stack runs each cell twice,
# make rerun-each too, every other run plainly.
RERUN ?=
ifneq ($(filter-out each all off,$(RERUN)),)
  $(error RERUN=$(RERUN): use RERUN=each, RERUN=all or RERUN=off)
endif
nb_rerun = NB_RERUN=$(if $(filter off,$(RERUN)),,$(or $(RERUN),$(1)))

.PHONY: help install install-torch install-book lock pin-helpers lab lint test unit notebooks capsule capsule-python capsule-record gpu-check sync-notebooks clean bench rerun-each memcheck timings book book-test slurm-check

help:
	@echo "make lab          - create .venv if needed, install, start JupyterLab on notebooks/00_start_here.ipynb"
	@echo "                    (LAB_ARGS='--port=8890 --IdentityProvider.token=abc' passes options to jupyter lab)"
	@echo "make test         - every test + every notebook through nbval, timed (pinned stack: each cell run twice)"
	@echo "make notebooks    - every lesson top to bottom through nbval, timed: the check for learners and instructors"
	@echo "make install      - only create and fill the environment (.venv, or .venv-STACK with STACK=...)"
	@echo "make install-torch - add PyTorch to it, for lesson 12 (make test and make notebooks do it themselves)"
	@echo "make unit         - unit tests without the slow end-to-end ones"
	@echo "make lint         - ruff and the notebook rules (tools/nblint.py), without the course's environment"
	@echo "make capsule      - build the 2017 time capsule (Python 3.6 + TF 1.3 + Keras 2.1.3) if Python 3.6 exists"
	@echo "make capsule-python - Python 3.6 for the capsule from conda-forge where there is none (GitHub's runners)"
	@echo "make capsule-record - re-record the capsule transcripts lessons 04/05 replay (needs the capsule)"
	@echo "make bench        - the scaling benchmark from the command line: CSV + PNG under _output/bench/"
	@echo "make book         - the course website (each lesson's executed copy, search, launch links) in _build/book/html/"
	@echo "make book-test    - make book, then check the site in headless Chromium (screenshot in _output/book-test/)"
	@echo "make rerun-each   - every notebook with each code cell executed twice in a row (make test does it on the"
	@echo "                    pinned stack); RERUN=all: each notebook top to bottom twice in one kernel instead"
	@echo "make memcheck     - peak memory (kernel + child processes) and time per notebook; NOTEBOOKS=..., MEMCHECK_ARGS=--one-core (Binder-like)"
	@echo "make timings      - measure every notebook (2 cores + one core) and regenerate docs/workshop.md's timing table"
	@echo "                    (LESSON=NN: that lesson alone, added to the recorded times)"
	@echo "make gpu-check    - on a GPU machine: every notebook on 1 GPU split in 2 and on 2 real GPUs, timed, with a report"
	@echo "make slurm-check  - start a one-node Slurm here and run the course's jobs under it (root; tools/slurm/check.sh)"
	@echo "make chaos        - kill each resumable job KILLS=20 times (half mid-write), rerun it, check what survived"
	@echo "make sync-notebooks - everything generated from the lessons' registry: README's table, the course map,"
	@echo "                    the workshop tables, each notebook's badges and Setup, the one notebook format"
	@echo "make clean        - remove the environments, the time capsule and built outputs"
	@echo "STACK=pinned|hosted|kaggle|latest|nightly  pinned (default): requirements.txt, Python 3.11; hosted: Colab's"
	@echo "                    versions, Python 3.13; kaggle: Kaggle's image, Python 3.12; latest: the newest releases"
	@echo "                    (requirements-latest.txt), Python 3.13; nightly: keras-nightly + the pinned pins, Python 3.11"
	@echo "MULTIGPU_MODE=quick|full selects quick (CI, laptops) or full (real GPUs) training."

$(STAMP): $(or $(LOCK),$(REQUIREMENTS)) pyproject.toml
	@if [ ! -x $(PY) ] && [ -z "$(PYTHON)" ]; then \
	  echo "STACK=$(STACK) needs Python $(PY_VERSION): none found (tried pyenv's $(PY_VERSION).x and python$(PY_VERSION) on PATH)." \
	       "Install it (e.g. 'pyenv install $(PY_VERSION)') or pass PYTHON=/path/to/python$(PY_VERSION); nothing was installed."; exit 1; fi
	@# A venv whose creation was stopped has a python but no pip: make it again instead of failing on it forever.
	@$(PY) -m pip --version >/dev/null 2>&1 || { [ ! -e $(VENV) ] || echo "$(VENV) is incomplete (a stopped install?): making it again"; \
	  $(PYTHON) -m venv --clear $(VENV); }
	@# uv installs the same pins faster than pip; it comes from the package registry into the venv itself (or from
	@# PATH). Without it, pip does the same job, slower. --compile-bytecode: pip writes .pyc files at install, uv
	@# does not by default, and where PYTHONDONTWRITEBYTECODE is set every process would compile TensorFlow's
	@# sources again (import tensorflow measured at 13 s instead of 5 s, every notebook about twice as slow).
	@uv=$$(command -v uv || true); [ "$(INSTALLER)" = pip ] && uv=; \
	if [ -z "$$uv" ] && [ "$(INSTALLER)" != pip ] && $(PY) -m pip install -q uv >/dev/null 2>&1; then uv=$(VENV)/bin/uv; fi; \
	if [ -n "$$uv" ]; then echo "installing $(INSTALL_FROM) with uv ($$uv)"; \
	  UV_LINK_MODE=copy $$uv pip install -q --compile-bytecode --python $(PY) $(HASHES) -r $(INSTALL_FROM); \
	else echo "uv is not available: installing $(INSTALL_FROM) with pip (slower)"; \
	  $(PY) -m pip install -q --upgrade pip && $(PY) -m pip install -q $(HASHES) -r $(INSTALL_FROM); fi
	$(POST_INSTALL)
	$(PY) -m pip install -q $(HELPERS_INSTALL)
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "$(KERNEL_DISPLAY_NAME)" >/dev/null
	mkdir -p $(VENV)/share/jupyter/lab/settings && cp lab-overrides.json $(VENV)/share/jupyter/lab/settings/overrides.json
	@touch $@

install: $(STAMP)

# PyTorch, for lesson 12 only: `make lab`/`make install` leave it out (a learner who never opens lesson 12 does not
# download it); `make test`, `make notebooks` and `make install-torch` add it. With pip, not uv: pip reads the
# machine's pip configuration (a find-links folder or an index holding a CPU-only build, a few hundred MB), uv does
# not; elsewhere both take the registry's default build. Until the stack's requirements file exists, nothing to do.
$(TORCH_STAMP): $(STAMP) $(wildcard $(TORCH_REQUIREMENTS))
	@if [ -f $(TORCH_REQUIREMENTS) ]; then echo "installing $(TORCH_REQUIREMENTS) with pip (PyTorch, lesson 12)"; \
	  $(PY) -m pip install -q -r $(TORCH_REQUIREMENTS); \
	else echo "no $(TORCH_REQUIREMENTS): PyTorch is not installed (only lesson 12 needs it)"; fi
	@touch $@

install-torch: $(TORCH_STAMP)

# The hashed locks of the pinned, hosted and kaggle stacks, from their requirements files (uv: on PATH, in .venv, or
# put into a small venv of its own). --universal: one lock for Linux, macOS and Windows; Kaggle's is one platform
# (Linux x86_64, Python 3.12: its numpy 2.0.2 has no wheels for 3.13). PyTorch (lesson 12's extra) stays outside:
# its CPU build comes from PyTorch's index or a machine's own disk, whose files are not PyPI's. The old lock is uv's
# starting point: a package keeps its locked version unless the requirements file asks for another.
LOCK_VENV ?= _build/lock-venv
lock:
	@uv=$$(command -v uv || { [ -x .venv/bin/uv ] && echo .venv/bin/uv; } || true); \
	if [ -z "$$uv" ]; then [ -x $(LOCK_VENV)/bin/uv ] || { python3 -m venv --clear $(LOCK_VENV) && \
	  $(LOCK_VENV)/bin/python -m pip install -q uv; }; uv=$(LOCK_VENV)/bin/uv; fi; \
	for pair in requirements.txt:requirements.lock:3.11:--universal requirements-hosted.txt:requirements-hosted.lock:3.13:--universal \
	  requirements-kaggle.txt:requirements-kaggle.lock:3.12:--python-platform=x86_64-unknown-linux-gnu; do \
	  IFS=: read -r req lock py where <<< "$$pair"; echo "$$req -> $$lock (Python $$py, $$where)"; \
	  { [ ! -f $$lock ] || cp $$lock $$lock.tmp; } && \
	  $$uv pip compile -q --generate-hashes $$where --python-version $$py --no-header $$req -o $$lock.tmp && \
	  { echo "# Generated by \`make lock\` from $$req: every package with its hashes; make install uses --require-hashes."; \
	    cat $$lock.tmp; } > $$lock && rm $$lock.tmp || exit 1; done

pin-helpers:
	python3 tools/links.py pin
	python3 tools/generate.py
	python3 tools/nbtemplate.py check

# ruff's rules live in pyproject.toml ([tool.ruff]); ruff itself is pinned in requirements.txt, and lint installs
# only that pin, into a small venv of its own: no TensorFlow. The notebook rules (template, one format, registry,
# taught calls, copy boxes, scripts, the collective policy, budgets) are tools/nblint.py's, standard library only.
LINT_VENV ?= _build/lint-venv
LINT_PYTHON ?= python3
RUFF_PIN := ruff==$(shell sed -n 's/^ruff==//p' requirements.txt)

$(LINT_VENV)/.installed: requirements.txt
	@$(LINT_VENV)/bin/python -m pip --version >/dev/null 2>&1 || $(LINT_PYTHON) -m venv --clear $(LINT_VENV)
	$(LINT_VENV)/bin/python -m pip install -q --disable-pip-version-check $(RUFF_PIN)
	@touch $@

lint: $(LINT_VENV)/.installed
	$(LINT_VENV)/bin/ruff check .
	$(LINT_PYTHON) tools/nblint.py

lab: $(STAMP)
	$(VENV)/bin/jupyter lab --ServerApp.root_dir="$(CURDIR)" \
	  --ServerApp.default_url=/lab/tree/notebooks/00_start_here.ipynb $(LAB_ROOT) $(LAB_ARGS)

# The time capsule: the original 2017 stack, built once and cached in .capsule/ (see helpers/capsule.py).
CAPSULE := .capsule
PY36 := $(call find_python,3.6)
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

# Python 3.6 for the capsule where there is none but conda is (GitHub's runners: $CONDA; setup-python no longer
# offers 3.6 there): conda-forge's build, put where `make capsule` looks for it (pyenv's versions folder).
capsule-python:
	@if [ -n "$(PY36)" ]; then echo "capsule-python: Python 3.6 is here ($(PY36))"; else \
	  conda=$${CONDA:+$$CONDA/bin/}conda; command -v $$conda >/dev/null \
	    || { echo "capsule-python: no Python 3.6 and no conda to get one (pyenv install 3.6 works too)"; exit 1; }; \
	  $$conda create --yes --quiet --prefix "$(PYENV_VERSIONS)/3.6-conda" --channel conda-forge --override-channels \
	    python=3.6 && echo "capsule-python: conda-forge's Python 3.6 in $(PYENV_VERSIONS)/3.6-conda"; fi

# Maintainers: re-record helpers/transcripts/ from live runs of the 2017 scripts.
capsule-record: $(STAMP) capsule
	$(TEST_ENV) $(PY) tools/capsule_record.py

# Every test and every notebook, once, in one session (the error index needs both). Lessons 04/05 use the time
# capsule where `make capsule` built it, else its recorded transcript; `make test` does not build it unasked.
# On the pinned stack each lesson that passes leaves its executed copy for the website ($(BOOK_DIR)/executed).
# TEST_PATHS=tests, then TEST_PATHS=notebooks, splits it in sessions (CI: both stacks' tests at once, each stack's
# lessons after its tests), each with PYTEST_ARGS=--outputs-file=PATH, then
# `python3 tools/error_index.py check PATH...` for the error index over them all.
# Other paths run some (the scheduled nightly run: lesson 12 and its tests).
TEST_PATHS ?= tests notebooks
test: $(TORCH_STAMP)
	$(REFRESH_HELPERS)
	@echo "stack: $(STACK) ($(VENV), $$($(PY) -c 'import platform; print("Python", platform.python_version())'))"
	$(NB_RUN_ENV) $(call nb_rerun,$(TEST_RERUN)) $(TEST_ENV) $(PY) -m pytest $(TEST_PATHS) $(NBVAL) $(PYTEST_ARGS)

# The unit tests without the end-to-end ones (marked slow: an environment built, a server or kernel started, a
# lesson's script run); `make test` runs them all.
unit: $(TORCH_STAMP)
	$(REFRESH_HELPERS)
	$(TEST_ENV) $(PY) -m pytest tests -m "not slow" -p no:cacheprovider $(PYTEST_ARGS)

# Every lesson top to bottom, each in a fresh kernel, with the time table: the check a learner or an instructor runs.
notebooks: $(TORCH_STAMP)
	$(REFRESH_HELPERS)
	$(NB_RUN_ENV) $(call nb_rerun,) $(TEST_ENV) $(PY) -m pytest notebooks $(NBVAL) $(PYTEST_ARGS)

# On a GPU machine, in the shapes learners have: one GPU split into 2 logical GPUs (Colab) and, with 2+ GPUs, two
# real GPUs (Kaggle's T4 x2); GPU_CHECK_SHAPES=split|two picks one. The probe reads nvidia-smi before anything is
# installed: on a GPU-less machine it stops with a message and touches nothing. Reports: $(GPU_CHECK_OUT)/.
GPU_CHECK_OUT ?= _output/gpu-check
gpu-check:
	@python3 tools/gpu_check.py probe
	$(MAKE) --no-print-directory install-torch
	$(REFRESH_HELPERS)
	$(PY) -m pip install -q "tensorflow[and-cuda]==$$(sed -n 's/^tensorflow==//p' $(REQUIREMENTS))"
	@rc=0; for s in $$(python3 tools/gpu_check.py probe); do \
	  $(TEST_ENV) $(PY) tools/gpu_check.py run $$s --out $(GPU_CHECK_OUT) || rc=1; done; exit $$rc

# Everything generated from the lessons' registry (each notebook's metadata.course), in one command, standard
# library only: README's lesson table and badges, helpers/course_map.json, the workshop guide's tables, each
# notebook's badges, Kaggle line and Setup 1/2, and the one notebook format. A test fails when one is stale.
sync-notebooks:
	python3 tools/generate.py
	python3 tools/nbtemplate.py check

clean:
	rm -rf .venv .venv-hosted .venv-kaggle .venv-latest .venv-nightly .venv-book $(CAPSULE) _build _output

# Scaling benchmark for instructors / GPU machines: writes a CSV and a PNG under _output/bench/.
bench: $(STAMP)
	$(REFRESH_HELPERS)
	$(TEST_ENV) $(PY) tools/benchmark.py --out _output/bench

# The notebooks with every code cell executed twice in a row, then on to the next (a learner's Shift+Enter twice),
# each in a fresh kernel from a temporary folder (tools/pytest_course.py's NB_RERUN). RERUN=all: "Run All" twice in
# one kernel instead. NOTEBOOKS=... picks some.
rerun-each: $(TORCH_STAMP)
	$(REFRESH_HELPERS)
	$(NB_RUN_ENV) $(call nb_rerun,each) $(TEST_ENV) $(PY) -m pytest $(or $(NOTEBOOKS),notebooks) $(NBVAL) $(PYTEST_ARGS)

# Peak memory of each notebook run as a learner runs it (fresh kernel, temporary folder): PSS of the kernel and
# all its child processes, sampled every 0.2 s. NOTEBOOKS=... to choose; MEMCHECK_ARGS=--one-core imitates
# Binder (1 CPU); fails if a notebook fails or peaks over 2 GiB (MEMCHECK_ARGS="--limit-mib N --json PATH").
MEMCHECK_ARGS ?=
memcheck: $(TORCH_STAMP)
	$(REFRESH_HELPERS)
	$(TEST_ENV) $(PY) tools/memcheck.py $(MEMCHECK_ARGS) $(NOTEBOOKS)

# The workshop timing table (docs/workshop.md) from measured data (docs/timings.json): every notebook through
# nbval on this machine, then tools/memcheck.py --one-core; records both and re-renders the table. Run it on a
# quiet 2-core machine from a fresh clone, then commit docs/timings.json and docs/workshop.md.
# LESSON=NN measures that lesson alone and adds it to the recorded runs (a new lesson; the same stack only).
TIMINGS_DIR ?= _output/timings
TIMINGS_MACHINE ?=
LESSON ?=
TIMINGS_NOTEBOOKS := $(if $(LESSON),$(wildcard notebooks/$(LESSON)_*.ipynb),notebooks)
timings: $(TORCH_STAMP) capsule
	@test -n "$(TIMINGS_NOTEBOOKS)" || { echo "timings: no notebook notebooks/$(LESSON)_*.ipynb"; exit 1; }
	$(REFRESH_HELPERS)
	rm -rf $(TIMINGS_DIR) && mkdir -p $(TIMINGS_DIR)
	NB_TIMES_JSON=$(TIMINGS_DIR)/nb_times.json NB_RERUN= $(TEST_ENV) $(PY) -m pytest $(TIMINGS_NOTEBOOKS) $(NBVAL)
	$(TEST_ENV) $(PY) tools/memcheck.py --one-core --json $(TIMINGS_DIR)/memcheck.json $(if $(LESSON),$(TIMINGS_NOTEBOOKS))
	$(PY) tools/timings.py record --tests $(TIMINGS_DIR)/nb_times.json --memcheck $(TIMINGS_DIR)/memcheck.json \
	  $(if $(TIMINGS_MACHINE),--machine "$(TIMINGS_MACHINE)") $(if $(LESSON),--merge)
	python3 tools/generate.py

# The course website (tools/book.py says how): the executed copies the pinned stack's nbval run left (`make test`,
# `make notebooks`), rendered by Sphinx + myst-nb + sphinx-book-theme with execution off, from their own
# environment ($(BOOK_VENV), requirements-book.txt; never in .venv). A lesson whose copy is missing, or older than
# the notebook or the helpers, is run first, through the same nbval run (one lesson per job: `make -j2 book`).
# BOOK_NOTEBOOKS=... builds a subset.
BOOK_VENV ?= .venv-book
BOOK_PY := $(BOOK_VENV)/bin/python
BOOK_STAMP := $(BOOK_VENV)/.installed
BOOK_PYTHON ?= $(or $(call find_python,3.11),$(call find_python,3.13),python3)
BOOK_NOTEBOOKS ?= $(sort $(wildcard notebooks/[0-9][0-9]_*.ipynb))
BOOK_EXECUTED := $(patsubst notebooks/%,$(BOOK_DIR)/executed/%,$(BOOK_NOTEBOOKS))
BOOK_TEST_OUT ?= _output/book-test

$(BOOK_STAMP): requirements-book.txt
	@$(BOOK_PY) -m pip --version >/dev/null 2>&1 || $(BOOK_PYTHON) -m venv --clear $(BOOK_VENV)
	@# uv when there is one (on PATH, or the one `make install` put into $(VENV)); pip otherwise, as for $(VENV).
	@uv=$$(command -v uv || { [ -x $(VENV)/bin/uv ] && echo $(VENV)/bin/uv; } || true); [ "$(INSTALLER)" = pip ] && uv=; \
	if [ -n "$$uv" ]; then echo "installing requirements-book.txt with uv ($$uv)"; \
	  UV_LINK_MODE=copy $$uv pip install -q --python $(BOOK_PY) -r requirements-book.txt; \
	else $(BOOK_PY) -m pip install -q --disable-pip-version-check -r requirements-book.txt; fi
	@touch $@

$(BOOK_DIR)/executed/%.ipynb: notebooks/%.ipynb $(STAMP) $(wildcard helpers/*.py helpers/*/*.py)
	@$(MAKE) --no-print-directory $(TORCH_STAMP)
	$(REFRESH_HELPERS)
	NB_EXECUTED_DIR=$(@D) NB_RERUN= $(TEST_ENV) $(PY) -m pytest $< $(NBVAL) -q
	@test -f $@ || { echo "$<: no executed copy was written (a cell failed)"; exit 1; }

install-book: $(BOOK_STAMP)

book: $(STAMP) $(BOOK_STAMP) $(BOOK_EXECUTED)
	$(BOOK_PY) tools/book.py prepare --executed $(BOOK_DIR)/executed --out $(BOOK_DIR)/src $(BOOK_NOTEBOOKS)
	rm -rf $(BOOK_DIR)/html $(BOOK_DIR)/doctrees
	$(BOOK_PY) -m sphinx -b html -q -W --keep-going -c book -d $(BOOK_DIR)/doctrees $(BOOK_DIR)/src $(BOOK_DIR)/html
	@echo "site written to $(BOOK_DIR)/html/ (open $(BOOK_DIR)/html/index.html; $$(du -sh $(BOOK_DIR)/html | cut -f1))"

book-test: book
	$(BOOK_PY) tools/book_check.py --site $(BOOK_DIR)/html --executed $(BOOK_DIR)/executed --out $(BOOK_TEST_OUT) \
	  $(BOOK_NOTEBOOKS)

# A real one-node Slurm on this machine (root; Debian's slurm-wlm and munge, installed where missing) and the
# course's TensorFlow, JAX and PyTorch jobs under it: tools/slurm/check.sh, with this stack's Python.
SLURM_CHECK := tools/slurm/check.sh
slurm-check: $(TORCH_STAMP)
	@test -f $(SLURM_CHECK) || { echo "slurm-check: $(SLURM_CHECK) does not exist yet: no Slurm check ran"; exit 1; }
	PYTHON="$(CURDIR)/$(PY)" $(TEST_ENV) bash $(SLURM_CHECK)

# Fault injection (tools/chaos.py): the jobs the lessons teach to resume (the quick start, lesson 05's train.py, lesson
# 07's two workers, lesson 12's DDP job), each killed KILLS times at random moments, half of them mid-write, and rerun
# until it ends; a table of six figures per job; fails unless every figure is perfect. CI runs KILLS=2.
KILLS ?= 20
CHAOS_ARGS ?=
.PHONY: chaos
chaos: $(TORCH_STAMP)
	$(REFRESH_HELPERS)
	$(TEST_ENV) $(PY) tools/chaos.py --kills $(KILLS) --parallel 2 $(CHAOS_ARGS)
