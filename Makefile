# `make test` and `make demo` work on a fresh machine with Python 3.11, git and make.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
# Ralph alone (what `make demo` needs), and Ralph with its dev tools (tests, linters): the dev
# install marks the runtime one done too, so `make demo` after `make test` installs nothing.
RUNTIME_STAMP := $(VENV)/.installed-runtime
DEV_STAMP := $(VENV)/.installed-dev
# The real agent CLIs the end-to-end adapter tests run (pinned in tests/agents/package.json).
AGENT_CLIS := tests/agents/node_modules/.installed

# The web monitor's tests drive a real headless Chromium: Debian's `chromium` package
# (RALPH_CHROMIUM may name another Chromium or Chrome binary).
CHROMIUM_MISSING := command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || test -n "$$RALPH_CHROMIUM"

.PHONY: test demo lint typecheck unit bench clean browser

$(BIN)/python:
	@test -n "$(PYTHON)" || { echo "error: python3.11 not found (Ralph needs Python 3.11+)" >&2; exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { echo "error: $(PYTHON) is older than 3.11" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)

$(RUNTIME_STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e .
	@touch $(RUNTIME_STAMP)

$(DEV_STAMP): $(BIN)/python pyproject.toml
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -e '.[dev]'
	@touch $(DEV_STAMP) $(RUNTIME_STAMP)

$(AGENT_CLIS): tests/agents/package.json tests/agents/package-lock.json
	@command -v npm >/dev/null 2>&1 || { echo "error: npm not found: the agent end-to-end tests need Node.js 20+ and npm to install the pinned agent CLIs (tests/agents/package.json)" >&2; exit 1; }
	cd tests/agents && npm install --no-audit --no-fund --loglevel=error
	@touch $(AGENT_CLIS)

browser:
	@$(CHROMIUM_MISSING) || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    echo "installing Debian's chromium for the web monitor's tests (apt-get)"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null \
	    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; } \
	    || { echo "error: apt-get could not install chromium (the web monitor's tests need it)" >&2; exit 1; }; \
	  else \
	    echo "error: the web monitor's tests need Chromium: run 'sudo apt-get install -y chromium' (Debian, Ubuntu), or set RALPH_CHROMIUM to a Chromium or Chrome binary" >&2; exit 1; \
	  fi; }

test: $(DEV_STAMP) $(AGENT_CLIS) browser lint typecheck unit

lint: $(DEV_STAMP)
	$(BIN)/ruff check src tests benchmarks examples

typecheck: $(DEV_STAMP)
	$(BIN)/mypy

# The report is written only when pytest gets to its end: a test that ends the pytest process
# itself (an os._exit in code under test) must fail the run, not pass it half-done.
# Two worker processes, each taking whole test files (most of the suite waits on child
# processes: two at once halve its time on a two-core machine). PYTEST_WORKERS=0 runs it in
# one process.
PYTEST_WORKERS ?= 2
unit: $(DEV_STAMP) $(AGENT_CLIS) browser
	@rm -f $(VENV)/pytest-report.xml
	$(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadfile --junitxml=$(VENV)/pytest-report.xml
	@test -s $(VENV)/pytest-report.xml || { echo "error: pytest ended before its end (no report): a test ended the test process" >&2; exit 1; }

demo: $(RUNTIME_STAMP)
	$(BIN)/ralph demo

bench: $(DEV_STAMP)
	$(BIN)/python benchmarks/store_bench.py
	$(BIN)/python benchmarks/loop_bench.py
	$(BIN)/python benchmarks/adapter_bench.py
	$(BIN)/python benchmarks/rpc_bench.py
	$(BIN)/python benchmarks/web_bench.py

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache tests/agents/node_modules
