# m3agent developer entry points. `make demo` and `make test` set up .venv on first use.
VENV := .venv
BIN := $(VENV)/bin
SHARED ?= ../shared
DEMO_DB ?= out/demo.db

.PHONY: setup demo test lint typecheck unit lock

setup:
	@bash scripts/setup.sh

# Record the versions installed in .venv as constraints.txt (what setup installs next time).
lock:
	@bash scripts/lock.sh $(VENV)

demo: setup
	@bash scripts/demo.sh "$(SHARED)" "$(DEMO_DB)"

lint: setup
	$(BIN)/ruff check src tests bench

typecheck: setup
	$(BIN)/mypy

# Two workers, each test file on one (its module fixtures, e.g. an ingested episode, are built once):
# 19.6 min against 32.5 serially on the 2-core machine, most tests being model processes and subprocess ingests.
unit: setup
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

test: setup lint typecheck unit
