# hailq: `make demo` and `make test` do all set-up on a fresh machine.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# The suite waits on worker processes, leases and timers far more than it computes:
# twice as many pytest workers as cores finish it in about half the time of one per core.
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))

.PHONY: install demo test test-faults lint typecheck bench docs clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/hailq demo

test: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/mypy
	$(BIN)/pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist loadfile --durations=15 -m "not slow" tests

# Everything in the fault suite, the long scenarios (marked slow) included.
test-faults: $(STAMP)
	$(BIN)/pytest -q -p no:cacheprovider tests/faults

docs: $(STAMP)
	$(BIN)/mkdocs build --strict

lint: $(STAMP)
	$(BIN)/ruff check src tests

typecheck: $(STAMP)
	$(BIN)/mypy

bench: $(STAMP)
	$(BIN)/hailq bench

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
