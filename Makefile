# m3agent developer entry points. `make demo` and `make test` set up .venv on first use.
VENV := .venv
BIN := $(VENV)/bin
SHARED ?= ../shared
DEMO_DB ?= out/demo.db

.PHONY: setup demo test lint typecheck unit lock typecheck-only unit-only

setup:
	@bash scripts/setup.sh

# Record the versions installed in .venv as constraints.txt (what setup installs next time).
lock:
	@bash scripts/lock.sh $(VENV)

demo: setup
	@bash scripts/demo.sh "$(SHARED)" "$(DEMO_DB)"

lint: setup
	$(BIN)/ruff check src tests bench

typecheck: setup typecheck-only

# Two workers, each test file on one (its module fixtures, e.g. an ingested episode, are built once):
# 19.6 min against 32.5 serially on the 2-core machine, most tests being model processes and subprocess ingests.
unit: setup unit-only

typecheck-only:
	$(BIN)/mypy

unit-only:
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

# The type check (a minute of one core) runs beside the tests, whose model processes and subprocesses leave
# cores idle at times; either failing fails the target.
test: setup lint
	@$(MAKE) --no-print-directory -j2 typecheck-only unit-only
