"""TreeG over a hand-made in-memory graph with a lookup-table scorer."""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import pytest

from cpr_neo4j.search.adjacency_cache import CachedAdjacency
from cpr_neo4j.search.base import Edge, InMemoryGraph, RelPath, Step
from cpr_neo4j.search.frontier import DictAdjacency
from cpr_neo4j.search.treeg import Job, Retrieval, retrieve, retrieve_many, retrieve_naive


class TableScorer:
    """Cost per relation sequence, written as step keys ("~starred_actors", ...)."""

    model_id = "table"

    def __init__(self, table: dict[tuple[str, ...], float], default: float = 10.0):
        self.table = table
        self.default = default
        self.calls = 0

    def question(self, masked_text: str) -> str:
        return masked_text

    def score(self, ctx: object, paths: Sequence[RelPath]) -> np.ndarray:
        self.calls += 1
        keys = [tuple(s.key() for s in p) for p in paths]
        return np.array([self.table.get(k, self.default + len(k)) for k in keys])

    def similarity(self, texts_a: list[str], texts_b: list[str]) -> np.ndarray:
        return np.array([[float(a == b) for b in texts_b] for a in texts_a])


MOVIES = [
    ("m1", "starred_actors", "tom"),
    ("m2", "starred_actors", "tom"),
    ("m1", "starred_actors", "ann"),
    ("m1", "directed_by", "d1"),
    ("m2", "directed_by", "d2"),
    ("m1", "has_genre", "drama"),
    ("m3", "has_genre", "drama"),
    ("m3", "directed_by", "d3"),
    ("m4", "directed_by", "d1"),
]
MOVIE_COSTS = {
    ("~starred_actors",): 0.0,
    ("~starred_actors", "directed_by"): 0.5,
    ("~starred_actors", "has_genre"): 0.7,
    ("~starred_actors", "directed_by", "~directed_by"): 0.9,
    ("~starred_actors", "has_genre", "~has_genre"): 1.0,
}


def _run(hops: int = 3, naive: bool = False, **kw) -> tuple[Retrieval, InMemoryGraph]:
    graph = InMemoryGraph(MOVIES)
    fn = retrieve_naive if naive else retrieve
    return fn(graph, TableScorer(MOVIE_COSTS), None, ["tom"], hops, **kw), graph


def _is_edge(graph: InMemoryGraph, a: str, step: Step, b: str) -> bool:
    return (step, b) in graph.neighbours([a])[a]


def test_one_round_trip_per_hop_and_candidates_at_every_hop():
    r, graph = _run(hops=3)
    assert graph.round_trips == 3 == r.round_trips
    assert len(r.per_hop) == 3 and all(r.per_hop)
    costs = r.answer_costs()
    assert costs["m1"] == costs["m2"] == 0.0  # hop-1 answers survive into the candidate set
    assert costs["d1"] == costs["d2"] == 0.5  # hop-2
    assert costs["m4"] == 0.9  # hop-3: d1's other film
    assert "tom" not in costs  # topic never answers itself


def test_simple_paths_never_revisit_topic_or_chain():
    r, _ = _run(hops=3)
    for hop in r.per_hop:
        for c in hop:
            assert "tom" not in c.ends
    # tom -> m1 -> d1 -> m1 would repeat m1: ~directed_by from d1 reaches only m4
    seq = (Step("starred_actors", False), Step("directed_by", True), Step("directed_by", False))
    third = {c.path: c for c in r.per_hop[2]}[seq]
    assert set(third.ends) == {"m4"}
    # the genre route reaches m3 from drama but not m1 (its own predecessor chain)
    genre = (Step("starred_actors", False), Step("has_genre", True), Step("has_genre", False))
    assert set({c.path: c for c in r.per_hop[2]}[genre].ends) == {"m3"}


