"""Ingest stores each hub's capped neighbour list (cypher/hub_lists.cypher); the adjacency
queries read it instead of sorting the hub's whole degree. The rows must be exactly the
sorted path's, for entities given by id and by node id, and stay so after a later ingest
adds edges to the hub."""

from __future__ import annotations

import random

import pytest

from cpr_neo4j.graph.cypher import statement
from cpr_neo4j.graph.ingest import ingest
from cpr_neo4j.graph.neighbours import DEFAULT_FANOUT_CAP, Neo4jNeighbours
from cpr_neo4j.loaders.triples import load_triples
from cpr_neo4j.search.base import Step
from cpr_neo4j.search.frontier import Adjacency
from tests.conftest import drop_dataset

pytestmark = pytest.mark.neo4j
NAME = "test-hub-lists"
CAP = DEFAULT_FANOUT_CAP
# Big: one group over the cap (capped). Mid: a hub (2 * degree > cap) with no group over it.
BIG, MID = "Genre Big", "Genre Mid"


def write(path, rows) -> None:
    path.write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in rows))


def graph_rows(first: int, count: int, seed: int) -> list[tuple[str, str, str]]:
    films = [f"film {i:05d}" for i in range(first, first + count)]
    random.Random(seed).shuffle(films)  # store order is not id order
    rows = [(f, "has_genre", BIG) for f in films]
    rows += [(f, "has_genre", MID) for f in films[: CAP // 2 + 100]]
    rows += [(BIG, "in_language", f"lang {i}") for i in range(5)]  # a small forward group
    rows += [(films[0], "related_to", BIG), (BIG, "has_genre", BIG)]  # 2nd type; a self-loop
    return rows


def in_order(adj) -> list[tuple]:
    """Every edge as (entity, step, neighbour), in the order the query returned them."""
    return [
        (adj.frontier[u], adj.steps[k], adj.names[v])
        for u, k, v in zip(adj.src.tolist(), adj.step.tolist(), adj.dst.tolist(), strict=True)
    ]


def sorted_path(store, ids: list[str]) -> tuple[Adjacency, Adjacency]:
    """The rows by id and by node id with the stored lists hidden, so the queries take their
    sort path; in one transaction, rolled back."""
    params = {"dataset": NAME, "cap": CAP, "names": True}
    with store.driver.session(database=store.database) as s, s.begin_transaction() as tx:
        tx.run(
            "MATCH (e:Entity {dataset: $dataset}) WHERE e.cpr_hub_cap IS NOT NULL "
            "SET e.cpr_hub_cap = -1",
            params,
        ).consume()
        r = tx.run(statement("adjacency_by_id"), ids=ids, **params).single()
        by_id = Adjacency.from_groups(r["nodes"], r["ids"], r["groups"])
        r = tx.run(statement("adjacency_by_node"), nodes=list(r["nodes"]), **params).single()
        by_node = Adjacency.from_groups(r["nodes"], r["ids"], r["groups"])
        tx.rollback()
    return by_id, by_node


def same_as_sorted_path(store, ids: list[str]) -> None:
    source = Neo4jNeighbours(store, NAME)
    want_id, want_node = sorted_path(store, ids)
    assert set(want_id.frontier.values()) == set(ids)
    assert in_order(source.adjacency(ids, [], names=True)) == in_order(want_id)
    nodes = sorted(want_id.frontier)
    assert in_order(source.adjacency([], nodes, names=True)) == in_order(want_node)


def genre_of(store, entity: str, cap: int = CAP) -> list[str]:
    """`entity`'s reverse has_genre neighbours, as search sees them."""
    edges = Neo4jNeighbours(store, NAME, cap).neighbours([entity])[entity]
    return [n for step, n in edges if step == Step("has_genre", False)]


@pytest.fixture(scope="module")
def hub_graph(store, tmp_path_factory):
    drop_dataset(store, NAME)
    folder = tmp_path_factory.mktemp("hubs")
    write(folder / "triples.tsv", graph_rows(100, CAP + 700, seed=0))
    ingest(store, load_triples(NAME, folder / "triples.tsv"))
    yield folder
    drop_dataset(store, NAME)


def stored(store, entity: str) -> dict:
    rows = store.query(
        "MATCH (e:Entity {dataset: $d, id: $id}) RETURN e.cpr_hub_cap AS cap, "
        "e.cpr_hub_types AS types, e.cpr_hub_ids AS ids",
        {"d": NAME, "id": entity},
    )[0]
    return dict(rows[0])


def test_hubs_get_lists_and_the_rows_are_the_sorted_paths(store, hub_graph):
    big, mid = stored(store, BIG), stored(store, MID)
    assert big["cap"] == CAP and mid["cap"] == CAP
    assert big["types"].count("has_genre") == CAP + 1  # reverse group capped; the self-loop, once
    assert len(mid["ids"]) == CAP // 2 + 100  # a hub, nothing capped
    assert stored(store, "film 00100")["cap"] is None  # not a hub
    same_as_sorted_path(store, [BIG, MID, "film 00100", "lang 3"])
    genre = genre_of(store, BIG)
    assert len(genre) == CAP and genre == sorted(genre) and genre[0] == "film 00100"


def test_a_later_ingest_keeps_the_lists_in_step(store, hub_graph):
    # films with smaller ids: they enter Big's capped list, displacing its last ones. The
    # file holds the whole graph again: a re-ingest replaces the dataset with its files
    more = [(f"a film {i:03d}", "has_genre", BIG) for i in range(50)]
    write(hub_graph / "more.tsv", graph_rows(100, CAP + 700, seed=0) + more)
    ingest(store, load_triples(NAME, hub_graph / "more.tsv"))
    same_as_sorted_path(store, [BIG, MID])
    genre = genre_of(store, BIG)
    assert genre[:50] == [f"a film {i:03d}" for i in range(50)] and len(genre) == CAP


def test_another_cap_takes_the_sorted_path(store, hub_graph):
    genre = genre_of(store, BIG, cap=30)
    assert len(genre) == 30 and genre == sorted(genre)
