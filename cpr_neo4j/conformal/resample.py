"""Resampling views of one variant's coverage, group-conditional thresholds included.

- `cal_test_interval`: a 95% interval over calibration AND test redraws, both resampled by
  question template (outcomes cluster by template), tau recomputed in each replicate; with
  groups the redraw is stratified by the calibration's pools (each pool's tau from its own
  resampled calibration questions), combined with the test split's pool shares.
- `resplits`: the pooled view. Calibration and test questions pooled, then `draws` random
  re-splits of the pool into a calibration share of the same size and a test share (500 by
  default, so "held" has a standard error under 2.3 points): mean and 5th percentile of
  ECR, and `held` = the share of calibration draws whose coverage on the rest reached
  1 - alpha (a PAC threshold promises at least 1 - delta of them).

Coverage of a question at threshold tau is "its best gold answer's score is within tau",
or, when sets are never empty, "its top-ranked level holds a gold answer": such questions
enter with score COVERED (a finite number below any threshold: covered whatever tau is).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from cpr_neo4j.conformal.diagnostics import cluster_draws_cal_test
from cpr_neo4j.conformal.mondrian import ALL, Mondrian
from cpr_neo4j.conformal.sets import slack
from cpr_neo4j.conformal.threshold import rank

COVERED = -1e300


def effective(scores: np.ndarray, top_hit: np.ndarray, nonempty: bool) -> np.ndarray:
    """S, or COVERED where the always-included top level already covers the question."""
    return np.where(top_hit, COVERED, scores) if nonempty else scores


def cal_test_interval(
    cal: np.ndarray,
    test: np.ndarray,
    alpha: float,
    delta: float | None,
    cal_pool: np.ndarray,
    test_pool: np.ndarray,
    cal_clusters: np.ndarray,
    test_clusters: np.ndarray,
    boot: int,
    seed: int,
) -> tuple[float, float]:
    """95% interval of coverage over calibration + test cluster redraws, per pool."""
    draws = np.zeros(boot)
    for k, pool in enumerate(np.unique(test_pool)):
        c = np.ones(len(cal), bool) if pool == ALL else cal_pool == pool
        t = test_pool == pool
        if not c.any():
            continue  # a pool the calibration never saw: its questions count as misses
        d = cluster_draws_cal_test(
            cal[c], test[t], alpha, delta, cal_clusters[c], test_clusters[t], boot, seed + k
        )
        draws += d * t.mean()
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return float(lo), float(hi)


def resplits(
    pool_scores: np.ndarray,
    pool_groups: np.ndarray,
    n_cal: int,
    alpha: float,
    delta: float | None,
    draws: int = 500,
    seed: int = 0,
    pools: Mapping[int, str] | None = None,
    threshold_scores: np.ndarray | None = None,
    replan: bool = False,
) -> tuple[float, float, float]:
    """(mean ECR, 5th percentile, held share) over random calibration/test re-splits of
    the pooled questions; thresholds per pool (`pools`: group -> pool name; None: one).
    replan (with pools): each draw plans its own pools from its calibration share's group
    counts, as `cpr calibrate` would have (conformal/mondrian.py), instead of the fixed map."""
    s = np.asarray(pool_scores, dtype=float)
    th = s if threshold_scores is None else np.asarray(threshold_scores, dtype=float)
    if replan and pools is not None:
        return _replanned(s, th, np.asarray(pool_groups), n_cal, alpha, delta, draws, seed)
    every = -1
    if pools is None:
        labels = np.zeros(len(s), dtype=np.int64)
    else:
        names = {name: i for i, name in enumerate(sorted(set(pools.values())))}
        fallback = len(names)
        labels = np.array([names.get(pools.get(int(g), ""), fallback) for g in pool_groups])
        every = names.get(ALL, -1)
    rng = np.random.default_rng(seed)
    ecr = np.empty(draws)
    for d in range(draws):
        perm = rng.permutation(len(s))
        cal, test = perm[:n_cal], perm[n_cal:]
        tau = np.full(len(s), math.inf)
        for lab in np.unique(labels[test]):
            cs = np.sort(th[cal] if lab == every else th[cal][labels[cal] == lab])
            k = rank(len(cs), alpha, delta) if len(cs) else 1
            tau[labels == lab] = cs[k - 1] if 0 < k <= len(cs) else math.inf
        ecr[d] = (np.isfinite(s[test]) & (s[test] <= slack(tau[test]))).mean()
    held = float((ecr >= 1 - alpha - 1e-12).mean())
    return float(ecr.mean()), float(np.percentile(ecr, 5)), held


def _replanned(s, th, groups, n_cal, alpha, delta, draws, seed) -> tuple[float, float, float]:
    rng = np.random.default_rng(seed)  # the same permutations as the fixed-pool loop
    ecr = np.empty(draws)
    for d in range(draws):
        perm = rng.permutation(len(s))
        cal, test = perm[:n_cal], perm[n_cal:]
        tau = Mondrian.from_scores(th[cal], groups[cal]).taus(alpha, delta, groups[test])
        ecr[d] = (np.isfinite(s[test]) & (s[test] <= slack(tau))).mean()
    held = float((ecr >= 1 - alpha - 1e-12).mean())
    return float(ecr.mean()), float(np.percentile(ecr, 5)), held
