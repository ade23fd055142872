"""The UaG-style hop-level baseline: open expansion, per-hop thresholds, union-bound coverage."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from fractions import Fraction

import numpy as np
import pytest

from cpr_neo4j.conformal.threshold import TOLERANCE, within
from cpr_neo4j.evaluation.hoplevel import (
    VARIANTS,
    calibration_scores,
    graph_caps,
    run_hop_level,
)
from cpr_neo4j.evaluation.hoplevel_thresholds import (
    HopRecord,
    apply,
    gold_scores,
    hop_thresholds,
    padded,
    score_counts,
    widen,
)
from cpr_neo4j.graph import records
from cpr_neo4j.graph.gold import gold_sequences
from cpr_neo4j.graph.neighbours import Neo4jNeighbours
from cpr_neo4j.model.encoder import shared_encoder
from cpr_neo4j.model.scorer import PathScorer
from cpr_neo4j.search.base import CachedNeighbours, Edge, InMemoryGraph, RelPath, Step
from cpr_neo4j.search.open_expansion import Caps, expand_open
from cpr_neo4j.training import questions as qsel


def table_cost(table: dict[tuple[str, ...], float], default: float = 10.0):
    """Cost per relation sequence written as step keys; unknown sequences cost default + len."""

    def cost(paths: list[RelPath]) -> np.ndarray:
        keys = [tuple(s.key() for s in p) for p in paths]
        return np.array([table.get(k, default + len(k)) for k in keys])

    return cost


def hash_cost(paths: list[RelPath]) -> np.ndarray:
    """A fixed pseudo-random cost in [0, 1) per sequence: a function of the sequence only."""
    return np.array([random.Random(repr(p)).random() for p in paths])


class Recording:
    """InMemoryGraph that remembers the ids of every round trip."""

    def __init__(self, graph: InMemoryGraph):
        self.graph = graph
        self.calls: list[list[str]] = []

    @property
    def round_trips(self) -> int:
        return self.graph.round_trips

    def neighbours(self, ids: Sequence[str]) -> dict[str, list[Edge]]:
        self.calls.append(list(ids))
        return self.graph.neighbours(ids)


def keys(path: RelPath) -> tuple[str, ...]:
    return tuple(s.key() for s in path)


# ---- open expansion ----------------------------------------------------------------------

TRAP = [("q", "a", "x"), ("x", "b", "y"), ("q", "c", "z"), ("z", "d", "w")]
TRAP_COSTS = {("a",): 0.5, ("a", "b"): 0.0, ("c",): 0.1, ("c", "d"): 0.2}


def test_a_prefix_above_its_threshold_is_never_expanded():
    source = Recording(InMemoryGraph(TRAP))
    run = expand_open(source, table_cost(TRAP_COSTS), ["q"], [0.3, 1.0])
    # ("a",) costs 0.5 > tau_1 = 0.3: its child ("a", "b") is never built, though it costs 0.0
    assert [keys(s.path) for s in run.sequences] == [("c", "d")]
    assert run.sequences[0].costs == (0.1, 0.2) and run.sequences[0].ends == {"w"}
    assert source.calls == [["q"], ["z"]]  # one round trip per hop; x is never fetched
    assert run.round_trips == 2 and not run.capped and run.bound == (None, None)
    # the hop-1 survivor is kept too: its ends answer where its branch ends
    assert [(keys(s.path), s.costs, s.ends) for s in run.nearer] == [(("c",), (0.1,), {"z"})]
    assert run.every == run.nearer + run.sequences

    loose = expand_open(InMemoryGraph(TRAP), table_cost(TRAP_COSTS), ["q"], [0.6, 1.0])
    assert [keys(s.path) for s in loose.sequences] == [("a", "b"), ("c", "d")]  # by hop-H cost
    assert [keys(s.path) for s in loose.nearer] == [("c",), ("a",)]  # by (hop, cost)
    assert loose.survivors([0.3, 1.0]) == list(run.every)


def random_graph(seed: int) -> tuple[list[tuple[str, str, str]], list[str]]:
    rng = random.Random(seed)
    ents = [f"e{i:02d}" for i in range(30)]
    triples = [(rng.choice(ents), rng.choice("rstu"), rng.choice(ents)) for _ in range(90)]
    return triples, rng.sample(ents, rng.choice([1, 2]))


@pytest.mark.parametrize("seed", range(8))
def test_filtering_the_loosest_run_equals_a_direct_run(seed):
    triples, topics = random_graph(seed)
    loose = expand_open(InMemoryGraph(triples), hash_cost, topics, [math.inf] * 3)
    assert not loose.capped and loose.sequences
    rng = random.Random(seed)
    for _ in range(10):
        taus = [rng.choice([0.3, 0.5, 0.7, 0.9, math.inf]) for _ in range(3)]
        direct = expand_open(InMemoryGraph(triples), hash_cost, topics, taus)
        assert loose.exact(taus)
        assert loose.survivors(taus) == list(direct.every)
    for s in loose.every:  # simple paths: a topic is never reached again
        assert s.ends and s.ends.isdisjoint(topics) and len(s.costs) == len(s.path)
    assert {len(s.path) for s in loose.every} == {1, 2, 3}
    with pytest.raises(ValueError):
        expand_open(InMemoryGraph(triples), hash_cost, topics, [0.5] * 3).survivors([0.6] * 3)


STAR = [("q", f"r{i}", f"e{i}") for i in range(6)] + [
    (f"e{i}", "s", f"f{i}{j}") for i in range(6) for j in range(3)
]
STAR_COSTS = {(f"r{i}",): i / 10 for i in range(6)} | {(f"r{i}", "s"): i / 10 for i in range(6)}


def test_the_sequence_cap_is_reported_and_bounds_exactness():
    cost = table_cost(STAR_COSTS)
    three = Caps(sequences=3, frontier=10**6)
    run = expand_open(InMemoryGraph(STAR), cost, ["q"], [1.0], three)
    assert [keys(s.path) for s in run.sequences] == [("r0",), ("r1",), ("r2",)]
    assert run.capped and run.cut == (0.3,)  # the first dropped child's cost
    assert run.bound == ("sequences",)
    # below the cut the shared run is still exact; at the cut it may not be
    assert run.exact([0.25]) and not run.exact([0.3])
    direct = expand_open(InMemoryGraph(STAR), cost, ["q"], [0.25], three)
    assert run.survivors([0.25]) == list(direct.sequences) and not direct.capped
    assert not expand_open(InMemoryGraph(STAR), cost, ["q"], [1.0]).capped


def test_the_frontier_cap_bounds_fetched_entities_not_the_last_hop():
    cost = table_cost(STAR_COSTS)
    source = Recording(InMemoryGraph(STAR))
    run = expand_open(source, cost, ["q"], [1.0, 1.0], Caps(sequences=10**6, frontier=2))
    assert source.calls[1] == ["e0", "e1"] and run.cut == (0.2, math.inf)
    assert run.bound == ("frontier", None)
    assert [keys(s.path) for s in run.sequences] == [("r0", "s"), ("r1", "s")]
    assert set().union(*(s.ends for s in run.sequences)) == {
        "f00",
        "f01",
        "f02",
        "f10",
        "f11",
        "f12",
    }


# ---- per-hop thresholds ------------------------------------------------------------------


def oracle(scores: np.ndarray, alpha: float, correction: str) -> list[float]:
    """Hand order statistic: k = ceil((n+1)(1 - alpha_t)) in exact rationals; +inf if k > n."""
    n, hops = scores.shape
    a = Fraction(str(alpha)) / (hops if correction == "bonferroni" else 1)
    k = math.ceil((n + 1) * (1 - a))
    return [sorted(scores[:, t])[k - 1] if k <= n else math.inf for t in range(hops)]


def test_hop_thresholds_by_hand():
    scores = np.stack([np.arange(1.0, 20.0), np.arange(19.0, 0.0, -1) * 10], axis=1)  # n = 19
    # Bonferroni: alpha_t = 0.05, k = ceil(20 * 0.95) = 19; uncorrected: k = ceil(20 * 0.9) = 18
    assert hop_thresholds(scores, 0.1, "bonferroni").tolist() == [19.0, 190.0]
    assert hop_thresholds(scores, 0.1, "none").tolist() == [18.0, 180.0]
    # n = 9: k = ceil(10 * 0.95) = 10 > 9 under Bonferroni, 9 uncorrected
    assert hop_thresholds(scores[:9], 0.1, "bonferroni").tolist() == [math.inf, math.inf]
    assert hop_thresholds(scores[:9], 0.1, "none").tolist() == [9.0, 190.0]
    with pytest.raises(ValueError):
        hop_thresholds(np.array([[1.0, math.nan]]), 0.1, "none")


@pytest.mark.parametrize("correction", ["bonferroni", "none"])
def test_hop_thresholds_match_the_order_statistic_oracle(correction):
    rng = np.random.default_rng(0)
    for n in (0, 1, 9, 19, 39, 100, 333):
        for hops in (1, 2, 3):
            scores = rng.normal(size=(n, hops))
            scores[rng.random((n, hops)) < 0.1] = math.inf  # questions without gold
            for alpha in (0.05, 0.1, 0.2, 0.3, 0.5):
                got = hop_thresholds(scores, alpha, correction).tolist()
                assert got == oracle(scores, alpha, correction), (n, hops, alpha)


def test_gold_scores_pick_one_canonical_sequence():
    seqs = [("A", (0.1, 0.9)), ("B", (0.5, 0.6)), ("C", (0.6, 0.6)), ("E", (0.0, 0.0, 0.0))]
    assert gold_scores(seqs, 2).tolist() == [0.5, 0.6]  # min over sequences of max prefix cost
    assert gold_scores([("B", (0.6, 0.6)), ("A", (0.5, 0.6))], 2).tolist() == [0.5, 0.6]
    # a gold answer nearer than H: its branch ends there, later hops ask nothing (-inf)
    assert gold_scores([*seqs, ("D", (0.55,))], 2).tolist() == [0.55, -math.inf]
    assert gold_scores([("D", (0.7,)), ("B", (0.5, 0.6))], 2).tolist() == [0.5, 0.6]
    assert gold_scores([("E", (0.0, 0.0, 0.0))], 2).tolist() == [math.inf, math.inf]  # too long
    assert gold_scores([("N", (math.nan, 0.0))], 2).tolist() == [math.inf, 0.0]  # NaN: +inf
    assert padded((0.1,), 3).tolist() == [0.1, -math.inf, -math.inf]
    with pytest.raises(ValueError):
        padded((), 2)
    scores = np.array([[0.1, -math.inf], [math.inf, math.inf], [0.2, 0.3]])
    assert score_counts(scores) == [
        {"scored": 2, "ended": 0, "no_gold": 1},
        {"scored": 1, "ended": 1, "no_gold": 1},
    ]


def test_apply_covers_through_surviving_sequences_only():
    rec = HopRecord(
        np.array([[0.1, 0.9], [0.2, 0.2], [0.5, 0.1]]),
        [frozenset({"g", "x"}), frozenset({"x", "y"}), frozenset({"z"})],
        frozenset({"g"}),
    )
    empty = HopRecord(np.zeros((0, 2)), [], frozenset({"g"}))
    covered, size = apply([rec, empty], np.array([0.3, 1.0]))
    assert covered.tolist() == [True, False] and size.tolist() == [3, 0]  # {g, x, y}
    covered, size = apply([rec, empty], np.array([0.3, 0.5]))
    assert covered.tolist() == [False, False] and size.tolist() == [2, 0]  # {x, y}
    # a hop-1 survivor (-inf at hop 2) answers at any tau_2, even -inf; the tolerance cut
    near = HopRecord.of([((0.1,), frozenset({"g"})), ((0.1, 0.9), frozenset({"x"}))], 2, {"g"})
    assert near.costs.tolist() == [[0.1, -math.inf], [0.1, 0.9]]
    assert apply([near], np.array([0.1, -math.inf]))[0].tolist() == [True]
    assert apply([near], widen([0.1 - 1e-7, 0.5]))[1].tolist() == [1]
    assert apply([near], np.array([0.1 - 1e-7, 0.5]))[1].tolist() == [1]  # within tolerance
    assert apply([near], np.array([0.09, 0.5]))[1].tolist() == [0]
    assert widen([math.inf, -math.inf, 0.0]).tolist() == [math.inf, -math.inf, TOLERANCE]


# ---- coverage -----------------------------------------------------------------------------


def record(scores: np.ndarray) -> HopRecord:
    """A gold sequence with the question's scores (if it has one) and a decoy that survives."""
    seqs = [(np.zeros(len(scores)), "decoy")]
    if not np.isposinf(scores).any():
        seqs.append((scores, "gold"))
    return HopRecord(
        np.array([c for c, _ in seqs]), [frozenset({e}) for _, e in seqs], frozenset({"gold"})
    )


