"""Hop-level (UaG-style) conformal calibration, with or without a family-wise correction.

Answer set. Open expansion (search/open_expansion.py) keeps, at each hop t = 1..H, every
child of a kept sequence whose cost is <= tau_t; the answer set is the union of the ends of
the sequences kept at EVERY hop 1..H (`apply`). A gold answer nearer than H hops is thus
answered where its branch ends, as in TreeG's candidate set, the same rule for
calibration and test; a question of any hop count <= H can be calibrated.

Scores. A gold sequence of q is a relation sequence of length L in 1..H whose ends contain
a gold answer, found through the same neighbour source and rules as expansion
(graph/gold.py). One canonical gold sequence g*(q) is chosen WITHOUT looking at any
threshold: the one minimising the largest of its prefix costs, ties by sequence
(`gold_scores`). S_t(q) = cost of g*'s hop-t prefix for t <= L and -inf for t > L (the
branch has ended: no threshold applies to it); a question with no gold sequence scores
+inf at every hop. tau_t is the split-conformal quantile of S_t over the calibration
questions at level alpha_t = alpha / H (Bonferroni) or alpha (uncorrected).

Why Bonferroni covers. S is a fixed function of a question (its text, topics and gold,
the graph, the source and its fan-out cap, the scorer and the search caps), so for each
hop the calibration and test questions' S_t are exchangeable and P(S_t(test) > tau_t) <=
alpha_t. If S_t(test) <= tau_t at every hop, every prefix of g* passes its hop's threshold,
so expansion keeps g* up to its length L, and g*'s ends at hop L, which are exactly those
the gold search saw (same source, same rules; the ends of a sequence depend on the
sequence alone), contain a gold answer: the set covers. Hence P(miss) <= P(exists t:
S_t(test) > tau_t) <= sum_t alpha_t (union bound), which is alpha with Bonferroni.
Uncorrected, the bound is only H * alpha: joint coverage can fall below 1 - alpha, which
is the failure the baseline exists to show.

Caveats, both counted where they happen. A gold-search safety cap can drop gold sequences,
which can only raise S (a valid, more conservative score). An open-expansion safety cap
can drop g* although it passes every threshold: that only lowers coverage, and rows whose
thresholds reach the cut are flagged inexact (evaluation.hoplevel). Scores are numbers here;
nothing in this module touches Neo4j.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from cpr_neo4j.conformal.threshold import TOLERANCE, conformal_rank, within

Correction = Literal["bonferroni", "none"]


@dataclass(frozen=True)
class HopRecord:
    """One test question: its open-expansion survivors at the loosest taus, and its gold."""

    costs: np.ndarray  # (n_sequences, H) prefix costs, -inf past a sequence's length
    ends: list[frozenset[str]]  # end entities per sequence
    gold: frozenset[str]

    @classmethod
    def of(cls, sequences: Iterable[tuple[Sequence[float], frozenset[str]]], hops: int, gold):
        """From (prefix costs, ends) of survivors of any length 1..hops."""
        rows = [(padded(c, hops), e) for c, e in sequences]
        costs = np.array([c for c, _ in rows], dtype=float).reshape(-1, hops)
        return cls(costs, [e for _, e in rows], frozenset(gold))


def padded(costs: Sequence[float], hops: int) -> np.ndarray:
    """A sequence's prefix costs as H scores: -inf past its length (its branch has ended)."""
    if not 1 <= len(costs) <= hops:
        raise ValueError(f"a sequence of {len(costs)} steps does not fit {hops} hops")
    return np.concatenate([np.asarray(costs, dtype=float), np.full(hops - len(costs), -math.inf)])


def gold_scores(sequences: Iterable[tuple[Hashable, Sequence[float]]], hops: int) -> np.ndarray:
    """S_1..S_H of the canonical gold sequence among (sequence, prefix costs) of lengths
    1..hops: the least largest prefix cost, ties by sequence; -inf past its length, +inf
    at every hop if there is none. NaN costs count as +inf (they pass no threshold)."""
    best: tuple | None = None
    for key, c in sequences:
        c = tuple(math.inf if math.isnan(x) else float(x) for x in c)
        if 1 <= len(c) <= hops and (best is None or (max(c), key) < best[:2]):
            best = (max(c), key, c)
    return np.full(hops, math.inf) if best is None else padded(best[2], hops)


def score_counts(scores: np.ndarray) -> list[dict[str, int]]:
    """Per hop, how many calibration questions have a real score there (their canonical
    gold sequence reaches that hop), have ended before it (-inf) and have no gold (+inf)."""
    s = np.asarray(scores, dtype=float).reshape(len(scores), -1)
    return [
        {
            "scored": int(np.isfinite(col).sum()),
            "ended": int((col == -math.inf).sum()),
            "no_gold": int((col == math.inf).sum()),
        }
        for col in s.T
    ]


def hop_thresholds(scores: np.ndarray, alpha: float, correction: Correction) -> np.ndarray:
    """tau_t = k-th smallest S_t, k = ceil((n+1)(1 - alpha_t)); +inf where k > n."""
    s = np.asarray(scores, dtype=float)
    if s.ndim != 2:
        raise ValueError(f"scores must be (n_cal, H), got shape {s.shape}")
    if np.isnan(s).any():
        raise ValueError("calibration scores contain NaN")
    if correction not in ("bonferroni", "none"):
        raise ValueError(f"unknown correction {correction!r}")
    n, hops = s.shape
    k = conformal_rank(n, alpha / hops if correction == "bonferroni" else alpha)
    if k > n:
        return np.full(hops, math.inf)
    return np.sort(s, axis=0)[k - 1]


def widen(taus: Sequence[float], eps: float = TOLERANCE) -> np.ndarray:
    """taus + eps (1 + |tau|), +-inf kept: the thresholds expansion runs at, so a cost
    recomputed in another batch (~1e-7 off) passes as `within` would let it (threshold.py)."""
    t = np.asarray(taus, dtype=float)
    with np.errstate(invalid="ignore"):  # inf + inf: np.where keeps the infinite tau
        return np.where(np.isfinite(t), t + eps * (1 + np.abs(t)), t)


def apply(records: Sequence[HopRecord], taus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(covered, size) per question: a sequence survives if every prefix cost is within
    tau_t (threshold.within: the tolerance every answer set uses)."""
    taus = np.asarray(taus, dtype=float)
    covered = np.zeros(len(records), dtype=bool)
    size = np.zeros(len(records), dtype=np.int64)
    for i, r in enumerate(records):
        if not len(r.ends):
            continue
        alive = within(np.asarray(r.costs, dtype=float), taus).all(axis=1)
        answers = frozenset().union(*(e for e, a in zip(r.ends, alive, strict=True) if a))
        covered[i] = not answers.isdisjoint(r.gold)
        size[i] = len(answers)
    return covered, size
