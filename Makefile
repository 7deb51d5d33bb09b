# The two commands a newcomer needs: `make demo` and `make test`. Both set up everything
# themselves: a venv with zkcdc and its tools, Kafka's and Spark's jars (fetched once with mvn
# into ~/.cache/zkcdc), and a real local ZooKeeper + Kafka cluster.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# Reinstalled when what `pip install` builds changes: the project's metadata and its one C part.
BUILT := pyproject.toml setup.py capture/kraft/_batch_walk.c
STAMP := $(VENV)/.installed-$(shell cat $(BUILT) | cksum | cut -d' ' -f1)

.PHONY: setup demo demo-secure test test-times test-census lint docs fuzz up status down bench bench-quick clean

# The venv is filled by uv (from PyPI, pinned): it links packages from its cache and compiles
# their bytecode on both cores, where pip copied and compiled ~6,000 files on one (a fresh
# clone's install 141 -> ~50 s). pyspark comes from PyPI as a source archive, which uv would
# build again at every install (~30 s): its wheel is built once into zkcdc's cache instead.
UV := uv==0.13.9
WHEELS := $(or $(ZKCDC_CACHE_DIR),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/zkcdc)/wheels
PYSPARK := $(shell grep -o '"pyspark==[^"]*' pyproject.toml | tr -d '"')
ifeq ($(PYSPARK),)
$(error pyproject.toml pins no pyspark (a "pyspark==X.Y.Z" dependency): its wheel is built once from that pin)
endif

$(STAMP): $(BUILT)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet '$(UV)'
	@ls $(WHEELS)/$(subst ==,-,$(PYSPARK))-*.whl >/dev/null 2>&1 || \
	  $(BIN)/pip wheel --quiet --no-deps --wheel-dir $(WHEELS) '$(PYSPARK)'
	$(BIN)/uv pip install --quiet --python $(BIN)/python --find-links $(WHEELS) \
	  --compile-bytecode --editable '.[dev]'
	@rm -f $(VENV)/.installed-* && touch $@

# Each zkcdc process would otherwise compile the modules it imports from source where the
# environment sets PYTHONDONTWRITEBYTECODE (this machine's does): ~0.1 s of every start. Spark's
# Python workers import PySpark from pyspark.zip, which gets its bytecode too (~1 s of CPU less
# per worker start: tools/pyspark_zip_bytecode.py says why that matters).
setup: $(STAMP)
	@$(BIN)/python -m compileall -q -j 0 zkcdc capture streaming
	@$(BIN)/python tools/pyspark_zip_bytecode.py

## The product on the local default stack: the capture daemon and the alert job (Spark) through
## a staged incident (a follower broker stopped and started), the alerts it causes and the live
## state, then a clean stop.
demo: setup
	$(BIN)/zkcdc stack up
	@$(BIN)/python -m zkcdc.demo; rc=$$?; $(BIN)/zkcdc stack down; exit $$rc

## The same demo on the secured stack: SASL_SSL brokers, ZooKeeper on TLS with SASL and ACLs.
demo-secure: setup
	$(BIN)/zkcdc stack up --secure
	@$(BIN)/python -m zkcdc.demo; rc=$$?; $(BIN)/zkcdc stack down; exit $$rc

## Lint, types, the documentation site, and every test (unit and integration against the
## real stack).
test: setup lint docs
	$(BIN)/pytest

## The documentation site into site/ (MkDocs), strictly: a broken link or anchor, or a page
## left out of the navigation, fails it. Its reference pages are generated from the code.
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

## Where the last `make test` spent its time: a per-file table from its JUnit XML, written into
## TESTING.md (tools/test_times.py).
test-times: setup
	$(BIN)/python tools/test_times.py

## `make test` with the CPU of every process it ran counted by role (Kafka, ZooKeeper, Spark's
## JVMs and Python workers, capture...): test-artifacts/census.json (tools/suite_census.py).
test-census: setup
	$(BIN)/python tools/suite_census.py --out test-artifacts/census.json -- $(MAKE) test

## The fuzzing properties (decoders, event-log reader) with 20,000 examples each instead of
## the few hundred `make test` runs.
fuzz: setup
	ZKCDC_TEST_FUZZ=long $(BIN)/pytest -q -k fuzz tests/unit

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/mypy bench
	$(BIN)/mypy tools
	$(BIN)/lint-imports
	$(BIN)/python tools/lint_fixed_waits.py tests
	$(BIN)/python tools/lint_code.py

up: setup
	$(BIN)/zkcdc stack up
status: setup
	$(BIN)/zkcdc stack status
down: setup
	$(BIN)/zkcdc stack down

## Every benchmark on this machine, then their figures into BENCHMARKS.md (bench/report.py).
## `make bench-quick`: the same, small (a smoke run; results under bench/results/quick/).
bench: setup
	$(BIN)/python bench/b0_stack_startup.py $(BENCH_FLAGS)
	$(BIN)/python bench/b1_capture.py $(BENCH_FLAGS)
	$(BIN)/python bench/b1_transactions.py $(BENCH_FLAGS)
	$(BIN)/python bench/b2_scale.py $(BENCH_FLAGS)
	$(BIN)/python bench/b3_alert_job.py $(BENCH_FLAGS)
	$(BIN)/python bench/b4_replay.py $(BENCH_FLAGS)
	$(BIN)/python bench/b5_txnlog.py $(BENCH_FLAGS)
	$(BIN)/python bench/b6_soak.py $(BENCH_FLAGS)
	$(BIN)/python bench/b6_fault_schedule.py --runs 3 $(BENCH_FLAGS)
	$(BIN)/python bench/b7_kraft.py $(BENCH_FLAGS)
	$(BIN)/python bench/b8_ui.py $(BENCH_FLAGS)
	$(BIN)/python bench/b9_cluster_size.py $(BENCH_FLAGS)
	$(BIN)/python bench/b9_broker_failure.py $(BENCH_FLAGS)
	$(BIN)/python bench/b9_realtime_mode.py $(BENCH_FLAGS)
	$(BIN)/python bench/b9_catch_up_python.py $(BENCH_FLAGS)
	$(BIN)/python bench/b10_lake.py $(BENCH_FLAGS)
	$(BIN)/python bench/report.py $(BENCH_FLAGS)

bench-quick:
	$(MAKE) bench BENCH_FLAGS=--quick

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
