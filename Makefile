# `make test` and `make demo` work on a fresh machine with Python 3.11, git and make.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: test demo lint typecheck unit bench clean

$(BIN)/python:
	@test -n "$(PYTHON)" || { echo "error: python3.11 not found (Ralph needs Python 3.11+)" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "error: $(PYTHON) is older than 3.11" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(STAMP)

test: $(STAMP) lint typecheck unit

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -q

demo: $(STAMP)
	$(BIN)/ralph demo

bench: $(STAMP)
	$(BIN)/python benchmarks/store_bench.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache
