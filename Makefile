# `make test` and `make demo` work on a fresh machine with Python 3.11, git and make.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The real agent CLIs the end-to-end adapter tests run (pinned in tests/agents/package.json).
AGENT_CLIS := tests/agents/node_modules/.installed

.PHONY: test demo lint typecheck unit bench clean

$(BIN)/python:
	@test -n "$(PYTHON)" || { echo "error: python3.11 not found (Ralph needs Python 3.11+)" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "error: $(PYTHON) is older than 3.11" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

$(AGENT_CLIS): tests/agents/package.json tests/agents/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "error: npm not found: the agent end-to-end tests need Node.js 20+ and npm to install the pinned agent CLIs (tests/agents/package.json)" >&2; exit 1; }
	cd tests/agents && npm install --no-audit --no-fund --loglevel=error
	@touch $(AGENT_CLIS)

test: $(STAMP) $(AGENT_CLIS) lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP) $(AGENT_CLIS)
	$(BIN)/pytest -q

demo: $(STAMP)
	$(BIN)/ralph demo

bench: $(STAMP)
	$(BIN)/python benchmarks/store_bench.py
	$(BIN)/python benchmarks/loop_bench.py
	$(BIN)/python benchmarks/adapter_bench.py
	$(BIN)/python benchmarks/rpc_bench.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache tests/agents/node_modules
