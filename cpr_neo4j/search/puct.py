"""PUCT trajectory collection: rollouts guided by the semantic prior, then (p+, p-) pairs.

Talks to the graph only through a NeighbourSource (wrapped in a per-question
CachedNeighbours), and to the model only through `question()` and `v_sem()`.
Every random choice comes from an RNG seeded by (seed, question), and every list
is sorted before it is chosen from, so the same seed gives the same pairs whatever
order the source returns neighbours in or the questions come in.
"""

from __future__ import annotations

import math
import random
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import numpy as np

from cpr_neo4j.search.base import CachedNeighbours, NeighbourSource, RelPath, Step

NegativeMode = Literal["puct", "random"]


@dataclass(frozen=True)
class EntityPath:
    """start -steps[0]-> entities[0] -steps[1]-> entities[1] ... (len(steps) == len(entities))."""

    start: str
    steps: RelPath = ()
    entities: tuple[str, ...] = ()

    @property
    def relpath(self) -> RelPath:
        return self.steps

    @property
    def end(self) -> str:
        return self.entities[-1] if self.entities else self.start

    @property
    def nodes(self) -> tuple[str, ...]:
        return (self.start, *self.entities)

    def extend(self, step: Step, entity: str) -> EntityPath:
        return EntityPath(self.start, (*self.steps, step), (*self.entities, entity))

    def __len__(self) -> int:
        return len(self.steps)


@dataclass(frozen=True)
class PathPair:
    """A training pair from one question: pos should cost less than neg."""

    question_id: str | int
    masked_question: str
    pos: EntityPath
    neg: EntityPath


class SemanticScorer(Protocol):
    """What the collector needs from a scorer (model.scorer.PathScorer fits)."""

    def question(self, masked_text: str) -> Any: ...

    def v_sem(self, ctx: Any, paths: Sequence[RelPath]) -> np.ndarray: ...


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


