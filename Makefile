# `make demo` and `make test` work on a fresh machine: each builds its own virtualenv.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Nothing outside the checkout: the caches pip, matplotlib, Keras and the rest
# would keep in $HOME go under .cache/ here (tests/test_make.py checks it).
export PIP_CACHE_DIR  := $(CURDIR)/.cache/pip
export XDG_CACHE_HOME := $(CURDIR)/.cache
export MPLCONFIGDIR   := $(CURDIR)/.cache/matplotlib
export KERAS_HOME     := $(CURDIR)/.cache/keras
# TensorFlow enables oneDNN (whose CPU allocator records memory events) only on
# some x86 CPUs; the demo and the tests capture on the CPU, so ask for it.
export TF_ENABLE_ONEDNN_OPTS ?= 1

# The compatibility job: the oldest supported set (TensorFlow 2.16.2 and the
# lowest protobuf, numpy and pandas the project declares), installed beside the
# project in ONE pip install, in a virtualenv of its own inside the checkout.
COMPAT_VENV ?= .venv-compat
COMPAT_BIN  := $(COMPAT_VENV)/bin
COMPAT_SET  := tensorflow-cpu==2.16.2 protobuf==3.20.3 numpy==1.26.0 pandas==2.1.0
# The suite less three files that exercise nothing version-dependent beyond
# what the rest covers, and take a third of its time: the browser check of the
# HTML report, the fuzzing of hostile inputs (hostile_corpus and _limits stay)
# and the batch runs in worker processes (test_batch stays).
COMPAT_TESTS ?= tests --ignore=tests/test_report_browser.py \
	--ignore=tests/test_hostile_fuzz.py --ignore=tests/test_batch_processes.py

# pytest-xdist workers for the suite: one per core; 0 runs it in one process.
PYTEST_JOBS ?= auto
XDIST := -n $(PYTEST_JOBS) --dist loadfile

.PHONY: demo test quick lint typecheck pytest compat protos fixtures bench browser clean

# The C extensions (the decoder's loops, the array pool), declared in setup.py, are built by the
# install: a change to them reinstalls.
NATIVE := setup.py traceparse/decode/_native.c traceparse/core/_pool.c

$(STAMP): pyproject.toml $(NATIVE)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/traceparse demo --output demo-output

test: $(STAMP) browser lint typecheck pytest compat

lint: $(STAMP)
	$(BIN)/ruff check traceparse tests benchmarks fixtures examples
	$(BIN)/ruff format --check traceparse tests benchmarks fixtures examples

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/pytest -q $(XDIST)

# The edit-test loop: the suite less the slow tests (TensorFlow, processes, browser).
quick: $(STAMP)
	$(BIN)/pytest -q -m "not slow" $(XDIST)

$(COMPAT_VENV)/.installed: pyproject.toml Makefile $(NATIVE)
	rm -rf $(COMPAT_VENV)
	$(PYTHON) -m venv $(COMPAT_VENV)
	$(COMPAT_BIN)/python -m pip install -q --no-cache-dir --upgrade pip
	$(COMPAT_BIN)/python -m pip install -q --no-cache-dir $(COMPAT_SET) '.[report,test]'
	touch $@

# The suite runs here on the decoder's numpy path (TRACEPARSE_PURE_PYTHON=1), the
# fallback where the compiled loops were not built; `make pytest` runs it on the
# compiled ones, and tests/test_native.py checks both paths agree in both jobs.
compat: $(COMPAT_VENV)/.installed
	$(COMPAT_BIN)/python -m pip list --format=freeze | grep -iE '^(tensorflow-cpu|keras|protobuf|numpy|pandas)=='
	TRACEPARSE_PURE_PYTHON=1 $(COMPAT_BIN)/python -m pytest -q -p no:cacheprovider $(XDIST) $(COMPAT_TESTS)
	rm -rf $(COMPAT_VENV)/demo
	$(COMPAT_BIN)/traceparse demo --steps 3 --output $(COMPAT_VENV)/demo
	$(COMPAT_BIN)/traceparse summary $(COMPAT_VENV)/demo/logs

# Headless Chromium checks the HTML report. `make test` installs nothing outside
# this checkout: without a Chromium the browser tests skip, and this says how to
# run them (tests/test_make.py checks that the target writes nothing, as nobody).
BROWSER_NAMES := chromium chromium-browser google-chrome chrome
browser:
	@if [ -n "$$TRACEPARSE_CHROMIUM" ] && [ -x "$$TRACEPARSE_CHROMIUM" ]; then :; \
	elif (for b in $(BROWSER_NAMES); do command -v $$b >/dev/null 2>&1 && exit 0; done; exit 1); then :; \
	else echo "browser: no Chromium found, so the HTML report's browser tests will skip;" \
	"to run them install Chromium (e.g. apt-get install chromium) or set" \
	"TRACEPARSE_CHROMIUM=/path/to/chrome, then run make test again."; fi

# Regenerate traceparse/_proto from protos/*.proto with a pinned grpcio-tools.
protos:
	$(PYTHON) protos/generate.py

# Re-capture the fixtures (needs TensorFlow; see fixtures/README.md).
fixtures: $(STAMP)
	$(BIN)/python fixtures/make_fixtures.py

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_decode.py

clean:
	rm -rf $(VENV) $(COMPAT_VENV) .cache .pytest_cache .mypy_cache .ruff_cache demo-output
