"""Training pairs (p+, p-) of one question, from its positives and the paths around them.

Every builder keeps a pair only when the negative ends at no gold answer and its relation
sequence is no positive's: the cost is relation-level, so such a negative gives no signal
(or a contradictory one); pairs repeating a (pos, neg) relation-sequence pair are kept
once. Each builder caps its pairs by a seeded sample, so the same seed gives the same
pairs. The PUCT collector (training/puct.py) decides which builders run.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass

from cpr_neo4j.search.base import RelPath
from cpr_neo4j.search.paths import EntityPath, Neighbourhood, PathPair

PairKey = tuple[RelPath, RelPath]


@dataclass
class QuestionPairs:
    """The pair builders of one question; `rng` is the question's seeded RNG, drawn from in
    the order the builders are called."""

    hood: Neighbourhood
    qid: str | int
    masked_question: str
    gold: set[str]  # every gold answer: negatives avoid all of them
    rng: random.Random
    max_pairs: int
    ends_only: Collection[str] = ()  # entities a path ends on, never extends (cycle topics)

    def _pair(self, pos: EntityPath, neg: EntityPath) -> PathPair:
        return PathPair(
            question_id=self.qid, masked_question=self.masked_question, pos=pos, neg=neg
        )

    def hard(self, positives: Sequence[EntityPath]) -> list[PathPair]:
        """A positive's prefix up to hop H-1, then a last step to a non-answer."""
        pos_relpaths = {p.steps for p in positives}
        pairs: dict[PairKey, PathPair] = {}
        for pos in positives:
            if not pos.steps:
                continue
            prefix = EntityPath(pos.start, pos.steps[:-1], pos.entities[:-1])
            for step, ends in self.hood.groups(prefix).items():
                relpath = (*prefix.steps, step)
                if relpath in pos_relpaths or (pos.steps, relpath) in pairs:
                    continue
                wrong = [e for e in ends if e not in self.gold]
                if wrong:
                    neg = prefix.extend(step, self.rng.choice(wrong))
                    pairs[pos.steps, relpath] = self._pair(pos, neg)
        return self.cap(list(pairs.values()), self.max_pairs)

    def length(self, positives: Sequence[EntityPath], hops: int) -> list[PathPair]:
        """Pairs against a positive's own shorter prefixes and one-step extensions.

        TreeG's candidates are the paths kept at EVERY hop 1..H, so paths of other
        lengths compete with the right one; same-length hard negatives never show the
        scorer a path of another length, and it then ranks prefixes arbitrarily
        (measured: MetaQA 2-hop sets of ~300 answers at alpha 0.1 without these pairs).
        A positive closing a cycle on a topic is not extended: search never extends it.
        """
        pos_relpaths = {p.steps for p in positives}
        pairs: dict[PairKey, PathPair] = {}

        def add(pos: EntityPath, neg: EntityPath) -> None:
            if neg.end not in self.gold and neg.steps not in pos_relpaths:
                pairs.setdefault((pos.steps, neg.steps), self._pair(pos, neg))

        for pos in positives:
            for t in range(1, len(pos)):
                add(pos, EntityPath(pos.start, pos.steps[:t], pos.entities[:t]))
            if len(pos) < hops and not (pos.steps and pos.end in self.ends_only):
                for step, ends in self.hood.groups(pos).items():
                    wrong = [e for e in ends if e not in self.gold]
                    if wrong:
                        add(pos, pos.extend(step, self.rng.choice(wrong)))
        return self.cap(list(pairs.values()), max(1, self.max_pairs // 2))

    def near_miss(
        self, positives: Sequence[EntityPath], misses: Sequence[EntityPath]
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
        pairs: dict[PairKey, PathPair] = {}
        for i, miss in enumerate(misses):
            if miss.end in self.gold or miss.steps in pos_relpaths:
                continue
            pos = positives[i % len(positives)]
            pairs.setdefault((pos.steps, miss.steps), self._pair(pos, miss))
        return self.cap(list(pairs.values()), max(1, self.max_pairs // 2))

    def random_walks(
        self, positives: Sequence[EntityPath], topics: Sequence[str], target: int, hops: int
    ) -> list[PathPair]:
        """Abl.2: `target` pairs (what "puct" gives) with negatives from random walks of a
        random length 1..H (so, like "puct", it sees other lengths than the positive's)."""
        pos_relpaths = {p.steps for p in positives}
        pairs: dict[PairKey, PathPair] = {}
        rng = self.rng
        for attempt in range(8 * target):
            if len(pairs) >= target:
                break
            pos = positives[attempt % len(positives)]
            walk = EntityPath(rng.choice(topics))
            length = rng.randint(1, hops)
            for _ in range(length):
                edges = [(s, e) for s, group in self.hood.groups(walk).items() for e in group]
                if not edges:
                    break
                walk = walk.extend(*rng.choice(edges))  # uniform over edges, not step types
            if (
                len(walk) == length
                and walk.end not in self.gold
                and walk.steps not in pos_relpaths
                and (pos.steps, walk.steps) not in pairs
            ):
                pairs[pos.steps, walk.steps] = self._pair(pos, walk)
        return list(pairs.values())

    def cap(self, pairs: list[PathPair], limit: int) -> list[PathPair]:
        if len(pairs) <= limit:
            return pairs
        keep = sorted(self.rng.sample(range(len(pairs)), limit))
        return [pairs[i] for i in keep]


def candidate_pairs(
    positives: Sequence[EntityPath],
    wrong: Sequence[EntityPath],
    answers: Iterable[str],
    question_id: str | int,
    masked_question: str,
    limit: int,
) -> list[PathPair]:
    """Pairs of positives against the retriever's own wrong candidates, hardest
    (best-ranked) first, at most `limit` negatives.

    Rollout and prefix negatives are the paths PUCT and a positive's siblings reach;
    TreeG's candidate set holds every sequence kept at every hop 1..H, so at ask time
    the scorer must also rank unrelated shorter or broader sequences below the right
    one, which none of those pairs shows it (worst where the hop count is unknown).
    """
    gold = set(answers)
    pos_relpaths = {p.steps for p in positives}
    pairs: dict[PairKey, PathPair] = {}
    negs = [n for n in wrong if n.end not in gold and n.steps not in pos_relpaths]
    for i, neg in enumerate(negs[:limit] if positives else []):
        pos = positives[i % len(positives)]
        pairs.setdefault(
            (pos.steps, neg.steps),
            PathPair(question_id=question_id, masked_question=masked_question, pos=pos, neg=neg),
        )
    return list(pairs.values())
