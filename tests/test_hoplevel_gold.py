"""Gold sequences through the search's neighbour source, and the hop-level stage on a small
in-memory graph (no server): what the gold search finds is what open expansion reaches."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

import numpy as np
import pytest

from cpr_neo4j.conformal.threshold import within
from cpr_neo4j.evaluation.hoplevel import VARIANTS, calibration_scores, run_hop_level
from cpr_neo4j.evaluation.hoplevel_thresholds import hop_thresholds
from cpr_neo4j.graph.gold import fanout_cap_of, gold_sequences
from cpr_neo4j.search.base import CachedNeighbours, Edge, InMemoryGraph, RelPath, Step
from cpr_neo4j.search.open_expansion import UNCAPPED, Caps, expand_open
from cpr_neo4j.training.questions import Question


def hash_cost(paths: list[RelPath]) -> np.ndarray:
    """A fixed pseudo-random cost in [0, 1) per sequence: a function of the sequence only."""
    return np.array([random.Random(repr(p)).random() for p in paths])


class Hidden:
    """A source that does not say its fan-out cap (so the gold search may not prune)."""

    def __init__(self, graph: InMemoryGraph):
        self.graph = graph
        self.asked: list[str] = []

    @property
    def round_trips(self) -> int:
        return self.graph.round_trips

    def neighbours(self, ids: Sequence[str]) -> dict[str, list[Edge]]:
        self.asked += list(ids)
        return self.graph.neighbours(ids)


class Asked(Hidden):
    """The same, saying its cap (None: complete lists), so the search prunes."""

    @property
    def fanout_cap(self):
        return self.graph.fanout_cap


def graph(seed: int, n: int = 40, m: int = 120) -> tuple[list[tuple[str, str, str]], list[str]]:
    rng = random.Random(seed)
    ents = [f"e{i:02d}" for i in range(n)]
    hub = ents[0]  # a hub, so a small fan-out cap cuts its list
    triples = [(rng.choice(ents), rng.choice("rstu"), rng.choice(ents)) for _ in range(m)]
    triples += [(e, "h", hub) for e in rng.sample(ents[1:], n // 2)]
    return triples, ents


def brute_force(source, topics, gold, hops, topic_answers=False) -> dict:
    """Every sequence open expansion keeps at +inf with no cap, with the gold it reaches."""
    run = expand_open(source, hash_cost, topics, [math.inf] * hops, UNCAPPED, topic_answers)
    return {s.path: s.ends & gold for s in run.every if s.ends & gold}


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("cap", [None, 4])
@pytest.mark.parametrize("topic_answers", [False, True])
def test_gold_search_finds_exactly_what_expansion_reaches(seed, cap, topic_answers):
    triples, ents = graph(seed)
    rng = random.Random(seed)
    topics = rng.sample(ents, rng.choice([1, 2]))
    answers = rng.sample(ents, rng.choice([1, 3, 8])) + topics[:1]  # a topic among the gold
    gold = set(answers) if topic_answers else set(answers) - set(topics)
    for hops in (1, 2, 3):
        want = brute_force(InMemoryGraph(triples, cap), topics, gold, hops, topic_answers)
        pruned, plain = Asked(InMemoryGraph(triples, cap)), Hidden(InMemoryGraph(triples, cap))
        got = gold_sequences(pruned, topics, answers, hops, topic_answers)
        assert dict(got.sequences) == want and not got.capped
        assert [p for p, _ in got.sequences] == sorted(want)  # by sequence, lengths 1..hops
        assert dict(gold_sequences(plain, topics, answers, hops, topic_answers).sequences) == want


def test_the_source_cap_is_found_through_wrappers():
    g = InMemoryGraph([("a", "r", "b")], fanout_cap=7)
    assert fanout_cap_of(g) == (True, 7)
    assert fanout_cap_of(CachedNeighbours(g)) == (True, 7)
    assert fanout_cap_of(Hidden(g)) == (False, None)
    assert fanout_cap_of(InMemoryGraph([])) == (True, None)


def test_gold_search_caps_bind_visibly_and_keep_the_cheapest():
    star = [("q", f"r{i}", f"e{i}") for i in range(6)] + [(f"e{i}", "s", "g") for i in range(6)]
    want = brute_force(InMemoryGraph(star), ["q"], {"g"}, 2)
    assert len(want) == 6
    capped = gold_sequences(
        InMemoryGraph(star), ["q"], ["g"], 2, caps=Caps(sequences=2, frontier=10), cost=hash_cost
    )
    assert capped.bound == {"sequences": 1, "frontier": 0} and capped.capped
    assert len(capped.sequences) == 2 and dict(capped.sequences).items() <= want.items()
    # the kept ones are the two cheapest hop-1 steps (by the largest prefix cost)
    first = sorted((f"r{i}" for i in range(6)), key=lambda r: hash_cost([(Step(r, True),)])[0])
    assert sorted(p[0].relation for p, _ in capped.sequences) == sorted(first[:2])
    assert not capped.fanout_cut
    # a fan-out cap of 3 cuts q's list of 6 (InMemoryGraph keeps the first 3 edges)
    cut = gold_sequences(InMemoryGraph(star, fanout_cap=3), ["q"], ["g"], 2)
    assert cut.fanout_cut and not cut.capped and len(cut.sequences) == 3
    fetched = gold_sequences(InMemoryGraph(star), ["q"], ["g"], 2, caps=Caps(10, 3))
    assert fetched.bound == {"sequences": 0, "frontier": 1} and len(fetched.sequences) == 3


class FakeScorer:
    """VSemScorer over hash_cost: a context per text, costs a function of the sequence."""

    def questions(self, masked_texts):
        return list(masked_texts)

    def v_sem(self, ctx, paths):
        return hash_cost(list(paths))


def questions(ents: list[str], seed: int, n: int) -> list[Question]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        topics = rng.sample(ents, 1)
        out.append(Question(f"q{i}", "t", "t", None, topics, rng.sample(ents, 3)))
    return out


def test_the_stage_on_a_small_graph_reports_why():
    triples, ents = graph(3, n=60, m=150)
    source = CachedNeighbours(InMemoryGraph(triples))
    qs = questions(ents, 3, 120)
    cal, test = qs[:80], qs[80:]
    alphas = [0.01, 0.2, 0.5]  # 0.01: k > n under Bonferroni, so +inf (unattainable)
    caps = Caps(sequences=10**6, frontier=10**6)
    out = run_hop_level(None, "x", FakeScorer(), cal, test, 3, alphas, source, caps=caps,
                        topic_answers=False)  # fmt: skip
    d = out["diagnostics"]
    got = calibration_scores(source, FakeScorer(), cal, 3)
    assert np.array_equal(out["cal_scores"], got.scores)
    assert d["calibration"]["with_gold"] == sum(n > 0 for n in got.lengths) > 60
    assert d["calibration"]["with_gold"] + d["calibration"]["no_gold"] == len(cal)
    assert sum(d["calibration"]["gold_length"].values()) == d["calibration"]["with_gold"]
    assert d["calibration"]["per_hop"][0]["scored"] == d["calibration"]["with_gold"]
    assert d["test"]["capped"] == 0 and d["caps"] == {
        "sequences": 10**6,
        "frontier": 10**6,
        "sized_to_graph": False,
        "fanout": None,  # CachedNeighbours over an uncapped InMemoryGraph: complete lists
    }
    mine = calibration_scores(source, FakeScorer(), test, 3)
    reach = np.array([n > 0 for n in mine.lengths])
    assert d["test"]["gold_reachable"] == reach.sum()
    assert d["test"]["reached_gold"] <= d["test"]["gold_reachable"]
    for v, corr in VARIANTS.items():
        for a in alphas:
            row, taus = out["results"][v][a], hop_thresholds(out["cal_scores"], a, corr)
            assert row["taus"] == taus.tolist()
            if not row["attainable"]:  # +inf: covers where gold is reachable; size unknown
                assert np.isposinf(taus).all() and np.isnan(row["size"]).all()
                assert np.array_equal(row["covered"], reach)
                continue
            ok = within(mine.scores, taus).all(axis=1)
            assert row["covered"][ok].all()  # the union bound's step
            assert (row["size"][row["covered"]] >= 1).all() and row["inexact"] == 0
    assert not out["results"]["UaG hop-level, Bonferroni (V_sem)"][0.01]["attainable"]
    assert any("canonical gold sequence" in n for n in out["notes"])
