# The two commands a newcomer needs: `make demo` and `make test`. Both set up everything
# themselves: a venv with zkcdc and its tools, Kafka's and Spark's jars (fetched once with mvn
# into ~/.cache/zkcdc), and a real local ZooKeeper + Kafka cluster.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cksum pyproject.toml | cut -d' ' -f1)

.PHONY: setup demo test lint up status down bench clean

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --editable '.[dev]'
	@rm -f $(VENV)/.installed-* && touch $@

setup: $(STAMP)

## The product on the local default stack: the capture daemon and the alert job (Spark) through
## a staged incident (a follower broker stopped and started), the alerts it causes and the live
## state, then a clean stop.
demo: setup
	$(BIN)/zkcdc stack up
	@$(BIN)/python -m zkcdc.demo; rc=$$?; $(BIN)/zkcdc stack down; exit $$rc

## Lint, types, and every test (unit and integration against the real stack).
test: setup lint
	$(BIN)/pytest

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

up: setup
	$(BIN)/zkcdc stack up
status: setup
	$(BIN)/zkcdc stack status
down: setup
	$(BIN)/zkcdc stack down

bench: setup
	$(BIN)/python bench/stack_startup.py
	$(BIN)/python bench/capture.py
	$(BIN)/python bench/simulate_build.py
	$(BIN)/python bench/alert_job.py
	$(BIN)/python bench/replay.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
