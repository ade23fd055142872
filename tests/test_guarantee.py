"""Calibration-conditional (PAC) thresholds and attainable alphas (conformal.threshold)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from cpr_neo4j.conformal.threshold import (
    conformal_rank,
    conformal_threshold,
    min_questions,
    pac_rank,
    percent,
    rank,
    smallest_alpha,
    unattainable,
)
from cpr_neo4j.errors import BadInput
from cpr_neo4j.stages.calibrate import tau_for, why_unattainable


@pytest.mark.parametrize("n, alpha, delta", [(100, 0.1, 0.05), (1487, 0.3, 0.05), (50, 0.5, 0.2)])
def test_pac_rank_is_the_smallest_order_statistic_with_beta_tail_below_delta(n, alpha, delta):
    # Coverage of the k-th of n order statistics is Beta(k, n+1-k): checked through the
    # Beta law directly, not the binomial tail the implementation uses.
    k = pac_rank(n, alpha, delta)
    assert stats.beta.cdf(1 - alpha, k, n + 1 - k) <= delta + 1e-12
    assert stats.beta.cdf(1 - alpha, k - 1, n + 2 - k) > delta
    assert k >= conformal_rank(n, alpha)  # PAC never asks for less than the plain rank
    assert rank(n, alpha) == conformal_rank(n, alpha) and rank(n, alpha, delta) == k


def test_pac_tau_covers_with_probability_one_minus_delta_over_draws():
    """Uniform scores: the coverage of tau is tau itself. Over R draws the share of draws
    whose coverage reaches 1 - alpha is >= 1 - delta, up to 4 binomial standard errors;
    the plain tau reaches it in only about half the draws."""
    rng = np.random.default_rng(3)
    n, alpha, delta, draws = 200, 0.1, 0.1, 4000
    cal = np.sort(rng.random((draws, n)), axis=1)
    pac = cal[:, pac_rank(n, alpha, delta) - 1]
    plain = cal[:, conformal_rank(n, alpha) - 1]
    tol = 4 * math.sqrt(delta * (1 - delta) / draws)
    assert (pac >= 1 - alpha).mean() >= 1 - delta - tol
    assert (plain >= 1 - alpha).mean() < 0.75
    assert plain.mean() >= 1 - alpha - 4 * plain.std() / math.sqrt(draws)  # plain: on average


@pytest.mark.parametrize("delta", [None, 0.05])
@pytest.mark.parametrize("n, n_finite", [(1487, 1456), (300, 300), (40, 20)])
def test_smallest_alpha_is_the_boundary_of_finite_taus(n, n_finite, delta):
    a = smallest_alpha(n, n_finite, delta)
    if a < 1:
        assert rank(n, min(a + 1e-9, 0.999999), delta) <= n_finite
    if a > 1e-6:
        assert rank(n, a - 1e-6, delta) > n_finite
    assert smallest_alpha(n, n_finite, 0.05) >= smallest_alpha(n, n_finite)


def test_unattainable_names_its_cause():
    assert unattainable(1487, 1456, 0.1) is None
    recall = unattainable(1487, 1456, 0.003)
    assert "retrieval recall" in recall and "1456 of the 1487" in recall and "0.022" in recall
    assert "99.7%" in recall  # the target is never rounded up to 100%
    few = unattainable(1487, 1487, 0.0002)
    assert "too few" in few and f"at least {min_questions(0.0002)}" in few
    assert "too few" in unattainable(10, 10, 0.1, delta=0.05)  # 0.9^10 > 0.05
    assert min_questions(0.1, 0.05) == 29 and 0.9**29 <= 0.05 < 0.9**28
    assert percent(0.9) == "90%" and percent(0.997) == "99.7%"


def test_tau_for_serves_plain_and_pac_from_stored_scores():
    scores = np.sort(np.random.default_rng(0).normal(size=500))
    cal = {"scores": [*scores.tolist(), math.inf, math.inf]}
    plain, pac = tau_for(cal, 0.2), tau_for(cal, 0.2, 0.05)
    assert plain == conformal_threshold(cal["scores"], 0.2) and pac > plain
    assert why_unattainable(cal, 0.2) is None
    assert math.isinf(tau_for(cal, 0.003)) and "recall" in why_unattainable(cal, 0.003)
    assert "too few" in why_unattainable(cal, 0.001)
    with pytest.raises(BadInput):
        pac_rank(10, 0.1, 1.5)


def test_centred_costs_shift_each_question_by_its_best_cost():
    from cpr_neo4j.conformal.threshold import centred

    costs = {"a": -3.0, "b": -1.0, "c": 2.0}
    assert centred(costs, 0.0) == costs and centred({}, 0.5) == {}
    half = centred(costs, 0.5)
    assert half == {"a": -1.5, "b": 0.5, "c": 3.5}
    assert sorted(half, key=half.get) == sorted(costs, key=costs.get)  # same ranking
    assert centred(costs, 1.0)["a"] == 0.0  # the margin score: the best answer scores 0
