"""PUCT collection: selection rule, Beta priors, gold BFS, pair invariants, determinism.

A fake semantic scorer keeps these tests free of the sentence encoder.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import numpy as np
import pytest

from cpr_neo4j.search.base import Edge, InMemoryGraph, RelPath, Step
from cpr_neo4j.training.puct import (
    EntityPath,
    PuctCollector,
    PuctTree,
    RelationPriors,
    shortest_paths,
    softmax,
)

F = Step  # Step(rel, True) forward, Step(rel, False) reverse

TRIPLES = [
    ("M1", "directed_by", "D1"),
    ("M2", "directed_by", "D1"),
    ("M3", "directed_by", "D2"),
    ("M4", "directed_by", "D3"),
    ("M1", "starred_actors", "A1"),
    ("M3", "starred_actors", "A1"),
    ("M2", "starred_actors", "A2"),
    ("M4", "starred_actors", "A2"),
    ("M1", "starred_actors", "A2"),
    ("M1", "written_by", "W1"),
    ("M3", "written_by", "W1"),
    ("M1", "has_genre", "Drama"),
    ("M2", "has_genre", "Drama"),
    ("M3", "has_genre", "Comedy"),
    ("M1", "release_year", "1999"),
    ("M3", "release_year", "2001"),
]
# "who directed the movies starred by [A1]": A1 -~starred_actors-> M1/M3 -directed_by-> D1/D2
QUESTION = dict(topics=["A1"], answers={"D1", "D2"}, masked_question="who directed ENT", hops=2)


class FakeScorer:
    """V_sem = -(sum of per-step-key similarities): likes directing and acting steps."""

    SIM = {"directed_by": 0.6, "~starred_actors": 0.4, "starred_actors": 0.2}

    def question(self, masked_text: str) -> str:
        return masked_text

    def v_sem(self, ctx: str, paths: Sequence[RelPath]) -> np.ndarray:
        return np.array([-sum(self.SIM.get(s.key(), 0.0) for s in p) for p in paths])


class ShuffledGraph(InMemoryGraph):
    """Returns neighbour lists in a random order: results must not depend on it."""

    def __init__(self, triples, seed: int):
        super().__init__(triples)
        self._rng = random.Random(seed)

    def neighbours(self, ids: Sequence[str]) -> dict[str, list[Edge]]:
        out = super().neighbours(list(reversed(ids)))
        for edges in out.values():
            self._rng.shuffle(edges)
        return out


def collector(graph=None, **kw) -> PuctCollector:
    return PuctCollector(graph or InMemoryGraph(TRIPLES), FakeScorer(), **kw)


# ---- selection rule -----------------------------------------------------------------


def test_puct_select_matches_formula_on_hand_made_tree():
    a, b, c = F("directed_by", True), F("written_by", True), F("has_genre", True)
    tree = PuctTree(c_puct=2.0)
    tree.n_node[()] = 9
    for step, n, w in [(a, 6, 3), (b, 2, 2), (c, 1, 0)]:
        tree.n_edge[(), step], tree.w_edge[(), step] = n, w
    prior = [0.5, 0.2, 0.3]
    # U = Q + 2 P sqrt(9) / (1 + N): a 0.5 + 3/7 = 0.929, b 1 + 1.2/3 = 1.4, c 0 + 1.8/2 = 0.9
    assert tree.select((), [a, b, c], prior) == 1
    assert tree.q((), a) == pytest.approx(0.5)
    # Lower b's success rate: U_b = 0 + 0.4 = 0.4, a wins.
    tree.w_edge[(), b] = 0
    assert tree.select((), [a, b, c], prior) == 0


def test_puct_first_visit_follows_the_prior_and_unvisited_children_get_explored():
    a, b = F("x", True), F("y", True)
    tree = PuctTree(c_puct=2.0)
    assert tree.select((), [a, b], [0.3, 0.7]) == 1  # all U = 0: tie broken by prior
    tree.backup((b,), success=False)
    tree.backup((b,), success=False)
    # N(p) = 2: U_a = 2 * 0.3 * 1.41 / 1 = 0.85 > U_b = 0 + 2 * 0.7 * 1.41 / 3 = 0.66
    assert tree.select((), [a, b], [0.3, 0.7]) == 0


def test_backup_counts_prefixes():
    a, b = F("x", True), F("y", False)
    tree = PuctTree()
    tree.backup((a, b), success=True)
    tree.backup((a,), success=False)
    assert tree.n_node[()] == 2 and tree.n_node[(a,)] == 1
    assert tree.n_edge[(), a] == 2 and tree.w_edge[(), a] == 1
    assert tree.n_edge[(a,), b] == 1 and tree.q((a,), b) == 1.0


def test_softmax_is_a_distribution():
    p = softmax(np.array([1.0, 2.0, 3.0]))
    assert p.sum() == pytest.approx(1.0) and p.argmax() == 2


# ---- priors -------------------------------------------------------------------------


def test_beta_updates_and_round_trip():
    pri = RelationPriors()
    fwd, rev = F("directed_by", True), F("directed_by", False)
    assert pri.rho(fwd) == 0.5  # Beta(1, 1)
    pri.update([rev, fwd], success=True)
    pri.update([fwd, fwd], success=False)  # a repeated step type counts once
    assert (pri.alpha["directed_by"], pri.beta["directed_by"]) == (2, 2)
    assert (pri.alpha["~directed_by"], pri.beta["~directed_by"]) == (2, 1)
    assert pri.rho("~directed_by") == pytest.approx(2 / 3)
    again = RelationPriors.from_dict(pri.to_dict())
    assert again.rho_map() == pri.rho_map()
    assert again.to_dict()["~directed_by"] == {"alpha": 2.0, "beta": 1.0}


def test_collect_updates_priors_once_per_rollout():
    col = collector(rollouts=20)
    col.collect(**QUESTION)
    total = sum(col.priors.alpha[k] + col.priors.beta[k] - 2 for k in col.priors.alpha)
    assert 20 <= total <= 40  # each 2-hop rollout adds 1 per distinct step type on it
    assert col.priors.rho("directed_by") > 0.5  # the answer relation succeeds


# ---- gold paths ---------------------------------------------------------------------


def test_shortest_paths_by_bfs():
    graph = InMemoryGraph(TRIPLES)
    gold = shortest_paths(graph, ["A1"], {"D1", "D2"}, 2, limit=10, rng=random.Random(0))
    got = {(p.steps, p.entities) for p in gold}
    down = (F("starred_actors", False), F("directed_by", True))
    assert got == {(down, ("M1", "D1")), (down, ("M3", "D2"))}
    assert graph.round_trips == 2  # one per BFS level


def test_topic_is_never_its_own_answer():
    col = collector()
    pairs = col.collect(["A1"], {"A1", "D1"}, "q", 2)
    assert pairs
    for pair in pairs:
        assert pair.pos.end == "D1"
        assert "A1" not in pair.pos.entities and "A1" not in pair.neg.entities


# ---- pairs --------------------------------------------------------------------------


def _assert_valid(pairs, answers, topics):
    pos_relpaths = {p.pos.relpath for p in pairs}
    for pair in pairs:
        pos, neg = pair.pos, pair.neg
        assert pos.end in answers
        assert neg.end not in answers
        assert 1 <= len(neg) <= 3 and pos.start in topics and neg.start in topics
        assert neg.relpath != pos.relpath and neg.relpath not in pos_relpaths
        for path in (pos, neg):
            assert len(set(path.nodes)) == len(path.nodes)  # simple
            assert len(path.steps) == len(path.entities)


def test_puct_pairs_are_hard_negatives():
    col = collector()
    pairs = col.collect(**QUESTION, question_id="q1")
    assert pairs and all(p.question_id == "q1" for p in pairs)
    _assert_valid(pairs, QUESTION["answers"], QUESTION["topics"])
    hard = [p for p in pairs if len(p.neg) == len(p.pos)]
    for pair in hard:  # same prefix, different last step
        assert pair.neg.steps[:-1] == pair.pos.steps[:-1]
        assert pair.neg.entities[:-1] == pair.pos.entities[:-1]
    negs = {p.neg.relpath[-1].key() for p in hard}
    assert {"has_genre", "written_by", "release_year"} <= negs
    assert col.last_stats["gold"] == 2 and col.last_stats["round_trips"] <= 3


def test_length_negatives_rank_a_positive_above_its_own_prefix():
    pairs = collector().collect(**QUESTION)
    shorter = [p for p in pairs if len(p.neg) < len(p.pos)]
    assert shorter, "a 2-hop positive must be paired with its 1-hop prefix"
    for pair in shorter:
        assert pair.pos.steps[: len(pair.neg)] == pair.neg.steps
        assert pair.neg.end not in QUESTION["answers"]


def test_extension_negatives_when_the_answer_is_nearer_than_h():
    question = {**QUESTION, "hops": 3}
    pairs = collector().collect(**question)
    assert any(len(p.neg) == len(p.pos) + 1 and p.neg.steps[:-1] == p.pos.steps for p in pairs)


def test_near_miss_negatives_come_from_failed_rollouts():
    # The director path leaves M1 through directed_by; the lure leaves through release_year
    # (a hub), which no prefix of the positive can produce.
    graph = InMemoryGraph(
        [
            ("M1", "directed_by", "D1"),
            ("M2", "directed_by", "D1"),
            ("M1", "release_year", "1999"),
            ("M3", "release_year", "1999"),
            ("M4", "release_year", "1999"),
        ]
    )
    pairs = collector(graph).collect(["M1"], {"M2"}, "movies with the same director as ENT", 2)
    lure = (F("release_year", True), F("release_year", False))
    assert any(p.neg.steps == lure for p in pairs)
    assert all(p.neg.end != "M2" for p in pairs)


def test_random_negatives():
    col = collector(negatives="random")
    pairs = col.collect(**QUESTION)
    hard = collector().collect(**QUESTION)
    assert 0 < len(pairs) <= len(hard)
    _assert_valid(pairs, QUESTION["answers"], QUESTION["topics"])


def test_cpr_can_add_random_walk_negatives_on_top_of_its_own():
    plain = collector().collect(**QUESTION)
    col = collector(random_walks=True)
    both = col.collect(**QUESTION)
    assert {(p.pos.steps, p.neg.steps) for p in plain} <= {(p.pos.steps, p.neg.steps) for p in both}
    assert len(both) > len(plain) and col.last_stats["rollout_successes"] > 0
    _assert_valid(both, QUESTION["answers"], QUESTION["topics"])


def test_random_negatives_run_no_puct_at_all():
    """Abl.2 as the paper defines it: no rollouts, uniform priors, gold positives only."""
    priors = RelationPriors()
    col = collector(negatives="random", priors=priors)
    pairs = col.collect(**QUESTION)
    assert col.last_stats["rollout_successes"] == 0
    assert priors.to_dict() == {}  # never updated: rho = 0.5 for every step
    gold_ends = {p.pos.end for p in pairs}
    assert gold_ends <= set(QUESTION["answers"])


def test_pairs_are_capped():
    uncapped = collector().collect(**QUESTION)
    pairs = collector(max_pairs=2).collect(**QUESTION)
    # hard pairs <= the cap; length and near-miss pairs <= half the cap each
    assert len(uncapped) > 4 and len(pairs) <= 2 + 1 + 1


@pytest.mark.parametrize("negatives", ["puct", "random"])
def test_same_seed_same_pairs_whatever_the_neighbour_order(negatives):
    first = collector(seed=3, negatives=negatives).collect(**QUESTION)
    second = collector(ShuffledGraph(TRIPLES, 1), seed=3, negatives=negatives).collect(**QUESTION)
    assert first == second


def test_given_gold_paths_are_used():
    gold = [EntityPath("A1", (F("starred_actors", False), F("directed_by", True)), ("M1", "D1"))]
    col = collector(rollouts=0)
    pairs = col.collect(**QUESTION, gold_paths=gold)
    assert {p.pos for p in pairs} == set(gold)
    assert col.last_stats["round_trips"] == 1  # only the negatives' last hop was read


def test_no_reachable_answer_gives_no_pairs():
    assert collector().collect(["A1"], {"nowhere"}, "q", 2) == []
    assert collector().collect(["unknown"], {"D1"}, "q", 2) == []


def test_bad_arguments():
    with pytest.raises(ValueError):
        collector(negatives="easy")
    with pytest.raises(ValueError):
        collector().collect(["A1"], {"D1"}, "q", 0)


def test_negatives_avoid_every_gold_answer_even_a_topic():
    # Two topics, one of them also a gold answer: it is never a positive's end (it is a
    # topic) and never a negative's end (it is an answer).
    pairs = collector().collect(["A1", "A2"], {"D1", "A2"}, "q", 2)
    assert pairs
    assert all(p.pos.end == "D1" and p.neg.end not in {"D1", "A2"} for p in pairs)


def test_imprecise_sequences_are_demoted_from_positive_to_negative():
    # Co-writers of W: the director path reaches W2 only because W2 also directed M1.
    graph = InMemoryGraph(
        [
            ("M1", "written_by", "W"),
            ("M2", "written_by", "W"),
            ("M3", "written_by", "W"),
            ("M1", "written_by", "W2"),
            ("M2", "written_by", "W3"),
            ("M1", "directed_by", "W2"),
            ("M2", "directed_by", "D9"),
            ("M3", "directed_by", "D8"),
        ]
    )
    spurious = (F("written_by", False), F("directed_by", True))
    pairs = collector(graph).collect(["W"], {"W2", "W3"}, "who are co-writers of ENT", 2)
    assert not any(p.pos.steps == spurious for p in pairs)
    assert any(p.neg.steps == spurious for p in pairs)
    kept = collector(graph, min_precision=0).collect(["W"], {"W2", "W3"}, "co-writers of ENT", 2)
    assert any(p.pos.steps == spurious for p in kept)


class TreegScorer(FakeScorer):
    """The same costs through TreeG's scorer interface."""

    model_id = "fake"

    def score(self, ctx: str, paths: Sequence[RelPath]) -> np.ndarray:
        return self.v_sem(ctx, paths)