def test_bonferroni_covers_and_uncorrected_does_not_on_exchangeable_scores():
    """Fresh exchangeable data per repeat; hop scores independent (the union bound's worst
    case), 5% of questions without a gold sequence (+inf at every hop), 20% whose gold is
    nearer than H (-inf past its length).

    Tolerance: a repeat's coverage has variance at most c(1-c)/m (binomial noise of its m
    test questions) plus the calibration wobble of the H thresholds, each a Beta-distributed
    conditional coverage with variance <= a_t(1-a_t)/(n+2); summing standard deviations
    over hops bounds the latter by (sqrt(H * alpha / n))^2. Repeats are independent, so the
    mean's standard error is at most sqrt((1/4m + H*alpha/n) / R) ~ 0.004 here; 3 SE = 0.013.
    """
    alpha, hops, n, m, repeats = 0.2, 3, 200, 200, 300
    se = math.sqrt((0.25 / m + hops * alpha / n) / repeats)
    rng = np.random.default_rng(7)
    cover = {"bonferroni": [], "none": []}
    for _ in range(repeats):
        s = rng.random((n + m, hops))
        for i in np.flatnonzero(rng.random(n + m) < 0.2):
            s[i, rng.integers(1, hops) :] = -math.inf
        s[rng.random(n + m) < 0.05] = math.inf
        recs = [record(row) for row in s[n:]]
        for corr in cover:
            covered, size = apply(recs, hop_thresholds(s[:n], alpha, corr))
            assert (size >= 1).all()
            cover[corr].append(covered.mean())
    bonf, none = np.mean(cover["bonferroni"]), np.mean(cover["none"])
    assert bonf >= 1 - alpha - 3 * se
    assert none >= 1 - hops * alpha - 3 * se  # the bound it does have
    assert none < 1 - alpha - 3 * se  # ~(1 - alpha)^H = 0.51: below target, as UaG's can be


