"""Calibrations are tied to the graph and the entity linking they were made with: after an
ingest changes the graph, `ask` (and `cpr serve`) refuse the old calibration; an ask whose
linking differs from the calibration's is refused too. Real Neo4j, real MetaQA slice."""

from __future__ import annotations

import polars as pl
import pytest
from fastapi.testclient import TestClient

from cpr_neo4j.errors import Conflict, StaleCalibration
from cpr_neo4j.graph import fingerprint, linking
from cpr_neo4j.graph.ingest import ingest
from cpr_neo4j.loaders.base import Dataset
from cpr_neo4j.loaders.metaqa import load_metaqa
from cpr_neo4j.serve.app import create_app
from cpr_neo4j.stages.ask import ask
from cpr_neo4j.stages.calibrate import GOLD, TEXT, calibrate
from cpr_neo4j.stages.session import HTTP, check_linking
from cpr_neo4j.stages.train import TrainSettings, train
from tests.conftest import drop_dataset, drop_models

pytestmark = pytest.mark.neo4j

NAME = "metaqa_stale_test"
QUESTIONS = 300


def _slice() -> Dataset:
    """The first 1-hop dev questions of MetaQA and every triple touching their topics."""
    full = load_metaqa(hops=(1,), splits=("dev",))
    questions = full.questions.head(QUESTIONS)
    topics = questions.get_column("topics").explode().unique()
    triples = full.triples.filter(
        pl.col("head").is_in(topics.implode()) | pl.col("tail").is_in(topics.implode())
    )
    used = pl.concat([triples.get_column("head"), triples.get_column("tail")]).unique()
    entities = full.entities.filter(pl.col("id").is_in(used.implode()))
    return Dataset(NAME, triples, entities, questions, full.relation_text)


@pytest.fixture(scope="module")
def calibrated(store, tmp_path_factory):
    drop_dataset(store, NAME)
    ingest(store, _slice())
    model = None
    with pytest.MonkeyPatch.context() as env:
        env.setenv("CPR_HOME", str(tmp_path_factory.mktemp("cpr_home_stale")))
        try:
            model = train(store, TrainSettings(NAME, hops=1, max_questions=150, cal_share=0.2))
            text = calibrate(store, NAME, model.model_id, alphas=(0.5,), linking=TEXT)
            yield model.model_id, text
        finally:
            if model is not None:
                drop_models(store, [model.model_id])
            drop_dataset(store, NAME)


def _question(store) -> str:
    row = store.query(
        "MATCH (q:Question {dataset: $d}) RETURN q.text AS text ORDER BY q.id LIMIT 1",
        {"d": NAME},
    )[0][0]
    return row["text"]


def test_text_linking_is_recorded_and_named_topics_have_their_own_curves(store, calibrated):
    model_id, cal = calibrated
    assert cal.linking == TEXT and cal.linking_accuracy > 0.9  # MetaQA brackets its topics
    node = store.query("MATCH (c:Calibration {id: $id}) RETURN c", {"id": cal.id})[0][0]["c"]
    assert node["linking"] == TEXT and node["graph_fingerprint"] == fingerprint.current(store, NAME)
    r = ask(store, _question(store), 0.5, dataset=NAME, model_id=model_id)
    assert r.guarantee is not None
    assert len(node["named_q_scores"]) == len(node["q_scores"]) == node["n"]
    named = ask(
        store, _question(store), 0.5, dataset=NAME, entity=r.topics[0]["id"], model_id=model_id
    )
    assert named.guarantee is not None and named.topics == r.topics
    # a text-linked calibration without those curves (made before them) says what to do
    old = {k: v for k, v in dict(node).items() if not k.startswith("named_")}
    with pytest.raises(Conflict, match="ask without --entity"):
        check_linking(old, "x")
    with pytest.raises(Conflict, match="ask without the `entity` field"):
        check_linking(old, "x", HTTP["entity"])


def test_a_calibration_made_with_other_linking_rules_is_stale(store, calibrated, monkeypatch):
    model_id, cal = calibrated
    node = store.query("MATCH (c:Calibration {id: $id}) RETURN c", {"id": cal.id})[0][0]["c"]
    assert node["linker"] == linking.LINKER
    monkeypatch.setattr(linking, "LINKER", "names-v999")  # a later cpr's rules
    with pytest.raises(StaleCalibration, match="linker names-v3.*names-v999.*cpr calibrate"):
        ask(store, _question(store), 0.5, dataset=NAME, model_id=model_id)
    r = ask(store, _question(store), 0.5, dataset=NAME, model_id=model_id, allow_stale=True)
    assert r.guarantee is None and any("STALE" in n for n in r.notes)


def test_gold_linking_calibration_needs_entity(store, calibrated):
    model_id, _ = calibrated
    question = _question(store)
    topic = ask(store, question, 0.5, dataset=NAME, model_id=model_id).topics[0]["id"]
    gold = calibrate(store, NAME, model_id, alphas=(0.5,), linking=GOLD)  # now the newest
    try:
        with pytest.raises(Conflict, match="give --entity"):
            ask(store, question, 0.5, dataset=NAME, model_id=model_id)
        r = ask(store, question, 0.5, dataset=NAME, model_id=model_id, entity=topic)
        assert r.calibration_id == gold.id and r.guarantee is not None
    finally:
        store.query("MATCH (c:Calibration {id: $id}) DETACH DELETE c", {"id": gold.id}, write=True)


def test_ingest_that_changes_the_graph_makes_the_calibration_stale(
    store, neo4j_settings, calibrated
):
    model_id, cal = calibrated
    question = _question(store)
    before = fingerprint.current(store, NAME)
    ingest(store, _slice())  # the same data again: nothing changes, nothing is stale
    assert fingerprint.current(store, NAME) == before
    ask(store, question, 0.5, dataset=NAME, model_id=model_id)

    extra = _slice()
    extra.triples = pl.concat(
        [
            extra.triples,
            pl.DataFrame(
                {"head": ["Stale Test Film"], "relation": ["directed_by"], "tail": ["Someone"]}
            ),
        ]
    )
    extra.entities = pl.concat(
        [
            extra.entities,
            pl.DataFrame({"id": ["Stale Test Film", "Someone"]}).with_columns(name=pl.col("id")),
        ]
    )
    ingest(store, extra)
    after = fingerprint.current(store, NAME)
    assert after != before
    with pytest.raises(StaleCalibration, match="cpr calibrate") as info:
        ask(store, question, 0.5, dataset=NAME, model_id=model_id)
    assert "\n" not in str(info.value)
    with TestClient(create_app(neo4j_settings)) as client:  # `cpr serve` answers 409
        body = {"question": question, "alpha": 0.5, "dataset": NAME, "model": model_id}
        refused = client.post("/ask", json=body)
        assert refused.status_code == 409 and refused.json()["type"] == "StaleCalibration"
        allowed = client.post("/ask", json=body | {"allow_stale": True})
        assert allowed.status_code == 200 and allowed.json()["guarantee"] is None
    r = ask(store, question, 0.5, dataset=NAME, model_id=model_id, allow_stale=True)
    assert r.guarantee is None and any("STALE" in n for n in r.notes)
    recorded = store.query("MATCH (a:Ask {id: $id}) RETURN a.guaranteed AS g", {"id": r.ask_id})
    assert recorded[0][0]["g"] is False
    fresh = calibrate(store, NAME, model_id, alphas=(0.5,), linking=TEXT)
    assert fresh.id == cal.id  # the same calibration, recomputed on the new graph
    assert ask(store, question, 0.5, dataset=NAME, model_id=model_id).guarantee is not None