def test_witness_paths_are_valid_graph_paths():
    r, graph = _run(hops=3)
    for entity, cost in r.answer_costs().items():
        path, ents, wcost = r.witness(entity)
        assert wcost == cost and ents[0] == "tom" and ents[-1] == entity
        assert len(ents) == len(path) + 1 == len(set(ents))  # simple
        for a, step, b in zip(ents, path, ents[1:], strict=False):
            assert _is_edge(graph, a, step, b)
    assert r.witness("d1")[1] == ["tom", "m1", "d1"]
    with pytest.raises(KeyError):
        r.witness("nowhere")


def test_naive_variant_same_result_more_round_trips():
    fast, g1 = _run(hops=3)
    slow, g2 = _run(hops=3, naive=True)
    assert fast.per_hop == slow.per_hop
    assert g2.round_trips > g1.round_trips == 3


class ShuffledGraph(InMemoryGraph):
    """Neighbour lists in random order, as a database may return them."""

    def __init__(self, triples, seed: int):
        super().__init__(triples)
        self.rng = random.Random(seed)

    def neighbours(self, ids: Sequence[str]) -> dict[str, list[Edge]]:
        out = super().neighbours(ids)
        for edges in out.values():
            self.rng.shuffle(edges)
        return dict(sorted(out.items(), key=lambda _: self.rng.random()))


def test_deterministic_under_edge_order_and_ties():
    runs = [
        retrieve(ShuffledGraph(MOVIES, s), TableScorer({}, 1.0), None, ["tom"], 3, active=2)
        for s in range(5)
    ]
    assert all(r.per_hop == runs[0].per_hop for r in runs)
    # every path costs 1.0 + length: ties break on the relation sequence itself
    first = runs[0].per_hop[0]
    assert [c.path for c in first] == sorted(c.path for c in first)


def test_top_b_per_parent_and_top_a_global():
    r, _ = _run(hops=2, beam_width=1)
    assert [len(h) for h in r.per_hop] == [1, 1]  # one parent, one child step each hop
    assert r.per_hop[1][0].path == (Step("starred_actors", False), Step("directed_by", True))
    r, _ = _run(hops=2, active=2)
    assert all(len(h) <= 2 for h in r.per_hop)
    assert [c.cost for c in r.per_hop[1]] == sorted(c.cost for c in r.per_hop[1])


def _entity_beam(graph, scorer, topic: str, hops: int, active: int) -> set[str]:
    """The failure mode to avoid: a beam over entity paths, ranked by relation-sequence cost."""
    beam: list[tuple[RelPath, tuple[str, ...]]] = [((), (topic,))]
    reached: set[str] = set()
    for _ in range(hops):
        nbrs = graph.neighbours(sorted({ents[-1] for _, ents in beam}))
        kids = [
            (path + (step,), ents + (v,))
            for path, ents in beam
            for step, v in nbrs.get(ents[-1], [])
            if v not in ents
        ]
        costs = scorer.score(None, [p for p, _ in kids])
        order = sorted(range(len(kids)), key=lambda i: (costs[i], kids[i]))[:active]
        beam = [kids[i] for i in order]
        reached |= {ents[-1] for _, ents in beam}
    return reached


def test_sequence_beam_keeps_recall_where_entity_beam_floods():
    hub = [("t", "tie", f"x{i:03d}") for i in range(100)]
    hub += [(f"x{i:03d}", "tie2", f"y{i:03d}") for i in range(100)]
    triples = hub + [("t", "good", "g"), ("g", "good2", "answer")]
    costs = {("tie",): 0.0, ("good",): 1.0, ("tie", "tie2"): 0.2, ("good", "good2"): 0.3}
    scorer = TableScorer(costs)
    graph = InMemoryGraph(triples)
    assert "answer" not in _entity_beam(graph, scorer, "t", hops=2, active=4)
    r = retrieve(graph, scorer, None, ["t"], hops=2, active=2)
    assert r.answer_costs()["answer"] == 0.3
    assert len(r.answer_costs()) == 202  # 100 x, g, 100 y, answer: nothing lost
    assert r.witness("answer")[1] == ["t", "g", "answer"]