def shortest_paths(
    source: NeighbourSource,
    topics: Sequence[str],
    answers: set[str],
    hops: int,
    limit: int,
    rng: random.Random,
) -> list[EntityPath]:
    """Per reachable answer, shortest paths from the topics (BFS, one round trip per level).

    Shortest paths are simple by construction. At most `limit` in all: answers are taken
    in a seeded random order, each with up to max(1, limit // #answers) paths.
    """
    dist = {t: 0 for t in topics}
    preds: dict[str, list[tuple[str, Step]]] = {}
    frontier = sorted(set(topics))
    for d in range(1, hops + 1):
        if not frontier or all(a in dist for a in answers):
            break
        found = source.neighbours(frontier)
        last = d == hops  # at the last level only answers matter: skip the rest (3-hop
        nxt = []  # neighbourhoods reach ~10^4 entities on MetaQA)
        for entity in frontier:
            for step, nb in found.get(entity, ()):
                if last and nb not in answers:
                    continue
                seen = dist.get(nb)
                if seen is None:
                    dist[nb] = d
                    nxt.append(nb)
                    preds[nb] = [(entity, step)]
                elif seen == d:
                    preds[nb].append((entity, step))
        frontier = sorted(nxt)
    targets = sorted(a for a in answers if dist.get(a, 0) > 0)  # a topic is never its own answer
    rng.shuffle(targets)
    per_answer = max(1, limit // max(1, len(targets)))
    out: list[EntityPath] = []
    for answer in targets:
        out.extend(_unwind(answer, preds, dist, per_answer))
        if len(out) >= limit:
            break
    return out[:limit]


def _unwind(
    answer: str, preds: Mapping[str, list[tuple[str, Step]]], dist: Mapping[str, int], cap: int
) -> list[EntityPath]:
    """Up to `cap` shortest paths ending at `answer`, depth-first in sorted order."""
    out: list[EntityPath] = []

    def walk(entity: str, steps: list[Step], entities: list[str]) -> None:
        if len(out) >= cap:
            return
        if dist[entity] == 0:
            out.append(EntityPath(entity, tuple(reversed(steps)), tuple(reversed(entities))))
            return
        for prev, step in sorted(preds[entity]):
            walk(prev, [*steps, step], [*entities, entity])

    walk(answer, [], [])
    return out


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
        answers = gold_answers - set(topics)  # a topic is never its own answer
        rng = random.Random(f"{self.seed}|{question_id}|{masked_question}|{topics}")
        hood = _Neighbourhood(self.source, self.cache)
        trips = hood.cache.round_trips
        if gold_paths is None:
            gold = shortest_paths(hood.cache, topics, answers, hops, self.max_gold, rng)
        else:
            gold = list(gold_paths)
        if self.negatives == "random":
            # Abl.2, the paper's "w/o PUCT": no rollouts at all (so the priors stay uniform),
            # positives = shortest gold paths, negatives = random walks, as many pairs as
            # CPR's prefix-based builders would make from the same positives.
            found, misses = [], []
            positives = self._precise(hood, list(dict.fromkeys(gold)), answers)
            target = len(self._hard_pairs(hood, positives, gold_answers, qid, masked_question, rng))
            target += len(
                self._length_pairs(hood, positives, gold_answers, qid, masked_question, rng, hops)
            )
            pairs = self._random_pairs(
                hood, positives, topics, gold_answers, qid, masked_question, rng, target, hops
            )
        else:
            found, misses = self._rollouts(hood, topics, answers, masked_question, hops, rng)
            lengths = {len(p) for p in gold}
            # Rollout successes join the positives when they have a gold path's length.
            extra = [p for p in found if not lengths or len(p) in lengths]
            positives = self._precise(hood, list(dict.fromkeys([*gold, *extra])), answers)
            pairs = self._hard_pairs(hood, positives, gold_answers, qid, masked_question, rng)
            pairs += self._length_pairs(
                hood, positives, gold_answers, qid, masked_question, rng, hops
            )
            pairs += self._near_miss_pairs(
                positives, misses, gold_answers, qid, masked_question, rng
            )
            if self.random_walks and positives:  # Abl.2's negatives on top: any length
                pairs += self._random_pairs(
                    hood,
                    positives,
                    topics,
                    gold_answers,
                    qid,
                    masked_question,
                    rng,
                    max(1, self.max_pairs // 2),
                    hops,
                )
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
        self, hood: _Neighbourhood, positives: list[EntityPath], answers: set[str]
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
            ends = hood.follow({p.start for p in positives}, relpath, self.follow_cap)
            share[relpath] = len(ends & answers) / len(ends) if ends else 0.0
        best = max(share.values())
        return [p for p in positives if share[p.steps] >= self.min_precision * best]

    # ---- rollouts ---------------------------------------------------------------------

    def _rollouts(
        self,
        hood: _Neighbourhood,
        topics: Sequence[str],
        answers: set[str],
        masked_question: str,
        hops: int,
        rng: random.Random,
    ) -> tuple[list[EntityPath], list[EntityPath]]:
        """`self.rollouts` PUCT rollouts of depth `hops`: (successes, failures), deduplicated."""
        if not topics:
            return [], []
        ctx = self.scorer.question(masked_question)
        v_cache: dict[RelPath, float] = {}
        tree = PuctTree(self.c_puct)
        successes: list[EntityPath] = []
        misses: list[EntityPath] = []
        for i in range(self.rollouts):
            path = EntityPath(topics[i % len(topics)])
            for _ in range(hops):
                groups = hood.groups(path)
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

    # ---- pairs ------------------------------------------------------------------------

    def _hard_pairs(
        self,
        hood: _Neighbourhood,
        positives: Sequence[EntityPath],
        answers: set[str],
        qid: str | int,
        masked_question: str,
        rng: random.Random,
    ) -> list[PathPair]:
        # The cost is relation-level, so a negative whose relation sequence is a positive
        # one (this positive's or another's) gives no signal (or a contradictory one):
        # such negatives are dropped, and pairs repeating a (pos, neg) relation-sequence
        # pair are kept once.
        pos_relpaths = {p.steps for p in positives}
        pairs: dict[tuple[RelPath, RelPath], PathPair] = {}
        for pos in positives:
            if not pos.steps:
                continue
            prefix = EntityPath(pos.start, pos.steps[:-1], pos.entities[:-1])
            for step, ends in hood.groups(prefix).items():
                relpath = (*prefix.steps, step)
                if relpath in pos_relpaths or (pos.steps, relpath) in pairs:
                    continue
                wrong = [e for e in ends if e not in answers]
                if wrong:
                    neg = prefix.extend(step, rng.choice(wrong))
                    pairs[pos.steps, relpath] = PathPair(qid, masked_question, pos, neg)
        return self._cap(list(pairs.values()), rng, self.max_pairs)

    def _length_pairs(
        self,
        hood: _Neighbourhood,
        positives: Sequence[EntityPath],
        answers: set[str],
        qid: str | int,
        masked_question: str,
        rng: random.Random,
        hops: int,
    ) -> list[PathPair]:
        """Pairs against a positive's own shorter prefixes and one-step extensions.

        TreeG's candidates are the paths kept at EVERY hop 1..H, so paths of other
        lengths compete with the right one; same-length hard negatives never show the
        scorer a path of another length, and it then ranks prefixes arbitrarily
        (measured: MetaQA 2-hop sets of ~300 answers at alpha 0.1 without these pairs).
        """
        pos_relpaths = {p.steps for p in positives}
        pairs: dict[tuple[RelPath, RelPath], PathPair] = {}

        def add(pos: EntityPath, neg: EntityPath) -> None:
            if neg.end not in answers and neg.steps not in pos_relpaths:
                pairs.setdefault((pos.steps, neg.steps), PathPair(qid, masked_question, pos, neg))

        for pos in positives:
            for t in range(1, len(pos)):
                add(pos, EntityPath(pos.start, pos.steps[:t], pos.entities[:t]))
            if len(pos) < hops:
                for step, ends in hood.groups(pos).items():
                    wrong = [e for e in ends if e not in answers]
                    if wrong:
                        add(pos, pos.extend(step, rng.choice(wrong)))
        return self._cap(list(pairs.values()), rng, max(1, self.max_pairs // 2))

    def _near_miss_pairs(
        self,
        positives: Sequence[EntityPath],
        misses: Sequence[EntityPath],
        answers: set[str],
        qid: str | int,
        masked_question: str,
        rng: random.Random,
    ) -> list[PathPair]:
        """Pairs against failed rollouts: the paths the semantic prior found attractive.

        Prefix-based negatives share the positive's first steps, so a wrong path that
        diverges early (MetaQA: "movies with the same director as X" lured into
        `release_year -> ~release_year`, a hub with hundreds of ends) is never shown to
        the scorer; the rollouts that tried it are exactly those near misses.
        """
        if not positives:
            return []
        pos_relpaths = {p.steps for p in positives}
        pairs: dict[tuple[RelPath, RelPath], PathPair] = {}
        for i, miss in enumerate(misses):
            if miss.end in answers or miss.steps in pos_relpaths:
                continue
            pos = positives[i % len(positives)]
            pairs.setdefault((pos.steps, miss.steps), PathPair(qid, masked_question, pos, miss))
        return self._cap(list(pairs.values()), rng, max(1, self.max_pairs // 2))

    def candidate_pairs(
        self,
        wrong: Sequence[EntityPath],
        answers: Iterable[str],
        question_id: str | int,
        masked_question: str,
    ) -> list[PathPair]:
        """Pairs of the last collect()'s positives against the retriever's own wrong
        candidates, hardest (best-ranked) first.

        Rollout and prefix negatives are the paths PUCT and a positive's siblings reach;
        TreeG's candidate set holds every sequence kept at every hop 1..H, so at ask time
        the scorer must also rank unrelated shorter or broader sequences below the right
        one, which none of those pairs shows it (worst where the hop count is unknown).
        """
        positives = self.last_positives
        gold = set(answers)
        pos_relpaths = {p.steps for p in positives}
        pairs: dict[tuple[RelPath, RelPath], PathPair] = {}
        negs = [n for n in wrong if n.end not in gold and n.steps not in pos_relpaths]
        for i, neg in enumerate(negs[: max(1, self.max_pairs // 2)] if positives else []):
            pos = positives[i % len(positives)]
            pairs.setdefault(
                (pos.steps, neg.steps), PathPair(question_id, masked_question, pos, neg)
            )
        return list(pairs.values())

    def _random_pairs(
        self,
        hood: _Neighbourhood,
        positives: Sequence[EntityPath],
        topics: Sequence[str],
        answers: set[str],
        qid: str | int,
        masked_question: str,
        rng: random.Random,
        target: int,
        hops: int,
    ) -> list[PathPair]:
        """Abl.2: `target` pairs (what "puct" gives) with negatives from random walks of a
        random length 1..H (so, like "puct", it sees other lengths than the positive's)."""
        pos_relpaths = {p.steps for p in positives}
        pairs: dict[tuple[RelPath, RelPath], PathPair] = {}
        for attempt in range(8 * target):
            if len(pairs) >= target:
                break
            pos = positives[attempt % len(positives)]
            walk = EntityPath(rng.choice(topics))
            length = rng.randint(1, hops)
            for _ in range(length):
                edges = [(s, e) for s, group in hood.groups(walk).items() for e in group]
                if not edges:
                    break
                walk = walk.extend(*rng.choice(edges))  # uniform over edges, not step types
            if (
                len(walk) == length
                and walk.end not in answers
                and walk.steps not in pos_relpaths
                and (pos.steps, walk.steps) not in pairs
            ):
                pairs[pos.steps, walk.steps] = PathPair(qid, masked_question, pos, walk)
        return list(pairs.values())

    def _cap(self, pairs: list[PathPair], rng: random.Random, limit: int) -> list[PathPair]:
        if len(pairs) <= limit:
            return pairs
        keep = sorted(rng.sample(range(len(pairs)), limit))
        return [pairs[i] for i in keep]


class _Neighbourhood:
    """Per-question view of the graph: neighbours grouped by step, memoised per entity."""

    def __init__(self, source: NeighbourSource, cache: bool = True):
        self.cache = CachedNeighbours(source) if cache else source
        self.memo = cache
        self._groups: dict[str, dict[Step, list[str]]] = {}

    def follow(self, starts: set[str], relpath: RelPath, cap: int) -> set[str]:
        """Entities reached from `starts` along `relpath` (frontier capped per hop)."""
        frontier = set(starts)
        for step in relpath:
            ids = sorted(frontier)[:cap]
            found = self.cache.neighbours(ids)
            frontier = {n for i in ids for s, n in found.get(i, []) if s == step} - starts
        return frontier

    def groups(self, path: EntityPath) -> dict[Step, list[str]]:
        """Neighbours of the path's end by step (sorted), minus entities already on the path."""
        end = path.end
        grouped = self._groups.get(end) if self.memo else None
        if grouped is None:
            raw: dict[Step, set[str]] = defaultdict(set)
            for step, nb in self.cache.neighbours([end]).get(end, []):
                raw[step].add(nb)
            grouped = self._groups[end] = {s: sorted(raw[s]) for s in sorted(raw)}
        on_path = set(path.nodes)
        out = {}
        for step, ends in grouped.items():
            kept = [e for e in ends if e not in on_path]
            if kept:
                out[step] = kept
        return out
