"""Mondrian thresholds (conformal.mondrian): per-group coverage, pooling, storage."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from cpr_neo4j.conformal.mondrian import ALL, SMALL, Mondrian, group_floor, plan_pools
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
    assert m.unattainable(0.2, None, 1) is None and m.describe(1, 0.2).startswith("own tau")


def test_small_groups_are_pooled_then_fall_back_to_the_marginal():
    rng = np.random.default_rng(2)
    s = rng.normal(size=200)
    g = np.r_[np.full(150, 1), np.full(20, 2), np.full(15, 3), np.full(15, 4)]
    m = Mondrian.from_scores(s, g, min_group=30)
    assert [m.pool_of(k, 0.1) for k in (1, 2, 3, 4, 9)] == ["g1"] + [SMALL] * 4
    small = s[g > 1]
    assert m.tau(0.1, None, 3) == conformal_threshold(small, 0.1) == m.tau(0.1, None, 9)
    assert "pool as a whole" in m.notes(0.1)[0]
    # pool below the floor: the threshold of ALL calibration questions, reported as such
    m2 = Mondrian.from_scores(s[:170], g[:170], min_group=30)
    assert m2.pool_of(2, 0.1) == ALL and m2.tau(0.1, None, 2) == conformal_threshold(s[:170], 0.1)
    assert "marginal" in m2.notes(0.1)[0] and "marginal" in m2.describe(7, 0.1)
    assert "no promise for those groups in particular" in m2.notes(0.1)[0]


def test_the_group_floor_follows_alpha_and_delta():
    """At alpha = delta = 0.05 a finite PAC threshold needs 59 questions: a group of 30-58
    is pooled with the small groups (not refused while a group of 29 is answered)."""
    assert group_floor(0.05, 0.05) == 59 and group_floor(0.1, 0.05) == 30
    assert group_floor(0.1, None) == 30 and group_floor(0.02, None) == 49
    rng = np.random.default_rng(4)
    s = rng.normal(size=300)
    g = np.r_[np.full(200, 1), np.full(40, 2), np.full(29, 3), np.full(31, 4)]
    m = Mondrian.from_scores(s, g)
    for k in (2, 3, 4):  # every group below 59: pooled, 100 questions, all answered
        assert m.pool_of(k, 0.05, 0.05) == SMALL and m.unattainable(0.05, 0.05, k) is None
        assert m.pool(0.05, 0.05, k)[1] == 100
    assert m.pool_of(2, 0.1, 0.05) == "g2" and m.pool_of(3, 0.1, 0.05) == ALL  # floor 30
    assert m.pool_of(1, 0.05, 0.05) == "g1"
    assert "fewer than 59" in m.notes(0.05, 0.05)[0]


def test_the_plan_counts_the_test_question():
    """plan_pools with test_group counts the test question in its group: own at n_g >=
    floor for that group; another group with exactly `floor` questions is small then."""
    counts = {1: 100, 2: 30, 3: 10}
    assert plan_pools(counts, 30) == ({1: "g1", 2: "g2", 3: ALL}, ALL)
    pools, fallback = plan_pools(counts, 30, test_group=2)
    assert pools[2] == "g2" and pools[3] == ALL
    pools, fallback = plan_pools(counts, 30, test_group=3)  # 2 (30 + 0) is small here
    assert pools[3] == pools[2] == SMALL and fallback == SMALL
    pools, _ = plan_pools(counts, 30, test_group=7)  # unseen: counted once
    assert pools[7] == SMALL and pools[2] == SMALL and pools[3] == SMALL
    m = Mondrian.from_scores(
        np.arange(140.0), np.r_[np.full(100, 1), np.full(30, 2), np.full(10, 3)]
    )
    assert m.pool(0.1, None, 3)[1] == 40 and m.pool(0.1, None, 2)[1] == 30


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
    with pytest.raises(BadInput):
        Mondrian.from_scores([0.0, 1.0], [1.5, 2])
