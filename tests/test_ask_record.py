"""The (:Ask) record in a real Neo4j: each answer's exact hops, and a Browser view of exactly
those (cypher/create_ask.cypher, ask_paths.cypher), on a tiny graph with parallel relations."""

from __future__ import annotations

import pytest

from cpr_neo4j.graph import records

pytestmark = pytest.mark.neo4j
DS = "asktest"

# Film -directed_by-> Bob and Film -written_by-> Bob are parallel: only the path text tells
# which one the answer's best path took. m.0cvt is a Freebase CVT node named by its MID.
GRAPH = """
CREATE (ann:Entity {dataset: $ds, id: 'Ann', name: 'Ann'}),
       (film:Entity {dataset: $ds, id: 'Film', name: 'Film'}),
       (bob:Entity {dataset: $ds, id: 'Bob', name: 'Bob'}),
       (cvt:Entity {dataset: $ds, id: 'm.0cvt', name: 'm.0cvt'}),
       (eve:Entity {dataset: $ds, id: 'Eve', name: 'Eve'}),
       (film)-[:starred_actors]->(ann), (film)-[:directed_by]->(bob),
       (film)-[:written_by]->(bob), (ann)-[:`film.actor.film`]->(cvt),
       (cvt)-[:`film.performance.character`]->(eve)
"""


@pytest.fixture
def tiny(store):
    store.query("MATCH (n {dataset: $ds}) DETACH DELETE n", {"ds": DS}, write=True)
    store.query(GRAPH, {"ds": DS}, write=True)
    yield
    store.query("MATCH (a:Ask {dataset: $ds}) DETACH DELETE a", {"ds": DS}, write=True)
    store.query("MATCH (n {dataset: $ds}) DETACH DELETE n", {"ds": DS}, write=True)


def save(store, ask_id: str, answers: list[dict], chains: dict[str, list]) -> None:
    via = [
        {"answer": a, "pos": i, "entity": e} | ({} if isinstance(e, str) else e)
        for a, chain in chains.items()
        for i, e in enumerate(chain)
    ]
    records.save_ask(
        store,
        ask_id,
        DS,
        {"question": "who directed the films of [Ann]", "dataset": DS},
        ["Ann"],
        answers,
        via,
    )


def test_each_answer_keeps_its_exact_hops_and_the_view_returns_only_those(store, tiny):
    answers = [
        {
            "id": "Bob",
            "rank": 1,
            "cost": 0.1,
            "path": "Ann <-starred_actors- Film -written_by-> Bob",
        },
        {
            "id": "Eve",
            "rank": 2,
            "cost": 0.2,
            "path": "Ann -film.actor.film-> m.0cvt -film.performance.character-> Eve",
        },
    ]
    save(store, "t1", answers, {"Bob": ["Ann", "Film", "Bob"], "Eve": ["Ann", "m.0cvt", "Eve"]})
    rec = records.ask_record(store, "t1")
    assert rec["ask"]["name"] == "who directed the films of [Ann]" and rec["topics"] == ["Ann"]
    bob, eve = rec["answers"]
    assert (bob["nodes"], bob["rels"], bob["forward"]) == (
        ["Ann", "Film", "Bob"],
        ["starred_actors", "written_by"],
        [False, True],
    )
    assert eve["rels"] == ["film.actor.film", "film.performance.character"]
    rows = store.read("ask_paths", id="t1")
    seen = sorted((r["r"].type, r["x"]["id"], r["y"]["id"]) for r in rows)
    assert seen == sorted(
        [
            ("TOPIC", "Ann", "Ann"),
            ("ANSWER", "Bob", "Bob"),
            ("ANSWER", "Eve", "Eve"),
            ("starred_actors", "Film", "Ann"),
            ("written_by", "Film", "Bob"),  # not the parallel directed_by
            ("film.actor.film", "Ann", "m.0cvt"),
            ("film.performance.character", "m.0cvt", "Eve"),
        ]
    )
    rows = store.query(
        "MATCH (e:Entity {dataset: $ds}) RETURN e.id AS id, e:Mediator AS m", {"ds": DS}
    )
    labels = {r["id"]: r["m"] for r in rows[0]}
    assert labels == {"Ann": False, "Film": False, "Bob": False, "m.0cvt": True, "Eve": False}


def test_hops_given_by_the_caller_win_and_unreadable_paths_are_left_out(store, tiny):
    answers = [
        {"id": "Bob", "rank": 1, "cost": 0.1, "path": ""},  # no text: two ways Film -> Bob
        {"id": "Film", "rank": 2, "cost": 0.2, "path": ""},  # one way: it stands
    ]
    chains = {"Bob": ["Ann", "Film", "Bob"], "Film": ["Ann", "Film"]}
    save(store, "t2", answers, chains)
    bob, film = records.ask_record(store, "t2")["answers"]
    assert bob["nodes"] is None and film["rels"] == ["starred_actors"]
    chains["Bob"] = [
        "Ann",
        {"entity": "Film", "rel": "starred_actors", "forward": False},
        {"entity": "Bob", "rel": "directed_by", "forward": True},
    ]
    save(store, "t3", answers, chains)
    bob = records.ask_record(store, "t3")["answers"][0]
    assert bob["rels"] == ["starred_actors", "directed_by"]
    assert {r["r"].type for r in store.read("ask_paths", id="t3")} == {
        "TOPIC",
        "ANSWER",
        "starred_actors",
        "directed_by",
    }