def test_retrieval_negatives_are_treegs_own_wrong_candidates_best_ranked_first():
    from cpr_neo4j.search.treeg import retrieve
    from cpr_neo4j.stages.train import wrong_candidates

    graph = InMemoryGraph(TRIPLES)
    c = collector(graph, rollouts=8)
    c.collect(**QUESTION)
    answers, positives = QUESTION["answers"], {p.steps for p in c.last_positives}
    r = retrieve(graph, TreegScorer(), "who directed ENT", ["A1"], 2)
    wrong = wrong_candidates(r, answers, c.min_precision)
    assert wrong, "TreeG keeps sequences that miss every answer"
    cost = {cand.path: cand.cost for cand in r.candidates()}
    assert [cost[w.steps] for w in wrong] == sorted(cost[w.steps] for w in wrong)
    for w in wrong:  # a real path of the graph to a non-answer
        assert w.end not in answers and w.start == "A1" and w.steps not in positives
        nodes = w.nodes
        for a, step, b in zip(nodes, w.steps, nodes[1:], strict=False):
            assert (step, b) in graph.neighbours([a])[a]
    pairs = c.candidate_pairs(wrong, answers, "q1", "who directed ENT")
    assert 0 < len(pairs) <= max(1, c.max_pairs // 2)
    assert all(p.pos.steps in positives and p.neg.end not in answers for p in pairs)
    assert pairs[0].neg.steps == wrong[0].steps  # the hardest negative is kept first
