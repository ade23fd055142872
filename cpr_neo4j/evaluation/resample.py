"""Resampling views of one variant's coverage, group-conditional thresholds included.

- `cal_test_interval`: a 95% interval over calibration AND test redraws, both resampled by
  question template (outcomes cluster by template), tau recomputed in each replicate; with
  groups the pools are re-planned in every replicate from its own calibration draw's group
  counts (a group near the floor gets its own threshold in some replicates and the
  fallback in others, as it would over calibration draws), each pool's tau from its
  resampled calibration questions.
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

from cpr_neo4j.conformal.mondrian import ALL, MIN_GROUP, Mondrian, group_floor, plan_pools
from cpr_neo4j.conformal.sets import slack
from cpr_neo4j.conformal.threshold import TOLERANCE, rank, within
from cpr_neo4j.errors import BadInput
from cpr_neo4j.evaluation.diagnostics import CHUNK, _clusters, _counts

COVERED = -1e300


def effective(scores: np.ndarray, top_hit: np.ndarray, nonempty: bool) -> np.ndarray:
    """S, or COVERED where the always-included top level already covers the question."""
    return np.where(top_hit, COVERED, scores) if nonempty else scores


def cal_test_interval(
    cal: np.ndarray,
    test: np.ndarray,
    alpha: float,
    delta: float | None,
    cal_groups: np.ndarray,
    test_groups: np.ndarray,
    cal_clusters: np.ndarray,
    test_clusters: np.ndarray,
    boot: int,
    seed: int,
    grouped: bool = True,
    min_group: int = MIN_GROUP,
    eps: float = TOLERANCE,
) -> tuple[float, float]:
    """95% interval of coverage over calibration + test cluster redraws (interval_draws)."""
    d = interval_draws(
        cal, test, alpha, delta, cal_groups, test_groups, cal_clusters, test_clusters, boot,
        seed, grouped, min_group, eps,
    )  # fmt: skip
    lo, hi = np.percentile(d, [2.5, 97.5])
    return float(lo), float(hi)


def interval_draws(
    cal, test, alpha, delta, cal_groups, test_groups, cal_clusters, test_clusters, boot, seed,
    grouped=True, min_group=MIN_GROUP, eps=TOLERANCE,
) -> np.ndarray:  # fmt: skip
    """Replicate coverages: each replicate redraws calibration clusters and test clusters
    with replacement (one multinomial draw each, in chunks of CHUNK replicates), then plans
    its pools from ITS calibration share's group counts with the test question counted in
    its group (mondrian.plan_pools, as `cpr calibrate` + `cpr ask` would on that sample), and
    cuts each test question at its pool's rank(n_pool, alpha, delta)-th smallest resampled
    calibration score. grouped=False: one pool of every calibration question."""
    cal = np.asarray(cal, dtype=float)
    test = np.asarray(test, dtype=float)
    if not cal.size or not test.size:
        raise BadInput("the interval needs calibration and test questions")
    order = np.argsort(cal, kind="stable")
    cal_sorted = cal[order]
    g_c = np.asarray(cal_groups, dtype=np.int64)[order] if grouped else np.zeros(cal.size, int)
    g_t = np.asarray(test_groups, dtype=np.int64) if grouped else np.zeros(test.size, int)
    labels = sorted(set(g_c.tolist()) | set(g_t.tolist()))
    col = {g: i for i, g in enumerate(labels)}
    onehot = g_c[:, None] == np.array(labels)[None, :]  # sorted calibration x group
    inv_c, nc = _clusters(cal_clusters, cal.size)
    inv_c = inv_c[order]
    inv_t, nt = _clusters(test_clusters, test.size)
    t_col = np.array([col[g] for g in g_t.tolist()])
    floor = group_floor(alpha, delta, min_group)
    rng = np.random.default_rng(seed)
    ranks: dict[int, int] = {}
    out = []
    for start in range(0, boot, CHUNK):
        b = min(CHUNK, boot - start)
        mc, mt = _counts(rng, nc, b), _counts(rng, nt, b)
        w = mc[:, inv_c]  # copies of each sorted calibration score per replicate
        counts = w @ onehot  # replicate x group: calibration questions drawn per group
        tau = np.full((b, len(labels)), math.inf)
        for r in range(b):
            n_r = {g: int(counts[r, i]) for i, g in enumerate(labels) if counts[r, i]}
            for g in np.unique(g_t).tolist() if grouped else [0]:
                if not grouped:
                    members = labels
                else:
                    pools, fallback = plan_pools(n_r, floor, g)
                    name = pools.get(g, fallback)
                    members = [h for h, p in pools.items() if name == ALL or p == name]
                mask = onehot[:, [col[h] for h in members if h in col]].any(axis=1)
                cum = np.cumsum(w[r] * mask)
                n_pool = int(cum[-1])
                k = ranks.setdefault(n_pool, rank(n_pool, alpha, delta)) if n_pool else 1
                if 0 < k <= n_pool:
                    tau[r, col[g]] = cal_sorted[int(np.searchsorted(cum, k))]
        wt = mt[:, inv_t]
        hit = np.isfinite(test)[None, :] & within(test[None, :], tau[:, t_col], eps)
        out.append((wt * hit).sum(axis=1) / wt.sum(axis=1))
    return np.concatenate(out)


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