def test_hint_bonus_shifts_ranking():
    bonus = {"has_genre": 1.0}

    def hint(paths):
        return np.array([sum(bonus.get(s.relation, 0.0) for s in p) for p in paths])

    r, _ = _run(hops=2, active=2, hint_bonus=hint, hint_beta=0.5)
    second = [c.path[-1].relation for c in r.per_hop[1]]
    assert second[0] == "has_genre"  # 0.7 - 0.5 beats directed_by's 0.5
    assert r.per_hop[1][0].cost == pytest.approx(0.2)


def test_missing_topic_and_bad_args():
    r = retrieve(InMemoryGraph(MOVIES), TableScorer({}), None, ["ghost"], 2)
    assert r.answer_costs() == {} and r.per_hop == [[], []]
    with pytest.raises(ValueError):
        retrieve(InMemoryGraph(MOVIES), TableScorer({}), None, ["tom"], 0)


class ColumnGraph(InMemoryGraph):
    """An in-memory graph that also answers TreeG's columnar `adjacency` (by id or code)."""

    def __init__(self, triples):
        super().__init__(triples)
        self._columns = DictAdjacency(super().neighbours)

    def adjacency(self, ids, nodes, names):
        return self._columns.adjacency(ids, nodes, names)


def test_cross_question_cache_gives_the_same_retrieval_with_fewer_round_trips():
    plain, cached = ColumnGraph(MOVIES), CachedAdjacency(ColumnGraph(MOVIES))
    for topic in ["tom", "drama", "d1", "ghost", "tom"]:
        want = retrieve(plain, TableScorer(MOVIE_COSTS), None, [topic], 3)
        got = retrieve(cached, TableScorer(MOVIE_COSTS), None, [topic], 3)
        assert got.per_hop == want.per_hop
    assert cached.round_trips < plain.round_trips
    trips = cached.round_trips
    again = retrieve(cached, TableScorer(MOVIE_COSTS), None, ["tom"], 3)
    assert cached.round_trips == trips and again.round_trips == 0  # all cached
    ids = ["tom", "m1", "ghost", "drama"]
    assert cached.neighbours(ids) == plain.neighbours(ids)


def _genre_hint(paths: Sequence[RelPath]) -> np.ndarray:
    return np.array([sum(s.relation == "has_genre" for s in p) for p in paths], dtype=float)


BATCH = [  # (topics, hint bonus, beta): overlapping frontiers, a ghost, a repeat, a hint
    (["tom"], None, 0.0),
    (["drama"], None, 0.0),
    (["d1", "ghost"], None, 0.0),
    (["ghost"], None, 0.0),
    (["tom"], _genre_hint, 0.5),
    (["m3", "ann"], None, 0.0),
    (["tom"], None, 0.0),
]


@pytest.mark.parametrize("graph_type", [InMemoryGraph, ColumnGraph])
@pytest.mark.parametrize("active", [32, 2])
def test_retrieve_many_equals_retrieve_with_one_round_trip_per_hop(graph_type, active):
    scorer, hops = TableScorer(MOVIE_COSTS), 3
    want = []
    for topics, bonus, beta in BATCH:
        alone = graph_type(MOVIES)
        want.append(retrieve(alone, scorer, None, topics, hops, 2, active, bonus, beta))
    graph = graph_type(MOVIES)
    jobs = [Job(None, topics, bonus, beta) for topics, bonus, beta in BATCH]
    got = retrieve_many(graph, scorer, jobs, hops, beam_width=2, active=active)
    assert graph.round_trips == hops  # for the whole batch, not per question
    assert got == want  # topics, candidates, costs and order, round trips taken part in
    assert [r.round_trips for r in got] == [3, 3, 3, 1, 3, 3, 3]
    for g, w in zip(got, want, strict=True):
        assert g.ranked_answers() == w.ranked_answers()
        assert [g.witness(e) for e, _ in g.ranked_answers()] == [
            w.witness(e) for e, _ in w.ranked_answers()
        ]
    assert retrieve_many(graph, scorer, [], hops) == []
    with pytest.raises(ValueError):
        retrieve_many(graph, scorer, jobs, 0)
