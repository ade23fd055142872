"""The adjacency queries' flat branch (entities below the hub cut) matches outgoing and
incoming edges apart (cypher/adjacency_by_id.cypher): its rows must be exactly those of one
undirected match, `(e)-[r]-(n:Entity)` with forward = `startNode(r) = e`: a self-loop once,
as forward; a parallel edge of another type kept; a non-entity neighbour (a question's TOPIC
link) left out; with and without neighbour ids."""

from __future__ import annotations

from collections import Counter

import pytest

from cpr_neo4j.graph.ingest import ingest
from cpr_neo4j.graph.neighbours import Neo4jNeighbours
from cpr_neo4j.loaders.triples import load_triples
from cpr_neo4j.search.base import Step
from tests.conftest import drop_dataset

pytestmark = pytest.mark.neo4j
NAME = "test-adjacency-rows"
ROWS = [
    ("a", "likes", "b"),
    ("b", "likes", "a"),  # the reverse edge of the same type
    ("a", "knows", "b"),  # a parallel edge of another type
    ("a", "likes", "a"),  # a self-loop
    ("b", "in", "c"),
    ("c", "in", "c"),
    ("d", "likes", "a"),
]
ENTITIES = ["a", "b", "c", "d"]

REFERENCE = """
UNWIND $ids AS id
MATCH (e:Entity {dataset: $dataset, id: id})-[r]-(n:Entity)
RETURN e.id AS e, type(r) AS type, startNode(r) = e AS forward, n.id AS n
"""


@pytest.fixture(scope="module")
def small_graph(store, tmp_path_factory):
    drop_dataset(store, NAME)
    path = tmp_path_factory.mktemp("rows") / "triples.tsv"
    path.write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in ROWS))
    ingest(store, load_triples(NAME, path))
    yield
    drop_dataset(store, NAME)


def edges(adj, named: bool = True) -> Counter:
    """Every row as (entity, step, neighbour): its id when named, else its node id."""
    return Counter(
        (adj.frontier[u], adj.steps[k], adj.names[v] if named else v)
        for u, k, v in zip(adj.src.tolist(), adj.step.tolist(), adj.dst.tolist(), strict=True)
    )


def test_flat_rows_equal_one_undirected_match(store, small_graph):
    with store.driver.session(database=store.database) as s, s.begin_transaction() as tx:
        # a question node linked to an entity: not an entity, so never a neighbour
        tx.run(
            "MATCH (e:Entity {dataset: $d, id: 'a'}) CREATE (:Question {id: 'q'})-[:TOPIC]->(e)",
            d=NAME,
        ).consume()
        want = Counter(
            (r["e"], Step(r["type"], r["forward"]), r["n"])
            for r in tx.run(REFERENCE, ids=ENTITIES, dataset=NAME)
        )
        tx.rollback()
    source = Neo4jNeighbours(store, NAME)
    by_id = source.adjacency(ENTITIES, [], names=True)
    assert edges(by_id) == want
    assert want[("a", Step("likes", True), "a")] == 1  # the self-loop, once
    assert ("a", Step("likes", False), "a") not in want
    by_node = source.adjacency([], sorted(by_id.frontier), names=True)
    assert edges(by_node) == want
    # without ids: the same rows by node id, and no names
    ids = {v: k for k, v in by_id.frontier.items()}
    unnamed = source.adjacency([], sorted(by_id.frontier), names=False)
    assert unnamed.names == {}
    assert edges(unnamed, named=False) == Counter(
        {(e, step, ids[n]): c for (e, step, n), c in want.items()}
    )
