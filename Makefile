# Developer tasks. `make check` is what a change must pass.
PYTHON ?= python3
BUILD := build/native

.PHONY: help build install lint test quick docs check bench clean wheels

help:  ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-8s %s\n", $$1, $$2}'

build:  ## compile the native core alone, warnings as errors (build/native/quietcore-probe)
	cmake -S . -B $(BUILD) -G Ninja -DQC_WERROR=ON >/dev/null
	cmake --build $(BUILD)

install:  ## install the package with its test dependencies
	$(PYTHON) -m pip install ".[test,mpi]"

lint: build  ## ruff, ruff format, mypy --strict, the layer contracts, and the C build with -Werror
	$(PYTHON) -m ruff check src tests
	$(PYTHON) -m ruff format --check src tests
	$(PYTHON) -m mypy
	PYTHONPATH=src lint-imports  # the layers (pyproject.toml [tool.importlinter]): no import up a layer, no circle

test:  ## the whole test suite against the installed package
	$(PYTHON) -m pytest

quick:  ## the quick loop: parsers, statistics, store, knobs, the native units (about 30 s; no root needed)
	$(PYTHON) -m pytest tests/unit tests/native -q

wheels:  ## the portable wheels, x86_64 and aarch64 (manylinux_2_17), into dist/ (docs/install.md)
	tools/wheels.sh dist

docs:  ## build the docs site into site/, every warning an error (a broken link, a page not in the nav)
	$(PYTHON) -m mkdocs build --strict

check: install lint test docs  ## everything CI checks

bench:  ## every performance target with PASS/MISS, and quietcore beside oslat, cyclictest and perf bench
	-$(PYTHON) bench/cli.py
	-$(PYTHON) bench/analysis.py
	-$(PYTHON) bench/stream.py
	-$(PYTHON) bench/survey.py
	-$(PYTHON) bench/simulate.py
	-$(PYTHON) bench/rounds.py
	-$(PYTHON) bench/tracing.py
	-$(PYTHON) bench/reader.py
	-$(PYTHON) bench/memory.py
	-$(PYTHON) bench/check.py
	-$(PYTHON) bench/manycpu.py
	-$(PYTHON) bench/watch.py
	$(PYTHON) bench/compare_peers.py

clean:  ## remove build output
	rm -rf build dist site *.egg-info
