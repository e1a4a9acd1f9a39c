# `make demo` and `make test` work on a fresh machine: each builds its own virtualenv.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# TensorFlow enables oneDNN (whose CPU allocator records memory events) only on
# some x86 CPUs; the demo and the tests capture on the CPU, so ask for it.
export TF_ENABLE_ONEDNN_OPTS ?= 1

.PHONY: demo test lint typecheck pytest protos fixtures bench browser clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/traceparse demo --output demo-output

test: $(STAMP) browser lint typecheck pytest

lint: $(STAMP)
	$(BIN)/ruff check traceparse tests benchmarks fixtures examples
	$(BIN)/ruff format --check traceparse tests benchmarks fixtures examples

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest -q

# Headless Chromium checks the HTML report (Debian's package; root on CI).
browser:
	@command -v chromium >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq chromium >/dev/null; }

# Regenerate traceparse/_proto from protos/*.proto with a pinned grpcio-tools.
protos:
	$(PYTHON) protos/generate.py

# Re-capture the fixtures (needs TensorFlow; see fixtures/README.md).
fixtures: $(STAMP)
	$(BIN)/python fixtures/make_fixtures.py

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_decode.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache demo-output
