"""PUCT trajectory collection: rollouts guided by the semantic prior, then (p+, p-) pairs.

Talks to the graph only through a NeighbourSource (wrapped in a per-question
CachedNeighbours), and to the model only through `question()` and `v_sem()`.
Every random choice comes from an RNG seeded by (seed, question), and every list
is sorted before it is chosen from, so the same seed gives the same pairs whatever
order the source returns neighbours in or the questions come in.

Topic answers (a dataset convention: "X's children's mother" is X): with `topic_answers`
on, a topic among the gold answers is an answer too; gold paths to it are its shortest
cycles (search/paths.py), and a rollout's LAST step may land back on its start.

Entity paths, gold BFS and the neighbourhood view live in search/paths.py, the pair
builders in training/pairs.py; this module holds the PUCT statistics (the global Beta
relation priors, the per-question visit tree and its selection rule, the softmax that turns
V_sem into the tree's prior P(p, r)), the rollouts they guide, and which pairs to make.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from cpr_neo4j.search.base import NeighbourSource, RelPath, Step
from cpr_neo4j.search.paths import EntityPath, Neighbourhood, PathPair, shortest_paths
from cpr_neo4j.training.pairs import QuestionPairs, candidate_pairs

__all__ = [  # EntityPath, PathPair and shortest_paths moved to search/paths.py
    "EntityPath",
    "PathPair",
    "PuctCollector",
    "PuctTree",
    "RelationPriors",
    "shortest_paths",
    "softmax",
]


def _key(step: Step | str) -> str:
    return step if isinstance(step, str) else step.key()


class RelationPriors:
    """Global Beta(alpha_r, beta_r) per step key ("rel" forward, "~rel" reverse)."""

    def __init__(self, counts: Mapping[str, tuple[float, float]] | None = None):
        self.alpha: dict[str, float] = {}
        self.beta: dict[str, float] = {}
        for key, (a, b) in (counts or {}).items():
            self.alpha[key], self.beta[key] = float(a), float(b)

    def update(self, steps: Iterable[Step | str], success: bool) -> None:
        # Each step type on a rollout counts once, however often it repeats there.
        for key in dict.fromkeys(_key(s) for s in steps):
            self.alpha.setdefault(key, 1.0)
            self.beta.setdefault(key, 1.0)
            if success:
                self.alpha[key] += 1
            else:
                self.beta[key] += 1

    def rho(self, step: Step | str) -> float:
        key = _key(step)
        a, b = self.alpha.get(key, 1.0), self.beta.get(key, 1.0)
        return a / (a + b)

    def rho_map(self) -> dict[str, float]:
        return {k: self.rho(k) for k in sorted(self.alpha)}

    def to_dict(self) -> dict[str, dict[str, float]]:
        return {k: {"alpha": self.alpha[k], "beta": self.beta[k]} for k in sorted(self.alpha)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Mapping[str, float]]) -> RelationPriors:
        return cls({k: (v["alpha"], v["beta"]) for k, v in data.items()})


@dataclass
class PuctTree:
    """Visit statistics keyed by relation-sequence prefix; one per question."""

    c_puct: float = 2.0
    n_node: Counter = field(default_factory=Counter)  # N(p)
    n_edge: Counter = field(default_factory=Counter)  # N(p, r)
    w_edge: Counter = field(default_factory=Counter)  # successes through (p, r)

    def q(self, prefix: RelPath, step: Step) -> float:
        n = self.n_edge[prefix, step]
        return self.w_edge[prefix, step] / n if n else 0.0

    def select(self, prefix: RelPath, candidates: Sequence[Step], prior: Sequence[float]) -> int:
        """argmax_r Q(p,r) + c_puct P(p,r) sqrt(N(p)) / (1 + N(p,r)).

        Ties (all of them on a node's first visit, where sqrt(N(p)) = 0) go to the higher
        prior, then to the earlier candidate.
        """
        root = math.sqrt(self.n_node[prefix])

        def ucb(i: int) -> tuple[float, float]:
            step = candidates[i]
            u = self.q(prefix, step) + self.c_puct * prior[i] * root / (
                1 + self.n_edge[prefix, step]
            )
            return u, prior[i]

        return max(range(len(candidates)), key=ucb)

    def backup(self, steps: RelPath, success: bool) -> None:
        for t, step in enumerate(steps):
            prefix = steps[:t]
            self.n_node[prefix] += 1
            self.n_edge[prefix, step] += 1
            self.w_edge[prefix, step] += int(success)


def softmax(values: np.ndarray) -> np.ndarray:
    z = np.exp(values - values.max())
    return z / z.sum()


NegativeMode = Literal["puct", "random"]


class SemanticScorer(Protocol):
    """What the collector needs from a scorer (model.scorer.PathScorer fits)."""

    def question(self, masked_text: str) -> Any: ...

    def v_sem(self, ctx: Any, paths: Sequence[RelPath]) -> np.ndarray: ...


class PuctCollector:
    """Collects (p+, p-) pairs per training question.

    negatives="puct" (CPR): PUCT rollouts add positives and near-miss negatives to the
    prefix-based hard and length negatives. negatives="random" (Abl.2, "w/o PUCT"): no
    rollouts; shortest gold paths against random walks of length 1..H to non-answers.
    """

    def __init__(
        self,
        source: NeighbourSource,
        scorer: SemanticScorer,
        priors: RelationPriors | None = None,
        c_puct: float = 2.0,
        rollouts: int = 32,
        seed: int = 0,
        max_pairs: int = 16,
        max_gold: int = 32,
        negatives: NegativeMode = "puct",
        cache: bool = True,
        min_precision: float = 0.5,
        random_walks: bool = False,
        topic_answers: bool = False,
    ):
        if negatives not in ("puct", "random"):
            raise ValueError(f"negatives must be 'puct' or 'random', not {negatives!r}")
        self.source = source
        self.scorer = scorer
        self.priors = priors if priors is not None else RelationPriors()
        self.c_puct = c_puct
        self.rollouts = rollouts
        self.seed = seed
        self.max_pairs = max_pairs
        self.max_gold = max_gold
        self.negatives = negatives
        self.cache = cache  # False only to measure what the per-question cache saves
        self.min_precision = min_precision
        self.random_walks = random_walks  # "puct" also adds random-walk negatives
        self.topic_answers = topic_answers  # the dataset's convention (records.topic_answers)
        self.follow_cap = 200  # entities per hop when measuring a sequence's precision (a sample)
        self.last_stats: dict[str, int] = {}
        self.last_positives: list[EntityPath] = []  # of the last collect() call
        self._calls = 0

    def collect(
        self,
        topics: Sequence[str],
        answers: Iterable[str],
        masked_question: str,
        hops: int,
        gold_paths: Sequence[EntityPath] | None = None,
        question_id: str | int | None = None,
    ) -> list[PathPair]:
        if hops < 1:
            raise ValueError(f"hops must be at least 1, not {hops}")
        qid = self._calls if question_id is None else question_id
        self._calls += 1
        topics = sorted(set(topics))
        gold_answers = set(answers)  # negatives avoid all of them
        # a topic answers itself only under the dataset's topic-answer convention
        answers = gold_answers if self.topic_answers else gold_answers - set(topics)
        rng = random.Random(f"{self.seed}|{question_id}|{masked_question}|{topics}")
        hood = Neighbourhood(self.source, self.cache)
        trips = hood.cache.round_trips
        cycles = self.topic_answers
        if gold_paths is None:
            gold = shortest_paths(hood.cache, topics, answers, hops, self.max_gold, rng, cycles)
        else:
            gold = list(gold_paths)
            if cycles and answers & set(topics):
                # given gold paths (Cypher shortest paths) never join a topic to itself
                looped = answers & set(topics)
                gold += shortest_paths(hood.cache, topics, looped, hops, self.max_gold, rng, True)
        build = QuestionPairs(
            hood=hood,
            qid=qid,
            masked_question=masked_question,
            gold=gold_answers,
            rng=rng,
            max_pairs=self.max_pairs,
            ends_only=set(topics) if cycles else (),
        )
        if self.negatives == "random":
            # Abl.2, the paper's "w/o PUCT": no rollouts at all (so the priors stay uniform),
            # positives = shortest gold paths, negatives = random walks, as many pairs as
            # CPR's prefix-based builders would make from the same positives.
            found, misses = [], []
            positives = self._precise(hood, list(dict.fromkeys(gold)), answers)
            target = len(build.hard(positives)) + len(build.length(positives, hops))
            pairs = build.random_walks(positives, topics, target, hops)
        else:
            found, misses = self._rollouts(hood, topics, answers, masked_question, hops, rng)
            lengths = {len(p) for p in gold}
            # Rollout successes join the positives when they have a gold path's length.
            extra = [p for p in found if not lengths or len(p) in lengths]
            positives = self._precise(hood, list(dict.fromkeys([*gold, *extra])), answers)
            pairs = build.hard(positives)
            pairs += build.length(positives, hops)
            pairs += build.near_miss(positives, misses)
            if self.random_walks and positives:  # Abl.2's negatives on top: any length
                pairs += build.random_walks(positives, topics, max(1, self.max_pairs // 2), hops)
        self.last_positives = positives
        self.last_stats = {
            "gold": len(gold),
            "rollout_successes": len(found),
            "positives": len(positives),
            "pairs": len(pairs),
            "round_trips": hood.cache.round_trips - trips,
        }
        return pairs

    def _precise(
        self, hood: Neighbourhood, positives: list[EntityPath], answers: set[str]
    ) -> list[EntityPath]:
        """Positives whose relation sequence is precise enough to be worth learning.

        Scores are relation-level and an answer set takes every end of a sequence, so a
        sequence that reaches a gold answer by coincidence (MetaQA: "co-writers of X"
        via the movies' directors, who are often also writers) is a poor answer to
        the question. Keep a positive only if the share of gold answers among its
        sequence's ends is at least half the best positive's share; the demoted
        sequences can then serve as negatives where they end at non-answers.
        """
        if len(positives) < 2 or self.min_precision <= 0:
            return positives
        share = {}
        for relpath in {p.steps for p in positives}:
            starts = {p.start for p in positives}
            ends = hood.follow(starts, relpath, self.follow_cap, self.topic_answers)
            share[relpath] = len(ends & answers) / len(ends) if ends else 0.0
        best = max(share.values())
        return [p for p in positives if share[p.steps] >= self.min_precision * best]

    # ---- rollouts ---------------------------------------------------------------------

    def _rollouts(
        self,
        hood: Neighbourhood,
        topics: Sequence[str],
        answers: set[str],
        masked_question: str,
        hops: int,
        rng: random.Random,
    ) -> tuple[list[EntityPath], list[EntityPath]]:
        """`self.rollouts` PUCT rollouts of depth `hops`: (successes, failures), deduplicated.
        With topic answers the last step may land back on the start (a cycle)."""
        if not topics:
            return [], []
        ctx = self.scorer.question(masked_question)
        v_cache: dict[RelPath, float] = {}
        tree = PuctTree(self.c_puct)
        successes: list[EntityPath] = []
        misses: list[EntityPath] = []
        for i in range(self.rollouts):
            path = EntityPath(topics[i % len(topics)])
            for h in range(hops):
                groups = hood.groups(path, cycle=self.topic_answers and h == hops - 1)
                if not groups:
                    break  # dead end: the rollout fails
                candidates = sorted(groups)
                prior = self._prior(ctx, path.steps, candidates, v_cache)
                step = candidates[tree.select(path.steps, candidates, prior)]
                path = path.extend(step, rng.choice(groups[step]))
            success = len(path) == hops and path.end in answers
            tree.backup(path.steps, success)
            self.priors.update(path.steps, success)
            if success:
                successes.append(path)
            elif path.steps:
                misses.append(path)
        return list(dict.fromkeys(successes)), list(dict.fromkeys(misses))

    def _prior(
        self,
        ctx: Any,
        prefix: RelPath,
        candidates: Sequence[Step],
        v_cache: dict[RelPath, float],
    ) -> np.ndarray:
        """P(p, r) = softmax_r(s(q~, r) + s(q~, r_1:t)) = softmax(-V_sem(prefix + r))."""
        paths = [(*prefix, s) for s in candidates]
        missing = [p for p in paths if p not in v_cache]
        if missing:
            v_cache.update(zip(missing, self.scorer.v_sem(ctx, missing).tolist(), strict=True))
        return softmax(-np.array([v_cache[p] for p in paths], dtype=np.float64))

    def candidate_pairs(
        self,
        wrong: Sequence[EntityPath],
        answers: Iterable[str],
        question_id: str | int,
        masked_question: str,
    ) -> list[PathPair]:
        """Pairs of the last collect()'s positives against the retriever's own wrong
        candidates, hardest first (training/pairs.py `candidate_pairs`)."""
        limit = max(1, self.max_pairs // 2)
        return candidate_pairs(
            self.last_positives, wrong, answers, question_id, masked_question, limit
        )
