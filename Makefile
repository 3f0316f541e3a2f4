# Cortex — the two commands: `make run` and `make test`. Only Python >= 3.11 and make are needed.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run dev test test-fast lint fmt bench reliability browser clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip setuptools  # the venv's own setuptools has a known advisory (docs/reliability.md)

# Reinstall when pyproject.toml changes.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

## make run — the app on http://127.0.0.1:8000 with embedded PostgreSQL + Redis, worker and beat;
## production-safe (DEBUG off, real error pages, static files collected, secret under CORTEX_HOME).
run: $(STAMP)
	$(BIN)/python -m cortex_site.runner run

## make dev — the same with DEBUG on and the web server reloading when code or templates change.
dev: $(STAMP)
	$(BIN)/python -m cortex_site.runner dev

## make test — lint first (a lint or import-contract violation fails it), then the whole suite
## (browser tests included) on throwaway embedded services.
test: $(STAMP) browser lint
	$(BIN)/python -m cortex_site.runner test

## make test-fast — everything except the slow browser / end-to-end tests.
test-fast: $(STAMP)
	$(BIN)/python -m cortex_site.runner test -m "not slow"

## make bench — recall latency, HNSW agreement and ingest throughput (docs/benchmarks.md); starts and
## stops its own embedded services under $CORTEX_BENCH_HOME (default /tmp/cortex-bench). BENCH_ARGS="--sizes 10000" for a quick run.
bench: $(STAMP)
	$(BIN)/python bench/recall.py $(BENCH_ARGS)

## make reliability — the long hardening runs (leak suite, API contract, bad input, load, faults, backup and
## restore, mutation testing, dependency audit); each step writes its section of docs/reliability.md.
## RELIABILITY=r40_load.py runs one step.
RELIABILITY ?= r[0-9][0-9]_*.py
reliability: $(STAMP)
	@set -e; for step in bench/reliability/$(RELIABILITY); do echo "== $$step"; $(BIN)/python $$step; done

## Debian's chromium for the browser tests (never a downloaded browser build).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the browser tests"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

# Settings need service URLs to import; lint never connects to them.
LINT_ENV := DATABASE_URL=postgresql://lint@/lint REDIS_URL=redis://127.0.0.1:1/0 CORTEX_TESTING=1 SECRET_KEY=lint

## make lint — ruff (rules and formatting), mypy, and the import contract ([tool.importlinter] in pyproject.toml).
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(LINT_ENV) $(BIN)/mypy .
	$(LINT_ENV) $(BIN)/lint-imports --no-cache

fmt: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) .cortex .pytest_cache .mypy_cache .ruff_cache
