"""Calibrations are tied to the graph and the entity linking they were made with: after an
ingest changes the graph, `ask` (and `cpr serve`) refuse the old calibration; an ask whose
linking differs from the calibration's is refused too. Real Neo4j, real MetaQA slice."""

from __future__ import annotations

import polars as pl
import pytest
from fastapi.testclient import TestClient

from cpr_neo4j.calibration import Calibration
from cpr_neo4j.errors import Conflict, StaleCalibration
from cpr_neo4j.graph import fingerprint
from cpr_neo4j.graph.ingest import ingest
from cpr_neo4j.linking import resolve
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
    old = Calibration.of({k: v for k, v in dict(node).items() if not k.startswith("named_")})
    with pytest.raises(Conflict, match="ask without --entity"):
        check_linking(old, "x")
    with pytest.raises(Conflict, match="ask without the `entity` field"):
        check_linking(old, "x", HTTP["entity"])


def test_a_calibration_made_with_other_linking_rules_is_stale(store, calibrated, monkeypatch):
    model_id, cal = calibrated
    node = store.query("MATCH (c:Calibration {id: $id}) RETURN c", {"id": cal.id})[0][0]["c"]
    assert node["linker"] == (made_with := resolve.LINKER)
    monkeypatch.setattr(resolve, "LINKER", "names-v999")  # a later cpr's rules
    with pytest.raises(
        StaleCalibration,
        match=f"linker's name rules .* was '{made_with}' at calibration and is 'names-v999' "
        "now; run `cpr calibrate",
    ):
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


# ---- a calibration knows the code it was made with (stages/pins.py) --------------------


def _node(store, cid: str) -> dict:
    return dict(store.query("MATCH (c:Calibration {id: $id}) RETURN c", {"id": cid})[0][0]["c"])


def _patched(pin) -> object:
    """Another value for what `pin` reads (a later cpr's rules)."""
    now = pin.now()
    return now * 10 if isinstance(now, float) else now + 1 if isinstance(now, int) else now + "-x"


def _module_attr(pin) -> tuple[object, str]:
    """The module and constant a pin reads (its lambda's one global lookup)."""
    code = pin.now.__code__
    module = pin.now.__globals__[code.co_names[0]]
    return module, code.co_names[1]


def test_every_recorded_rule_that_changes_makes_the_calibration_stale(
    store, calibrated, monkeypatch
):
    """Each pin in turn: this code's value changed, `cpr ask` refuses with one message
    naming that pin alone; --allow-stale answers without a guarantee."""
    import json

    from cpr_neo4j.stages import pins

    model_id, cal = calibrated
    node = _node(store, cal.id)
    assert json.loads(node[pins.CODE]) == pins.current()
    question = _question(store)
    assert ask(store, question, 0.5, dataset=NAME, model_id=model_id).guarantee is not None
    refused = {}
    for pin in pins.PINS:
        module, attr = _module_attr(pin)
        with monkeypatch.context() as m:
            m.setattr(module, attr, _patched(pin))
            with pytest.raises(StaleCalibration) as info:
                ask(store, question, 0.5, dataset=NAME, model_id=model_id)
            refused[pin.key] = str(info.value)
            r = ask(store, question, 0.5, dataset=NAME, model_id=model_id, allow_stale=True)
            assert r.guarantee is None and any("STALE" in n for n in r.notes), pin.key
    for pin in pins.PINS:
        message = refused[pin.key]
        print(f"\n{pin.key}: {message}")
        assert pin.what in message and "cpr calibrate" in message, (pin.key, message)
        assert [p.key for p in pins.PINS if p.what in message] == [pin.key]


def test_a_calibration_from_before_the_record_is_stale_and_says_why(store, calibrated):
    from cpr_neo4j.stages import pins
    from cpr_neo4j.stages.session import open_session

    _, cal = calibrated
    old = {k: v for k, v in _node(store, cal.id).items() if k != pins.CODE}
    with pytest.raises(StaleCalibration, match="before calibrations recorded the code"):
        open_session(store, 0.5, dataset=NAME, cal=Calibration.of(old))


def test_the_cut_uses_the_tolerance_the_calibration_stored(store, calibrated, monkeypatch):
    """A calibration that stored another tolerance than this code's is stale (a pin), and
    under --allow-stale its sets are cut with the stored tolerance, not this code's."""
    from cpr_neo4j.graph import records
    from cpr_neo4j.stages import ask as ask_mod

    model_id, cal = calibrated
    question = _question(store)
    used: list[float] = []
    real = ask_mod.cut_set

    def cut_set(score, th, req, eps):
        used.append(eps)
        return real(score, th, req, eps)

    monkeypatch.setattr(ask_mod, "cut_set", cut_set)
    ask(store, question, 0.5, dataset=NAME, model_id=model_id)
    set_tolerance = "MATCH (c:Calibration {id: $id}) SET c.tolerance = $t"
    store.query(set_tolerance, {"id": cal.id, "t": 2.5e-4}, write=True)
    records._CALIBRATIONS.clear()  # nodes read are kept by id and created time
    try:
        with pytest.raises(StaleCalibration, match="the cut's tolerance"):
            ask(store, question, 0.5, dataset=NAME, model_id=model_id)
        r = ask(store, question, 0.5, dataset=NAME, model_id=model_id, allow_stale=True)
    finally:
        store.query(set_tolerance, {"id": cal.id, "t": 1e-4}, write=True)
        records._CALIBRATIONS.clear()
    assert used == [1e-4, 2.5e-4] and r.guarantee is None


def test_named_entities_resolve_in_any_spelling_and_the_sentence_says_what_it_assumes(
    store, calibrated
):
    model_id, _ = calibrated
    question = _question(store)
    topic = ask(store, question, 0.5, dataset=NAME, model_id=model_id).topics[0]
    name = topic["name"]
    for given in (name, name.upper(), name.replace(" ", "_"), name.replace(" ", "-")):
        r = ask(store, question, 0.5, dataset=NAME, model_id=model_id, entity=given)
        assert r.topics[0]["id"] == topic["id"], given
        assert r.guarantee and "assumes the named entity is the question's true topic" in (
            r.guarantee
        ), given
