"""Columnar TreeG: the same candidates as the string-set version it replaced, exactly H
round trips, and a deterministic hub-aware fan-out cap (per type and direction)."""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence

import numpy as np
import pytest

from cpr_neo4j.conformal.scores import centred, from_spec
from cpr_neo4j.conformal.threshold import nonconformity
from cpr_neo4j.graph.ingest import ingest
from cpr_neo4j.graph.neighbours import Neo4jNeighbours
from cpr_neo4j.search.answers import answer_columns
from cpr_neo4j.search.base import InMemoryGraph, RelPath, Step
from cpr_neo4j.search.treeg import Retrieval, retrieve
from cpr_neo4j.training import questions as qsel
from tests.conftest import drop_dataset
from tests.test_ingest import _dataset
from tests.treeg_v1 import NeighboursV1, retrieve_v1


class HashScorer:
    """A fixed pseudo-random cost per relation sequence; `ties` makes costs depend on the
    length only, so every selection is decided by the tie-break on the sequence."""

    model_id = "hash"

    def __init__(self, ties: bool = False):
        self.ties = ties

    def question(self, masked_text: str) -> str:
        return masked_text

    def score(self, ctx: object, paths: Sequence[RelPath]) -> np.ndarray:
        if self.ties:
            return np.array([float(len(p)) for p in paths])
        keys = ["|".join(s.key() for s in p) + str(ctx) for p in paths]
        return np.array([int(hashlib.md5(k.encode()).hexdigest()[:8], 16) / 2**32 for k in keys])


def _random_graph(seed: int) -> list[tuple[str, str, str]]:
    rng = random.Random(seed)
    ents = [f"e{i:02d}" for i in range(30)]
    rels = ["a", "b", "c", "d"]
    return [(rng.choice(ents), rng.choice(rels), rng.choice(ents)) for _ in range(90)]


@pytest.mark.parametrize("seed", range(12))
def test_same_as_v1_on_random_graphs_with_cycles(seed):
    triples = _random_graph(seed)
    rng = random.Random(seed)
    topics = rng.sample(sorted({h for h, _, _ in triples}), 2)
    for ties in (False, True):
        for hops, b, a in ((1, 32, 32), (2, 3, 5), (3, 4, 6), (3, 32, 32)):
            new_g, old_g = InMemoryGraph(triples), InMemoryGraph(triples)
            scorer = HashScorer(ties)
            new = retrieve(new_g, scorer, "q", topics, hops, beam_width=b, active=a)
            old = retrieve_v1(old_g, scorer, "q", topics, hops, beam_width=b, active=a)
            assert new.per_hop == old.per_hop
            assert new_g.round_trips == old_g.round_trips == new.round_trips


@pytest.fixture(scope="module")
def metaqa_ready(request, store):
    info = store.read("dataset_info", dataset="metaqa")
    if not (info and info[0]["d"].get("complete")):
        request.getfixturevalue("metaqa")  # ingest it (session fixture)
    return store


@pytest.mark.neo4j
@pytest.mark.parametrize("hops", [1, 2, pytest.param(3, marks=pytest.mark.slow)])
def test_same_candidates_as_v1_on_metaqa(metaqa_ready, hops):
    """On MetaQA the old per-entity cap and the new per-(type, direction) cap keep the same
    edges (only Drama and Comedy exceed 2,000 edges, each with one relation type), so the
    candidates must be identical for every question, not just where no cap binds."""
    store = metaqa_ready
    qs = qsel.load(store, "metaqa", "test", hops)[:: {1: 400, 2: 600, 3: 600}[hops]][:25]
    for ties in (False, True):
        scorer = HashScorer(ties)
        for q in qs:
            new_src, old_src = Neo4jNeighbours(store, "metaqa"), NeighboursV1(store, "metaqa")
            new = retrieve(new_src, scorer, q.masked, q.topics, hops)
            old = retrieve_v1(old_src, scorer, q.masked, q.topics, hops)
            assert new.per_hop == old.per_hop, q.id
            assert new_src.round_trips == old_src.round_trips, q.id
            _same_eval_numbers(q, new, old)
            if all(new.per_hop[:-1]):  # a hop that keeps nothing leaves nothing to fetch
                assert new_src.round_trips == hops, q.id


