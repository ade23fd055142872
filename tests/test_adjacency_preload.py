"""`cpr serve` reads a small graph's neighbour rows whole (CachedAdjacency.preload): the
same rows, cap included, as the per-question queries, and no query afterwards."""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import pytest

from cpr_neo4j.graph.neighbours import Neo4jNeighbours, graph_nodes
from cpr_neo4j.search import adjacency_cache
from cpr_neo4j.search.adjacency_cache import ANSWER_CACHE_ENTITIES, CachedAdjacency

pytestmark = pytest.mark.neo4j
CAP = 40  # small, so that hundreds of MetaQA entities (genres, years, prolific people) bind


def triples(adj) -> set[tuple[str, object, str]]:
    return {
        (adj.frontier[u], adj.steps[k], adj.names[v])
        for u, k, v in zip(adj.src.tolist(), adj.step.tolist(), adj.dst.tolist(), strict=True)
    }


@pytest.fixture(scope="module")
def preloaded(store, metaqa):
    whole = CachedAdjacency(Neo4jNeighbours(store, "metaqa", CAP))
    nodes = graph_nodes(store, "metaqa", ANSWER_CACHE_ENTITIES)
    assert nodes is not None
    whole.preload(nodes)
    return whole, nodes


def test_preloaded_rows_are_the_queried_rows(store, preloaded):
    whole, nodes = preloaded
    assert whole.complete and whole.entities == len(nodes) > 40_000
    degrees = {n: len(whole._rows[n][1]) for n in nodes}
    hubs = sorted(degrees, key=lambda n: (-degrees[n], n))[:20]  # capped: the sorted path
    sample = hubs + random.Random(0).sample(sorted(nodes), 300)
    ids = [whole._id[n] for n in sample]
    direct = Neo4jNeighbours(store, "metaqa", CAP)
    trips = whole.round_trips
    for part in (ids[:20], ids[20:]):
        assert whole.neighbours(part) == direct.neighbours(part)
        assert triples(whole.adjacency(part, [], True)) == triples(direct.adjacency(part, [], True))
    some = [whole._node[i] for i in ids[20:60]]
    assert triples(whole.adjacency([], some, True)) == triples(direct.adjacency([], some, True))
    per_step = Counter((u, step) for u, edges in direct.neighbours(ids[:20]).items()
                       for step, _ in edges)  # fmt: skip
    assert max(per_step.values()) == CAP, "no hub of the sample is capped"
    assert whole.round_trips == trips, "a complete cache made a query"


def test_an_unknown_id_is_absent_without_a_query(preloaded):
    whole, _ = preloaded
    copy = whole.copy()
    trips = copy.round_trips
    assert copy.neighbours(["no such entity"]) == {}
    assert copy.adjacency(["no such entity"], [], True).frontier == {}
    assert copy.round_trips == trips


def test_a_graph_over_the_limit_is_not_read_whole(store, metaqa):
    assert graph_nodes(store, "metaqa", 1000) is None


def test_the_id_rank_orders_as_ids_and_changes_no_retrieval(store, preloaded, monkeypatch):
    """A complete cache ranks node ids by entity id once (frontier.Adjacency.rank); TreeG
    and the answer columns then sort numbers, not ids: the same candidates, predecessors and
    answer order as over the per-question queries, which sort the ids. Costs that tie on
    every sequence of a length (HashScorer(ties=True)) leave every choice to that order."""
    from cpr_neo4j.graph import records
    from cpr_neo4j.search.answers import answer_columns
    from cpr_neo4j.search.treeg import retrieve
    from tests.test_treeg_speed import HashScorer

    whole, nodes = preloaded
    sample = np.array(random.Random(1).sample(sorted(nodes), 3000), dtype=np.int64)
    want = sorted(whole._id[n] for n in sample.tolist())
    ranks = {}
    for dense, (limit, per_entity) in ((True, (1 << 40, 0)), (False, (0, 0))):
        source = whole.copy()
        source._ranks = None
        monkeypatch.setattr(adjacency_cache, "DENSE_RANKS", limit)
        monkeypatch.setattr(adjacency_cache, "DENSE_PER_ENTITY", per_entity)
        ranks[dense] = source.id_rank(sample)  # a table by node id, or sorted ids searched
        assert (source._ranks[0] is None) == dense
        with pytest.raises(RuntimeError):
            source.id_rank(np.array([max(nodes) + 10**6]))
    monkeypatch.undo()
    for got in (whole.id_rank(sample), *ranks.values()):
        assert [whole._id[n] for n in sample[np.argsort(got)].tolist()] == want
    assert whole.adjacency([], sample[:5].tolist(), True).rank is not None

    questions = [q for h in (1, 2, 3) for q in records.questions(store, "metaqa", "test", h)[:6]]
    ranked = 0
    for ties in (True, False):
        scorer = HashScorer(ties)
        for q in questions:
            cached = retrieve(whole.copy(), scorer, q.text, q.topics, 3, 8, 16)
            direct = retrieve(
                Neo4jNeighbours(store, "metaqa", CAP), scorer, q.text, q.topics, 3, 8, 16
            )
            assert cached.id_rank is not None and direct.id_rank is None
            for a, b in zip(cached.candidates(), direct.candidates(), strict=True):
                assert (a.path, a.cost, dict(a.ends)) == (b.path, b.cost, dict(b.ends))
            got, want = answer_columns(cached, 0.5), answer_columns(direct, 0.5)
            assert got.ids == want.ids and np.array_equal(got.surprisal, want.surprisal)
            assert np.array_equal(got.nodes, want.nodes)
            ranked += len(got)
    assert ranked > 1000