# ---- gold sequences on the real MetaQA graph ------------------------------------------------


def walk(source, topics: list[str], path: RelPath) -> set[str]:
    """Entities reached from the topics along `path` (directions included), no shortcuts."""
    reached = set(topics)
    for step in path:
        nbrs = source.neighbours(sorted(reached))
        reached = {v for u in reached for s, v in nbrs.get(u, []) if s == step}
    return reached


def question(store, qid: str) -> qsel.Question:
    """One stored MetaQA question (loading a whole split to find it takes seconds)."""
    records, _ = store.query(
        "MATCH (q:Question {dataset: 'metaqa', id: $id}) "
        "RETURN q.text AS text, COLLECT { MATCH (q)-[:TOPIC]->(t) RETURN t.id } AS topics, "
        "COLLECT { MATCH (q)-[:ANSWER]->(a) RETURN a.id } AS answers",
        {"id": qid},
    )
    r = records[0]
    return qsel.Question(qid, r["text"], r["text"], None, r["topics"], r["answers"])


@pytest.mark.neo4j
def test_gold_sequences_on_metaqa(store, metaqa):
    """Through the search's own capped neighbour source: every sequence found reaches its
    gold answers along its steps, and the search misses nothing open expansion reaches."""
    source = CachedNeighbours(Neo4jNeighbours(store, "metaqa"))  # TreeG's source and cap
    qs = {i: question(store, i) for i in ("2hop-dev-1", "3hop-dev-3128")}
    q2 = qs["2hop-dev-1"]  # what are the languages spoken in the films directed by [Joel Zwick]
    got = gold_sequences(source, q2.topics, q2.answers, 2)
    directed_in = (Step("directed_by", False), Step("in_language", True))  # director <- film -> ...
    assert (directed_in, frozenset({"Greek"})) in got.sequences and not got.capped
    assert gold_sequences(source, q2.topics, q2.answers, 1).sequences == []  # not 1 hop away

    q3 = qs["3hop-dev-3128"]  # which person wrote the films acted by the actors in [Hamlet]
    got3 = gold_sequences(source, q3.topics, q3.answers, 3)
    paths = [p for p, _ in got3.sequences]
    assert paths == sorted(paths) and len(paths) == len(set(paths))
    cast = (Step("starred_actors", True), Step("starred_actors", False), Step("written_by", True))
    assert cast in paths
    assert any(len(p) < 3 for p in paths)  # some of Hamlet's own writers are gold too
    for q, found in ((q2, got), (q3, got3)):
        for path, answers in found.sequences:
            assert answers and answers <= set(q.answers) and answers.isdisjoint(q.topics)
            assert answers <= walk(source, q.topics, path)
    # complete: the exhaustive open expansion (no threshold, no cap) reaches no other gold
    for q, hops, found in ((q2, 2, got), (q3, 3, got3)):
        run = expand_open(source, lambda p: np.zeros(len(p)), q.topics, [math.inf] * hops)
        gold = set(q.answers)
        assert dict(found.sequences) == {s.path: s.ends & gold for s in run.every if s.ends & gold}


