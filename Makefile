# One entry point for setup, the demo and the tests. Everything installs from the
# registries into .venv and CPR_HOME (default ~/.cpr); nothing is needed by hand.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
CPR := $(VENV)/bin/cpr
PYTEST_ARGS ?=

.PHONY: setup neo4j demo test lint bench clean

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

setup: $(VENV)/.installed

neo4j: setup
	$(CPR) neo4j start

# The main job end to end on the bundled MetaQA data.
demo: neo4j
	$(CPR) ingest metaqa
	$(CPR) neo4j status

test: neo4j
	$(PY) -m pytest -q $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

bench: neo4j
	$(PY) bench/ingest.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
