# Two entry points (see README): `make dashboard` and `make test`. Both create .venv on first use.
# `make docs` builds the docs site strictly into site/.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8501
# Installs skip compiling every module of every package (--no-compile: a minute of torch and transformers on 2 cores);
# a module is compiled once, when first imported. So make's commands may write bytecode, whatever the environment says:
# a process that may not compiles again on every start, and the suite starts hundreds.
unexport PYTHONDONTWRITEBYTECODE
PIP := $(PY) -m pip install --quiet --no-compile
# pytest-xdist workers of `make test`, a test file's tests in one (0: one process, no workers)
TEST_WORKERS ?= 2
# a test file's tests in one worker, the files handed out longest first (tests/durations.json)
XDIST = -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

.PHONY: dashboard test test-suite test-durations test-fast docs system-deps benchmarks screenshots clean

$(VENV)/.runtime: requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) -r requirements.txt
	touch $@

$(VENV)/.docs: $(VENV)/.runtime requirements-docs.txt
	$(PIP) -r requirements-docs.txt
	touch $@

$(VENV)/.dev: $(VENV)/.docs requirements-dev.txt  # the tests build the docs site too
	$(PIP) -r requirements-dev.txt
	touch $@

dashboard: $(VENV)/.runtime  ## install and start the dashboard on the bundled checkpoints in models/
	$(PY) -m streamlit run app.py --server.port $(PORT)

docs: $(VENV)/.docs  ## build the docs site (MkDocs Material, strict: broken links fail) into site/
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

system-deps:  ## Debian packages for the browser test and the data tests (chromium, dataset-fashion-mnist)
	bash scripts/install-system-deps.sh

test:  ## install everything and run the whole test suite (its 30 slowest tests, then both durations, last)
	@start=$$(date +%s); status=0; $(MAKE) --no-print-directory test-suite || status=$$?; \
	echo "make test: $$(( $$(date +%s) - start )) s (installs included)"; exit $$status

test-suite: $(VENV)/.dev system-deps  ## what `make test` times: the installs, then the whole suite (its duration last)
	@start=$$(date +%s); status=0; $(PY) -m pytest $(XDIST) --durations=30 || status=$$?; \
	echo "pytest: $$(( $$(date +%s) - start )) s"; exit $$status

test-durations: $(VENV)/.dev system-deps  ## the whole suite, writing its seconds per test file to tests/durations.json (the order make test hands files out in)
	$(PY) -m pytest $(XDIST) --store-durations

test-fast: $(VENV)/.dev  ## unit tests only (no browser, no real datasets, no install, no tutorial run)
	$(PY) -m pytest -m "not e2e and not data and not install and not slow"

benchmarks: $(VENV)/.runtime  ## speed benchmarks on the bundled models (prints ratios measured in one run)
	$(PY) benchmarks/head_overhead.py
	$(PY) benchmarks/interpretability_speed.py
	$(PY) benchmarks/inspect_speed.py
	$(PY) benchmarks/page_costs.py --rounds 40 --out docs/speed/page_costs.json
	$(PY) benchmarks/unit_profile_speed.py --out docs/speed
	$(PY) benchmarks/network_lens_speed.py --out docs/speed
	$(PY) benchmarks/bootstrap_overhead.py
	$(PY) benchmarks/early_exit.py
	$(PY) benchmarks/load_test.py --out docs/speed/load_test.json

screenshots: $(VENV)/.dev  ## README screenshots of every dashboard page, from the real app; the bundled network's own
	$(PY) scripts/screenshots.py --models models --out docs/screenshots
	$(PY) scripts/screenshots.py --models models --out docs/screenshots --model cifar10-resnet18-half/own --prefix own- --pages inspect depth

clean:
	rm -rf $(VENV) test-artifacts .pytest_cache site