@pytest.mark.neo4j
def test_hop_level_stage_on_metaqa(store, metaqa):
    """Both variants from one expansion per question; a test question whose canonical gold
    sequence passes every hop's threshold is covered (the step the union bound rests on)."""
    qs = sorted(qsel.load(store, "metaqa", "dev", 2), key=lambda q: q.id)[:90]
    cal, test = qs[:60], qs[60:]
    scorer = PathScorer(shared_encoder(), records.relation_text(store, "metaqa"))
    source = CachedNeighbours(Neo4jNeighbours(store, "metaqa"))
    caps = graph_caps(store, "metaqa", 2)
    assert caps == Caps(sequences=18**2, frontier=42_797)  # 9 relations, every entity
    ticks = []
    out = run_hop_level(
        store, "metaqa", scorer, cal, test, 2, [0.2, 0.4], source, tick=lambda: ticks.append(1)
    )
    assert len(ticks) == len(cal) + len(test) and out["capped"] == 0
    assert out["round_trips"] <= 2 * len(test)  # one per hop and question, fewer when cached
    d = out["diagnostics"]
    assert d["caps"] == {
        "sequences": 324,
        "frontier": 42_797,
        "sized_to_graph": True,
        "fanout": 2000,
    }
    assert d["calibration"]["questions"] == len(cal) and d["test"]["questions"] == len(test)
    assert d["calibration"]["with_gold"] >= 0.95 * len(cal)
    assert (
        d["calibration"]["cap_bound"]["sequences"] == d["calibration"]["cap_bound"]["frontier"] == 0
    )
    assert d["test"]["cap_bound"] == {"sequences": [0, 0], "frontier": [0, 0]}
    assert d["test"]["reached_gold"] <= d["test"]["gold_reachable"] <= len(test)
    assert len(out["notes"]) == 4 and "fan-out cap (2000 per" in out["notes"][3]
    bonf, plain = (out["results"][v] for v in VARIANTS)
    mine = calibration_scores(source, scorer, test, 2).scores
    for a in (0.2, 0.4):
        assert plain[a]["taus"] == hop_thresholds(out["cal_scores"], a, "none").tolist()
        assert all(b >= u for b, u in zip(bonf[a]["taus"], plain[a]["taus"], strict=True))
        assert out["loosest_taus"] == bonf[0.2]["taus"]
        for row in (bonf[a], plain[a]):
            assert row["attainable"] and np.isfinite(row["taus"]).all()
            assert row["covered"].shape == row["size"].shape == (len(test),)
            assert row["inexact"] == 0 and (row["size"][row["covered"]] >= 1).all()
            assert row["covered"][within(mine, np.array(row["taus"])).all(axis=1)].all()
    # the same rows when forked workers share the questions (their own drivers and caches)
    shared = run_hop_level(
        store,
        "metaqa",
        scorer,
        cal,
        test,
        2,
        [0.2, 0.4],
        CachedNeighbours(Neo4jNeighbours(store, "metaqa")),
        workers=2,
        open_source=lambda mine: CachedNeighbours(Neo4jNeighbours(mine, "metaqa")),
    )
    assert np.array_equal(shared["cal_scores"], out["cal_scores"])
    assert shared["diagnostics"] == out["diagnostics"]
    for v in VARIANTS:
        for a in (0.2, 0.4):
            got, want = shared["results"][v][a], out["results"][v][a]
            assert got["taus"] == want["taus"] and got["inexact"] == want["inexact"]
            assert np.array_equal(got["covered"], want["covered"])
            assert np.array_equal(got["size"], want["size"])
