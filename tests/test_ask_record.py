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


def ask(ask_id: str, answers: list[dict]) -> dict:
    props = {"question": "who directed the films of [Ann]", "dataset": DS}
    return {"id": ask_id, "dataset": DS, "props": props, "topics": ["Ann"], "answers": answers}


def hops(nodes: list[str], rels: list[str], forward: list[bool]) -> dict:
    return {"nodes": nodes, "rels": rels, "forward": forward}


def test_each_answer_keeps_its_exact_hops_and_the_view_returns_only_those(store, tiny):
    answers = [
        {
            "id": "Bob",
            "rank": 1,
            "cost": 0.1,
            "path": "Ann <-starred_actors- Film -written_by-> Bob",
        }
        | hops(["Ann", "Film", "Bob"], ["starred_actors", "written_by"], [False, True]),
        {"id": "Eve", "rank": 2, "cost": 0.2, "path": "Ann -film.actor.film-> [CVT] -> Eve"}
        | hops(
            ["Ann", "m.0cvt", "Eve"],
            ["film.actor.film", "film.performance.character"],
            [True, True],
        ),
    ]
    records.save_asks(store, [ask("t1", answers)])
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


def test_asks_written_together_each_keep_their_own_answers(store, tiny):
    """`cpr serve` commits concurrent asks in one transaction: each record stays whole."""
    bob = {"id": "Bob", "rank": 1, "cost": 0.1, "path": ""}
    film = {"id": "Film", "rank": 2, "cost": 0.2, "path": ""}  # past the recorded paths
    records.save_asks(
        store,
        [
            ask(
                "t2",
                [
                    bob
                    | hops(
                        ["Ann", "Film", "Bob"], ["starred_actors", "directed_by"], [False, True]
                    ),
                    film,
                ],
            ),
            ask("t3", [film | hops(["Ann", "Film"], ["starred_actors"], [False])]),
        ],
    )
    first, second = records.ask_record(store, "t2"), records.ask_record(store, "t3")
    assert [a["id"] for a in first["answers"]] == ["Bob", "Film"]
    assert first["answers"][0]["rels"] == ["starred_actors", "directed_by"]
    assert first["answers"][1]["nodes"] is None
    assert [a["id"] for a in second["answers"]] == ["Film"]
    assert {r["r"].type for r in store.read("ask_paths", id="t2")} == {
        "TOPIC",
        "ANSWER",
        "starred_actors",
        "directed_by",  # not the parallel written_by
    }


def test_the_write_checks_only_the_path_entities_it_is_sent_as_mediators(store, tiny):
    """`cpr ask` sends the path entities that may be CVTs (stages/ask.mediators):
    one left out is not labelled, one sent is labelled only if its name is a MID."""
    eve = {"id": "Eve", "rank": 1, "cost": 0.1, "path": ""} | hops(
        ["Ann", "m.0cvt", "Eve"], ["film.actor.film", "film.performance.character"], [True, True]
    )

    def labelled() -> set[str]:
        rows = store.query("MATCH (e:Mediator {dataset: $ds}) RETURN e.id AS id", {"ds": DS})
        return {r["id"] for r in rows[0]}

    records.save_asks(store, [ask("t4", [eve]) | {"mediators": []}])
    assert records.ask_record(store, "t4")["answers"][0]["nodes"] == ["Ann", "m.0cvt", "Eve"]
    assert labelled() == set()
    records.save_asks(store, [ask("t5", [eve]) | {"mediators": ["Ann", "m.0cvt"]}])
    assert labelled() == {"m.0cvt"}


def test_mediators_are_the_recorded_path_entities_named_by_a_mid_or_not_named_here():
    from types import SimpleNamespace

    from cpr_neo4j.stages.ask import MAX_PATHS_RECORDED, mediators

    answers = [
        SimpleNamespace(rank=1, entities=["Ann", "m.0cvt", "Eve"]),
        SimpleNamespace(rank=2, entities=["Ann", "m.0new", "Nameless"]),
        SimpleNamespace(rank=MAX_PATHS_RECORDED + 1, entities=["Ann", "m.0late", "Bob"]),
    ]
    names = {"Ann": "Ann", "m.0cvt": "m.0cvt", "Eve": "Eve", "Nameless": None, "m.0late": "m.0late"}
    # m.0new is not among the names looked up: the write checks it in Neo4j
    assert mediators(answers, names) == ["m.0cvt", "m.0new"]


def _one(ask_id: str) -> dict:
    answer = {"id": "Bob", "rank": 1, "cost": 0.1, "path": "Ann <-starred_actors- Film"}
    return ask(ask_id, [answer | hops(["Ann", "Film"], ["starred_actors"], [False])])


def _count(store, ask_id: str) -> tuple[int, int]:
    """(:Ask nodes with this id, answers its record holds)."""
    n = store.query("MATCH (a:Ask {id: $id}) RETURN count(a) AS n", {"id": ask_id})[0][0]["n"]
    rows = store.read("ask_record", id=ask_id)
    return n, len(rows[0]["answers"]) if rows else 0


@pytest.mark.parametrize("written_first", [True, False])
def test_an_ask_write_that_fails_is_finished_once_without_duplicates(
    store, tiny, monkeypatch, written_first
):
    """The :Ask write is one auto-commit transaction (one round trip). When it fails, the
    outcome may be unknown (the connection went after the commit) or nothing was written
    (a transient error): each ask is then written once, never twice, and never refused."""
    from neo4j.exceptions import ServiceUnavailable, TransientError

    real = type(store).write_once

    def failing(self, name, /, **params):
        if written_first:  # committed, then the connection dropped before the reply
            real(self, name, **{**params, "asks": params["asks"][:1]})
            raise ServiceUnavailable("connection lost")
        raise TransientError("deadlock, rolled back")

    monkeypatch.setattr(type(store), "write_once", failing)
    assert records.save_asks(store, [_one("ask-fail-1"), _one("ask-fail-2")]) == set()
    assert _count(store, "ask-fail-1") == (1, 1)
    assert _count(store, "ask-fail-2") == (1, 1)


def test_an_ask_write_is_one_auto_commit_transaction(store, tiny, monkeypatch):
    """No managed (retried) transaction on the ask path unless the one round trip fails."""
    monkeypatch.setattr(type(store), "write_rows", lambda *a, **k: pytest.fail("managed write"))
    assert records.save_asks(store, [_one("ask-once")]) == set()
    assert _count(store, "ask-once") == (1, 1)
