# proofgate — developer entry points. `make test` and `make demo` work on a fresh
# Debian 12 machine (as root: they install and start what they need) and on a laptop
# that already has Docker.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
BIN ?= $(VENV)/bin
LOCK := requirements/dev.lock
STAMP := $(VENV)/.proofgate-installed
CLEANROOM_IMAGE := proofgate/cleanroom:latest
PYTEST_ARGS ?=
PYTEST_DURATIONS ?= 20

.PHONY: help dev docker registry image lint lint-workflows reformat test pytest demo sbom assets \
	package clean

help:
	@echo "make dev        virtualenv in $(VENV) from $(LOCK) (hash-checked) + editable install"
	@echo "make lint       ruff check, ruff format --check, mypy --strict gate/ (+ workflows)"
	@echo "make reformat   ruff format + ruff check --fix"
	@echo "make test       dev + Docker + clean-room image + lint + pytest"
	@echo "make demo       dev + Docker + clean-room image + proofgate demo"
	@echo "make sbom       CycloneDX SBOM into sbom/"
	@echo "make assets     regenerate tests/assets (then: git diff --exit-code)"
	@echo "make package    wheel into dist/"

# --- environment -------------------------------------------------------------------

dev: $(STAMP)

$(STAMP): $(LOCK) pyproject.toml scripts/bootstrap-venv
	PYTHON=$(PYTHON) scripts/bootstrap-venv $(VENV) $(LOCK)
	@touch $@

docker:
	@scripts/ensure-docker

# the registry program the Action's image-pull test serves on loopback (installs if missing)
registry:
	@scripts/ensure-registry

# Builds only when the content key (script + package list) changes; otherwise quiet.
image: docker
	@scripts/build-cleanroom-image >/dev/null

# --- quality -----------------------------------------------------------------------

lint: dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy gate
	@if [ -x scripts/lint-workflows ]; then $(MAKE) --no-print-directory lint-workflows; fi

lint-workflows: dev
	PATH="$(abspath $(BIN)):$$PATH" scripts/lint-workflows

reformat: dev
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# pytest exits 5 when it collected nothing: a run that tests nothing must not pass.
# --durations: the slowest tests are named in every run's output (CI included).
pytest: dev
	@rc=0; $(BIN)/python -m pytest --durations=$(PYTEST_DURATIONS) $(PYTEST_ARGS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "make: pytest collected no tests; failing" >&2; exit 1; fi; \
	exit $$rc

test: dev docker registry image lint
	@$(MAKE) --no-print-directory pytest

# --- products ----------------------------------------------------------------------

demo: dev docker image
	$(BIN)/proofgate demo

sbom: dev
	PATH="$(abspath $(BIN)):$$PATH" scripts/make-sbom

assets: dev
	PATH="$(abspath $(BIN)):$$PATH" scripts/make-assets

package: dev
	rm -rf dist
	$(BIN)/python -m pip wheel --quiet --no-deps --wheel-dir dist .
	@ls dist

clean:
	rm -rf $(VENV) .cache dist build *.egg-info .pytest_cache .mypy_cache .ruff_cache
