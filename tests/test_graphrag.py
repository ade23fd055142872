"""The neo4j-graphrag retriever (cpr_neo4j/graphrag.py, extra `graphrag`) end to end:
neo4j-graphrag's own `GraphRAG` over the real Neo4j (conftest's `fixed_hop_only`: a
2-hop MetaQA slice with a small model and its calibration) and a real LLM, llama.cpp's
OpenAI-compatible server running SmolLM2-135M
(extra `llm-cpu`, `make llm-prereqs`), as `cpr llm start` runs it. Question in; the
retriever's items (the set's answers with their best paths) and metadata (what the set
promises); the LLM's answer, grounded on the set, out. An alpha the calibration cannot
honour gives no items, so GraphRAG answers its `response_fallback` without the LLM.

`CPR_GRAPHRAG_TRANSCRIPT=FILE` writes the question, items, metadata and answer there."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

pytest.importorskip("neo4j_graphrag", reason="pip install 'cpr-neo4j[graphrag]'")

from neo4j import GraphDatabase  # noqa: E402
from neo4j_graphrag.generation import GraphRAG  # noqa: E402
from neo4j_graphrag.retrievers.base import Retriever  # noqa: E402

from cpr_neo4j import AskOptions  # noqa: E402
from cpr_neo4j.graphrag import CPRRetriever  # noqa: E402
from cpr_neo4j.hints import server as llm_server  # noqa: E402

FALLBACK = "not known with this guarantee"


@pytest.fixture(scope="module")
def asked(fixed_hop_only):
    """(question, its topic) of the slice's first question."""
    from tests.conftest import metaqa_two_hop_slice

    row = metaqa_two_hop_slice().questions.row(0, named=True)
    return row["text"], row["topics"][0]


@pytest.fixture(scope="module")
def retriever(fixed_hop_only, asked, neo4j_settings):
    from tests.conftest import FIXED_HOP_DATASET

    s, t = neo4j_settings, fixed_hop_only
    driver = GraphDatabase.driver(s.uri, auth=(s.username, s.password))
    mp = t.env()  # the model's CPR_HOME
    try:
        # a gold-linked calibration covers named topics only: name it then
        entity = asked[1] if t.cal.linking == "gold" else None
        options = AskOptions(alpha=0.3, dataset=FIXED_HOP_DATASET, model=t.model_id, entity=entity)
        yield CPRRetriever(driver, options, neo4j_database=s.database)
    finally:
        mp.undo()
        driver.close()


@pytest.mark.neo4j
def test_items_and_metadata_are_the_set(retriever, asked, store):
    """Without an LLM: the items are the set `cpr` gives (the recorded (:Ask)'s answers,
    in rank order), the metadata what it promises; unattainable alpha: no items."""
    assert isinstance(retriever, Retriever)
    question, topic = asked
    result = retriever.search(query_text=question)
    meta = result.metadata
    assert meta["__retriever"] == "CPRRetriever"
    assert (meta["alpha"], meta["delta"], meta["risk"]) == (0.3, 0.05, "coverage")
    assert meta["guarantee"] and meta["ask_id"] and meta["threshold"] is not None
    rows = store.query(
        "MATCH (a:Ask {id: $id})-[r:ANSWER]->(e:Entity) "
        "RETURN a.tau AS tau, a.group AS grp, e.id AS id, r.rank AS rank ORDER BY r.rank",
        {"id": meta["ask_id"]},
    )[0]
    assert [x["id"] for x in rows] == [i.metadata["id"] for i in result.items]
    assert {(x["tau"], x["grp"]) for x in rows} == {(meta["threshold"], meta["group"])}
    assert len(result.items) == meta["set_size"] > 0
    for item in result.items:
        assert item.content.endswith(")") and "supported by the path" in item.content
        assert item.metadata["path_ids"][0] == topic

    none = retriever.search(query_text=question, alpha=0.001)
    assert none.items == []
    assert none.metadata["error"] == "Unattainable" and "alpha=0.001" in none.metadata["reason"]
    assert "AskOptions.alpha" in none.metadata["reason"]  # named as the caller sets it
    assert none.metadata["guarantee"] is None and none.metadata["ask_id"] is None


@pytest.mark.neo4j
def test_convert_to_tool(retriever, asked):
    tool = retriever.convert_to_tool(
        "answer_set",
        "Answers to a question about movies, with a coverage guarantee",
        {"alpha": "risk level"},
    )
    spec = tool.get_parameters()
    assert spec["required"] == ["query_text"]
    assert set(spec["properties"]) == {"query_text", "alpha", "entity"}
    assert spec["properties"]["alpha"]["type"] == "number"
    out = tool.execute(query_text=asked[0], alpha=0.5)
    assert out.metadata["alpha"] == 0.5 and out.items


def _require_server_packages() -> None:
    gone = llm_server.missing()
    if not gone:
        return
    what = f"the llama.cpp server needs {', '.join(gone)} (`make llm-prereqs`)"
    if os.environ.get("CPR_REQUIRE_LLM") == "1":
        pytest.fail(f"CPR_REQUIRE_LLM=1 but {what}")
    pytest.skip(what)


@pytest.fixture(scope="module")
def llm(tmp_path_factory):
    _require_server_packages()
    pytest.importorskip("openai", reason="pip install 'cpr-neo4j[graphrag]'")
    from neo4j_graphrag.llm import OpenAILLM

    port = llm_server.free_port()
    url = llm_server.url_of("127.0.0.1", port)
    log = tmp_path_factory.mktemp("llm") / "server.log"
    proc = llm_server.spawn("127.0.0.1", port, log, threads=2)
    try:
        llm_server.wait_ready(url, proc, log)
        llm_server.warm_up(url)
        yield OpenAILLM(
            model_name=llm_server.MODEL_ALIAS,
            model_params={"temperature": 0, "max_tokens": 120, "seed": 0},
            base_url=f"{url}/v1",  # the OpenAI client appends /chat/completions
            api_key="local",  # the local server checks none; the client wants one
        )
    finally:
        proc.terminate()  # our own child, by its handle
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


@pytest.mark.neo4j
@pytest.mark.llm
def test_graphrag_answers_from_the_set(retriever, asked, llm):
    question = asked[0]
    rag = GraphRAG(retriever=retriever, llm=llm)
    out = rag.search(query_text=question, return_context=True, response_fallback=FALLBACK)
    items, meta = out.retriever_result.items, out.retriever_result.metadata
    names = [i.content.split(" (supported by", 1)[0] for i in items]
    print(f"\nQ: {question}\nset: {names}\nLLM: {out.answer}")
    assert items and meta["guarantee"]
    assert out.answer != FALLBACK
    # grounded: the reply names an answer of the set (the context is all it was given)
    assert any(n.lower() in out.answer.lower() for n in names), (out.answer, names)

    abstain = rag.search(
        query_text=question,
        retriever_config={"alpha": 0.001},
        return_context=True,
        response_fallback=FALLBACK,
    )
    assert abstain.answer == FALLBACK and abstain.retriever_result.items == []
    path = os.environ.get("CPR_GRAPHRAG_TRANSCRIPT")
    if path:
        with open(path, "w", encoding="utf-8") as f:
            for q, r in ((question, out), (f"{question}  [retriever_config alpha=0.001]", abstain)):
                f.write(f"question: {q}\nitems:\n")
                for i in r.retriever_result.items:
                    f.write(f"  {i.content}\n    {json.dumps(i.metadata)}\n")
                meta = r.retriever_result.metadata
                f.write(f"metadata: {json.dumps(meta, indent=2, default=str)}\n")
                f.write(f"LLM answer: {r.answer}\n\n")
