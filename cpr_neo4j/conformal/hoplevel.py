"""Hop-level (UaG-style) conformal calibration, with or without a family-wise correction.

Scores. For a question q with a gold relation sequence of length H (a simple path from a
topic to a gold answer), one canonical gold sequence g*(q) is chosen WITHOUT looking at any
threshold: the one minimising the largest of its prefix costs, ties by sequence
(`gold_scores`). S_t(q) = cost of g*'s hop-t prefix; a question with no gold sequence of
length H scores +inf at every hop. tau_t is the split-conformal quantile of S_t over the
calibration questions at level alpha_t = alpha / H (Bonferroni) or alpha (uncorrected).

Why Bonferroni covers. For each hop t, the calibration and test questions are
exchangeable, so P(S_t(test) > tau_t) <= alpha_t. If S_t(test) <= tau_t at every hop,
every prefix of g* passes its hop's threshold, so open expansion (search/open_expansion.py)
keeps g* at every hop and g*'s ends contain the gold answer it leads to: the set covers.
Hence P(miss) <= P(exists t: S_t(test) > tau_t) <= sum_t alpha_t (union bound), which is
alpha with Bonferroni. Uncorrected, the bound is only H * alpha: joint coverage can fall
below 1 - alpha, which is the failure the baseline exists to show.

Caveat: "expansion reaches g*'s gold answer" assumes expansion and the gold-sequence query
(graph/gold.py) agree on which paths exist. Expansion sees at most a fan-out cap of
neighbours per entity, checks simple paths only along witness chains, and may hit its
safety caps; each can lose a gold answer the query found. That only lowers coverage, and
the evaluation shows it. Scores are numbers here; nothing in this module touches Neo4j.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from cpr_neo4j.conformal.threshold import conformal_rank

Correction = Literal["bonferroni", "none"]


@dataclass(frozen=True)
class HopRecord:
    """One test question: its open-expansion survivors at the loosest taus, and its gold."""

    costs: np.ndarray  # (n_sequences, H) prefix costs
    ends: list[frozenset[str]]  # end entities per sequence
    gold: frozenset[str]


def gold_scores(sequences: Iterable[tuple[Hashable, Sequence[float]]], hops: int) -> np.ndarray:
    """S_1..S_H of the canonical gold sequence among (sequence, prefix costs); +inf if none."""
    best = min(
        ((max(c), key, tuple(c)) for key, c in sequences if len(c) == hops),
        default=None,
    )
    return np.full(hops, math.inf) if best is None else np.asarray(best[2], dtype=float)


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


def apply(records: Sequence[HopRecord], taus: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(covered, size) per question: a sequence survives if every prefix cost <= tau_t."""
    taus = np.asarray(taus, dtype=float)
    covered = np.zeros(len(records), dtype=bool)
    size = np.zeros(len(records), dtype=np.int64)
    for i, r in enumerate(records):
        if not len(r.ends):
            continue
        alive = (np.asarray(r.costs, dtype=float) <= taus).all(axis=1)
        answers = frozenset().union(*(e for e, a in zip(r.ends, alive, strict=True) if a))
        covered[i] = not answers.isdisjoint(r.gold)
        size[i] = len(answers)
    return covered, size
