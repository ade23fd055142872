"""Mondrian thresholds (conformal.mondrian): per-group coverage, pooling, storage."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from cpr_neo4j.conformal.mondrian import ALL, SMALL, Mondrian
from cpr_neo4j.conformal.threshold import conformal_threshold, rank
from cpr_neo4j.errors import BadInput

# group -> (questions in the pool, score location, spread): group 3 is the hard one
GROUPS = {1: (3000, 0.0, 1.0), 2: (2000, 1.0, 1.0), 3: (1000, 3.0, 2.0)}


def _pool(rng):
    g = np.concatenate([np.full(n, k) for k, (n, _, _) in GROUPS.items()])
    s = np.concatenate([rng.normal(mu, sd, size=n) for n, mu, sd in GROUPS.values()])
    s[rng.random(s.size) < 0.02] = np.inf  # a little missing recall
    return s, g


def test_group_coverage_holds_where_the_marginal_tau_under_covers_the_hard_group():
    """R random splits (half calibration) of one pool. Split conformal gives E[coverage]
    >= 1 - alpha in every group: the mean over R draws must reach it up to 3 standard
    errors of that mean (std over draws / sqrt(R)). The marginal tau must miss the hard
    group's target by more than 3 standard errors."""
    rng = np.random.default_rng(0)
    s, g = _pool(rng)
    alpha, draws = 0.1, 300
    cov = {k: [] for k in GROUPS}
    marg = []
    for _ in range(draws):
        perm = rng.permutation(s.size)
        cal, test = perm[: s.size // 2], perm[s.size // 2 :]
        m = Mondrian.from_scores(s[cal], g[cal])
        taus = m.taus(alpha, None, g[test])
        hit = np.isfinite(s[test]) & (s[test] <= taus)
        for k in GROUPS:
            cov[k].append(hit[g[test] == k].mean())
        tau_all = conformal_threshold(s[cal], alpha)
        hard = test[g[test] == 3]
        marg.append((np.isfinite(s[hard]) & (s[hard] <= tau_all)).mean())
    for k, c in cov.items():
        c = np.array(c)
        assert c.mean() >= 1 - alpha - 3 * c.std() / math.sqrt(draws), k
    marg = np.array(marg)
    assert marg.mean() + 3 * marg.std() / math.sqrt(draws) < 1 - alpha


def test_tau_is_the_groups_own_order_statistic():
    rng = np.random.default_rng(1)
    s, g = _pool(rng)
    m = Mondrian.from_scores(s, g)
    for k in GROUPS:
        for delta in (None, 0.05):
            mine = s[g == k]
            kk = rank(len(mine), 0.2, delta)
            assert m.tau(0.2, delta, k) == np.sort(mine)[kk - 1]
    assert m.unattainable(0.2, None, 1) is None and m.describe(1).startswith("own tau")


def test_small_groups_are_pooled_then_fall_back_to_the_marginal():
    rng = np.random.default_rng(2)
    s = rng.normal(size=200)
    g = np.r_[np.full(150, 1), np.full(20, 2), np.full(15, 3), np.full(15, 4)]
    m = Mondrian.from_scores(s, g, min_group=30)
    assert m.pools == {1: "g1", 2: SMALL, 3: SMALL, 4: SMALL} and m.pool_of(9) == SMALL
    small = s[g > 1]
    assert m.tau(0.1, None, 3) == conformal_threshold(small, 0.1) == m.tau(0.1, None, 9)
    assert "pool as a whole" in m.notes()[0]
    # pool below min_group: marginal over ALL calibration questions, reported as such
    m2 = Mondrian.from_scores(s[:170], g[:170], min_group=30)
    assert m2.pools[2] == ALL and m2.tau(0.1, None, 2) == conformal_threshold(s[:170], 0.1)
    assert "marginal" in m2.notes()[0] and "marginal" in m2.describe(7)


def test_unattainable_names_the_group_and_the_cause():
    s = np.r_[np.zeros(40), np.full(10, np.inf), np.zeros(20)]
    g = np.r_[np.full(50, 1), np.full(20, 2)]
    m = Mondrian.from_scores(s, g, min_group=5)
    why = m.unattainable(0.1, None, 1)  # 40 of 50 found: recall 80% < 90%
    assert why.startswith("group 1") and "retrieval recall" in why
    assert math.isinf(m.tau(0.1, None, 1)) and m.unattainable(0.1, None, 2) is None
    assert "too few" in m.unattainable(0.1, 0.05, 2)  # 0.9^20 > 0.05


def test_json_round_trip_is_strict_and_flat():
    rng = np.random.default_rng(3)
    s, g = _pool(rng)
    m = Mondrian.from_scores(s, g, min_group=1500)  # group 3 falls back
    d = json.loads(json.dumps(m.to_dict(), allow_nan=False))
    assert all(not isinstance(v, dict) for v in d.values())  # node-property friendly
    back = Mondrian.from_dict(d)
    gs = np.array([1, 2, 3, 4])
    for delta in (None, 0.05):
        assert np.array_equal(back.taus(0.1, delta, gs), m.taus(0.1, delta, gs))
    d["n"][2] = 2000  # group 3 would now have its own pool: stored pools disagree
    with pytest.raises(BadInput):
        Mondrian.from_dict(d)
    with pytest.raises(BadInput):
        Mondrian.from_scores([0.0, 1.0], [1.5, 2])