def _same_eval_numbers(q: qsel.Question, new: Retrieval, old: Retrieval) -> None:
    """What `cpr calibrate`, `ask` and `eval` read of the new retrieval (its answer columns,
    search/answers.py, and the score families over them, conformal/scores.py) gives the
    numbers the old dict records give: same answers, same (cost, id) ranking, same scores
    and the same S (the best gold answer's score)."""
    ids, costs = new.answer_columns()
    old_costs = old.answer_costs()
    assert dict(zip(ids, costs.tolist(), strict=True)) == old_costs, q.id
    cols = answer_columns(new, 0.5)
    ranked = old.ranked_answers()
    assert cols.ids == [a for a, _ in ranked], q.id  # rank = (cost, id)
    assert cols.cost.tolist() == [c for _, c in ranked], q.id
    assert (cols.surprisal >= 0).all() and len(cols.length) == len(cols), q.id
    gold = frozenset(q.answers)
    for centre in (0.0, 0.97, 1.0):
        spec = {"family": "centred", "centre": centre}
        got = from_spec(np.zeros(len(cols), dtype=np.int64), cols.cost, spec)
        want = centred(np.array([c for _, c in ranked]), centre)
        assert np.array_equal(got, want), (q.id, centre)
        best = dict(zip(cols.ids, got.tolist(), strict=True))
        old_best = dict(zip([a for a, _ in ranked], want.tolist(), strict=True))
        assert nonconformity(best, gold) == nonconformity(old_best, gold), (q.id, centre)


HUB = [("hub", "likes", f"x{i}") for i in (5, 1, 4, 2, 3)] + [
    (f"y{i}", "likes", "hub") for i in (9, 7, 8)
] + [(f"z{i}", "knows", "hub") for i in (2, 1, 3)]  # fmt: skip


@pytest.mark.neo4j
def test_fanout_cap_is_per_type_and_direction_and_store_order_free(store):
    names = ["test_cap_a", "test_cap_b"]
    try:
        for name, triples in zip(names, (HUB, HUB[::-1]), strict=True):
            ingest(store, _dataset(triples, name))
        got = [Neo4jNeighbours(store, n, fanout_cap=2).neighbours(["hub"])["hub"] for n in names]
        assert (
            got[0]
            == got[1]
            == [
                (Step("knows", False), "z1"),
                (Step("knows", False), "z2"),
                (Step("likes", False), "y7"),
                (Step("likes", False), "y8"),
                (Step("likes", True), "x1"),
                (Step("likes", True), "x2"),
            ]
        )
        adj = Neo4jNeighbours(store, names[0], fanout_cap=2).adjacency(["hub"], [], names=True)
        assert adj.steps == sorted(adj.steps) and len(adj.dst) == 6
        assert sorted(adj.names.values()) == ["x1", "x2", "y7", "y8", "z1", "z2"]
        uncapped = Neo4jNeighbours(store, names[0]).neighbours(["hub"])["hub"]
        assert len(uncapped) == len(HUB)
    finally:
        for n in names:
            drop_dataset(store, n)


@pytest.mark.neo4j
def test_by_node_hop_names_the_frontier_and_counts_one_round_trip(metaqa_ready):
    src = Neo4jNeighbours(metaqa_ready, "metaqa")
    first = src.adjacency(["Ridley Scott"], [], names=False)
    assert first.names == {} and list(first.frontier.values()) == ["Ridley Scott"]
    films = np.unique(first.dst).tolist()
    second = src.adjacency([], films, names=True)
    assert set(second.frontier) == set(films) and "Alien" in second.frontier.values()
    assert "Ridley Scott" in second.names.values()
    assert src.round_trips == 2


@pytest.mark.neo4j
def test_hub_path_and_flat_pass_give_the_same_rows_when_no_cap_binds(metaqa_ready):
    """An entity with 2 * degree > cap is expanded on the sorted per-entity path, the rest in
    one flat pass: with a cap above every group's size both must return the same rows."""
    rows, _ = metaqa_ready.query(
        "MATCH (e:Entity {dataset: 'metaqa'}) WITH e, COUNT { (e)--() } AS d "
        "WHERE 40 <= d <= 60 RETURN e.id AS id ORDER BY id LIMIT 30"
    )
    ids = [r["id"] for r in rows]
    assert len(ids) == 30
    flat = Neo4jNeighbours(metaqa_ready, "metaqa", fanout_cap=1_000)  # 2 * 60 <= 1,000
    hub = Neo4jNeighbours(metaqa_ready, "metaqa", fanout_cap=61)  # 2 * 40 > 61 > any group
    assert flat.neighbours(ids) == hub.neighbours(ids)


@pytest.mark.parametrize("seed", range(4))
def test_packed_order_sorts_as_lexsort(seed):
    """expand_nodes orders (beam, step, neighbour, predecessor rank) rows with one sort of
    packed keys when their bits fit, else np.lexsort: the same order of distinct rows."""
    from cpr_neo4j.search.frontier import _order

    rng = np.random.default_rng(seed)
    n = 5000
    small = [rng.integers(0, hi, n) for hi in (7, 18, 4_000_000, 4100)]
    wide = [rng.integers(0, hi, n) for hi in (7, 18, 2**40, 2**20)]  # 66 bits: lexsort
    for keys in (small, wide, [k[:0] for k in small]):
        rows = np.stack(keys, axis=1)
        got = rows[_order(*keys)]
        want = rows[np.lexsort(keys[::-1])]
        assert np.array_equal(got, want)
