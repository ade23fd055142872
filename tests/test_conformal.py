"""conformal.threshold against independent oracles: the plain and PAC ranks, tau, the
attainable alphas and why others are not, and the tolerance cut every answer set uses."""

from __future__ import annotations

import math
import warnings
from contextlib import contextmanager
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from cpr_neo4j.conformal.threshold import (
    TOLERANCE,
    answer_set,
    centred,
    conformal_rank,
    conformal_threshold,
    cut,
    cut_flat,
    min_questions,
    nonconformity,
    pac_rank,
    percent,
    rank,
    smallest_alpha,
    unattainable,
    within,
)
from cpr_neo4j.errors import BadInput

ALPHAS = ["0.05", "0.1", "0.2", "0.3", "0.4", "0.5", "0.6", "0.7", "0.8", "0.9"]


def _oracle_k(n: int, alpha: str) -> int:
    # exact decimal arithmetic: (n+1)(1-alpha) with alpha parsed from its decimal string
    return math.ceil((n + 1) * (1 - Fraction(alpha)))


def _brute_tau(scores: np.ndarray, alpha: str) -> float:
    """Smallest candidate value v with #{S <= v} >= (1-alpha)(n+1); +inf if none."""
    need = (1 - Fraction(alpha)) * (len(scores) + 1)
    ok = [v for v in sorted(set(scores.tolist())) if (scores <= v).sum() >= need]
    return ok[0] if ok else math.inf


@contextmanager
def _no_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


# ---------------------------------------------------------------- plain rank and tau


@pytest.mark.parametrize("alpha", ALPHAS)
def test_threshold_matches_oracles(alpha):
    rng = np.random.default_rng(1)
    for n in [1, 2, 3, 4, 9, 10, 19, 20, 99, 100, 257]:
        for ties in (False, True):
            scores = rng.normal(size=n)
            if ties:
                scores = np.round(scores, 0)
            k = _oracle_k(n, alpha)
            assert conformal_rank(n, float(alpha)) == k
            assert rank(n, float(alpha)) == k  # delta None: the plain rank
            with pytest.warns(UserWarning, match="too few") if k > n else _no_warning():
                tau = conformal_threshold(scores, float(alpha))
            assert tau == (np.sort(scores)[k - 1] if k <= n else math.inf)
            assert tau == _brute_tau(scores, alpha)
            # a list, a column vector and an array give the same tau
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                assert conformal_threshold(scores.tolist(), float(alpha)) == tau
                assert conformal_threshold(scores.reshape(-1, 1), float(alpha)) == tau


def test_float_alpha_does_not_shift_k():
    # 1 - 0.7 == 0.30000000000000004 in floats: a naive ceil gives 4 here, not 3
    assert math.ceil(10 * (1 - 0.7)) == 4
    assert conformal_rank(9, 0.7) == 3
    assert conformal_rank(99, 0.7) == 30
    assert conformal_rank(9, 0.3) == 7
    assert conformal_rank(19, 0.05) == 19
    assert conformal_rank(99, 0.1) == 90
    assert conformal_rank(0, 0.5) == 1  # no calibration question: k = 1 > n = 0
    for bad in (0.0, 1.0, -0.1, 1.5):
        with pytest.raises(BadInput):
            conformal_rank(10, bad)


def test_small_n_and_inf_scores():
    with pytest.warns(UserWarning, match="too few"):
        assert conformal_threshold([0.4], 0.3) == math.inf  # k = ceil(2 * 0.7) = 2 > 1
    assert conformal_threshold([0.4], 0.5) == 0.4  # k = 1
    assert conformal_threshold([0.4, 0.1], 0.4) == 0.4  # k = ceil(1.8) = 2
    with pytest.warns(UserWarning):
        assert conformal_threshold([0.4, 0.1], 0.3) == math.inf  # k = 3 > 2
    with pytest.warns(UserWarning):
        assert conformal_threshold([], 0.5) == math.inf
    # a question without any gold candidate scores +inf and can become tau itself
    with _no_warning():
        assert conformal_threshold([0.1, math.inf, 0.2], 0.4) == math.inf  # k = 3 <= n
    assert conformal_threshold([0.1, math.inf, 0.2], 0.5) == 0.2
    with pytest.raises(BadInput):
        conformal_threshold([0.1], 1.0)
    with pytest.raises(ValueError):
        conformal_threshold([0.1, float("nan")], 0.5)


def test_answer_set_nonconformity_and_centred():
    costs = {"a": 0.1, "b": 0.5, "c": 0.5, "d": 2.0}
    assert answer_set(costs, 0.5) == {"a", "b", "c"}  # ties at tau are all in
    assert answer_set(costs, math.inf) == set(costs)
    assert answer_set(costs, 0.0) == set()
    assert nonconformity(costs, {"c", "d", "zz"}) == 0.5  # the best gold answer's cost
    assert nonconformity(costs, {"zz"}) == math.inf  # no gold answer among the candidates
    assert nonconformity({}, {"a"}) == math.inf
    # a finite S(q) <= tau exactly when the set at tau holds a gold answer (+inf: never)
    for tau in (0.0, 0.1, 0.4, 0.5, 2.0, math.inf):
        for gold in ({"a"}, {"c", "d"}, {"d"}, {"zz"}):
            s = nonconformity(costs, gold)
            assert (math.isfinite(s) and s <= tau) == bool(answer_set(costs, tau) & gold)
    raw = {"a": -3.0, "b": -1.0, "c": 2.0}
    assert centred(raw, 0.0) == raw and centred({}, 0.5) == {}
    assert centred(raw, 0.5) == {"a": -1.5, "b": 0.5, "c": 3.5}
    assert centred(raw, 1.0)["a"] == 0.0  # the margin score: the best answer scores 0


# ---------------------------------------------------------------- PAC rank


def _scipy_pac_rank(n: int, alpha: float, delta: float) -> int:
    """The definition: smallest k in 1..n with P(Binomial(n, 1-alpha) >= k) <= delta."""
    for k in range(1, n + 1):
        if stats.binom.sf(k - 1, n, 1 - alpha) <= delta:
            return k
    return n + 1


@pytest.mark.parametrize("n", [1, 5, 10, 29, 50, 100, 257, 1000])
@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.3, 0.5])
@pytest.mark.parametrize("delta", [0.01, 0.05, 0.2])
def test_pac_rank_is_the_smallest_k_whose_binomial_tail_is_below_delta(n, alpha, delta):
    k = pac_rank(n, alpha, delta)
    assert k == _scipy_pac_rank(n, alpha, delta)
    if k <= n:  # the defining inequality, and k - 1 fails it
        assert stats.binom.sf(k - 1, n, 1 - alpha) <= delta
        # the same through the Beta law of the k-th order statistic's coverage
        assert stats.beta.cdf(1 - alpha, k, n + 1 - k) <= delta + 1e-12
    if k > 1:
        assert stats.binom.sf(k - 2, n, 1 - alpha) > delta
    assert k >= conformal_rank(n, alpha)  # PAC never asks for less than the plain rank
    assert rank(n, alpha, delta) == k


def test_pac_rank_edges():
    assert pac_rank(0, 0.1, 0.05) == 1  # nothing to rank: k = 1 > n
    assert pac_rank(10, 0.1, 0.05) == 11  # 0.9^10 = 0.35 > 0.05: even k = n fails
    assert pac_rank(29, 0.1, 0.05) == 29  # 0.9^29 = 0.047 <= 0.05
    for bad in (0.0, 1.0, -0.5, 2.0):
        with pytest.raises(BadInput):
            pac_rank(10, 0.1, bad)
    with pytest.raises(BadInput):
        pac_rank(10, 1.0, 0.05)


def test_pac_tau_covers_with_probability_one_minus_delta_over_calibration_draws():
    """Uniform scores: the coverage of tau is tau itself, so each draw's coverage is
    exact. The share of R draws whose coverage reaches 1 - alpha estimates a probability
    >= 1 - delta; allowed shortfall: 3 binomial standard errors sqrt(delta(1-delta)/R)
    (0.014 here). The plain tau reaches it only about half the time (its promise is on
    average over draws: its mean coverage must reach 1 - alpha up to 3 standard errors of
    the mean, std/sqrt(R))."""
    rng = np.random.default_rng(3)
    n, alpha, delta, draws = 200, 0.1, 0.1, 4000
    cal = np.sort(rng.random((draws, n)), axis=1)
    pac = cal[:, pac_rank(n, alpha, delta) - 1]
    plain = cal[:, conformal_rank(n, alpha) - 1]
    tol = 3 * math.sqrt(delta * (1 - delta) / draws)
    assert (pac >= 1 - alpha).mean() >= 1 - delta - tol
    assert (plain >= 1 - alpha).mean() < 0.75  # the plain tau is no PAC guarantee
    assert plain.mean() >= 1 - alpha - 3 * plain.std() / math.sqrt(draws)
    # and the same through conformal_threshold's own reading of the scores
    for row in cal[:20]:
        assert conformal_threshold(row, alpha, delta) == row[pac_rank(n, alpha, delta) - 1]


# ---------------------------------------------------------------- attainable alphas


@pytest.mark.parametrize("delta", [None, 0.05])
@pytest.mark.parametrize("n, n_finite", [(1487, 1456), (300, 300), (40, 20), (100, 1)])
def test_smallest_alpha_is_the_boundary_of_finite_taus(n, n_finite, delta):
    a = smallest_alpha(n, n_finite, delta)
    if a < 1:
        assert rank(n, min(a + 1e-9, 0.999999), delta) <= n_finite  # finite just above
    if a > 1e-6:
        assert rank(n, a - 1e-6, delta) > n_finite  # +inf just below
    assert smallest_alpha(n, n_finite, 0.05) >= smallest_alpha(n, n_finite)  # PAC asks more
    if delta is None:
        assert a == pytest.approx(1 - n_finite / (n + 1))
    else:  # 1 - the delta-quantile of Beta(n_finite, n + 1 - n_finite)
        assert a == pytest.approx(1 - stats.beta.ppf(delta, n_finite, n + 1 - n_finite), abs=1e-9)
    # unattainable agrees with the boundary
    if a < 0.99:
        assert unattainable(n, n_finite, min(a + 1e-6, 0.999), delta) is None
    if a > 1e-3:
        assert unattainable(n, n_finite, a - 1e-3, delta) is not None
    assert smallest_alpha(n, 0, delta) == 1.0  # nothing finite: no alpha works


def test_unattainable_names_its_cause():
    assert unattainable(1487, 1456, 0.1) is None
    recall = unattainable(1487, 1456, 0.003)
    assert "retrieval recall" in recall and "1456 of the 1487" in recall and "0.022" in recall
    assert "too few" not in recall
    assert "99.7%" in recall  # the target is never rounded up to 100%
    few = unattainable(1487, 1487, 0.0002)
    assert "too few" in few and f"at least {min_questions(0.0002)}" in few
    assert "recall" not in few
    assert "too few" in unattainable(10, 10, 0.1, delta=0.05)  # 0.9^10 > 0.05
    assert "delta=0.05" in unattainable(10, 10, 0.1, delta=0.05)
    assert unattainable(29, 29, 0.1, delta=0.05) is None  # 0.9^29 <= 0.05
    pac_recall = unattainable(1000, 905, 0.1, delta=0.05)  # plain k = 901 <= 905, PAC more
    assert unattainable(1000, 905, 0.1) is None and "retrieval recall" in pac_recall
    assert min_questions(0.1) == 9 and conformal_rank(9, 0.1) <= 9 < conformal_rank(8, 0.1) + 1
    assert conformal_rank(8, 0.1) > 8  # 8 questions are too few at alpha 0.1
    assert min_questions(0.1, 0.05) == 29 and 0.9**29 <= 0.05 < 0.9**28
    assert percent(0.9) == "90%" and percent(0.997) == "99.7%" and percent(0.9999) == "99.99%"


def test_tau_is_inf_exactly_when_unattainable():
    rng = np.random.default_rng(4)
    for n, n_inf in [(50, 0), (50, 5), (200, 30), (9, 0), (30, 0)]:
        s = np.r_[rng.normal(size=n - n_inf), np.full(n_inf, math.inf)]
        for alpha in (0.02, 0.05, 0.1, 0.2, 0.5):
            for delta in (None, 0.05):
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    tau = conformal_threshold(s, alpha, delta)
                why = unattainable(n, n - n_inf, alpha, delta)
                assert math.isinf(tau) == (why is not None), (n, n_inf, alpha, delta)


# ---------------------------------------------------------------- the tolerance cut


def test_within_only_enlarges_by_the_stated_tolerance():
    rng = np.random.default_rng(5)
    s = rng.normal(size=2000)
    for tau in (-1.0, 0.0, 0.3, 25.0):
        band = TOLERANCE * (1 + abs(tau))
        got = within(s, tau)
        assert (got >= (s <= tau)).all()  # a superset of the exact cut
        assert np.array_equal(got, s <= tau + band)
        assert within([tau + 0.5 * band], tau)[0] and not within([tau + 2 * band], tau)[0]
        assert within([tau], tau, eps=0.0)[0] and not within([tau + band], tau, eps=0.0)[0]
    # one tau per score
    taus = rng.normal(size=s.size)
    assert np.array_equal(within(s, taus), s <= taus + TOLERANCE * (1 + np.abs(taus)))
    # infinities and NaN
    odd = np.array([-math.inf, -1e300, 0.0, 1e300, math.inf, math.nan])
    assert within(odd, math.inf).tolist() == [True] * 5 + [False]
    assert within(odd, -math.inf).tolist() == [True] + [False] * 5
    assert within(odd, 0.0).tolist() == [True, True, True, False, False, False]


def test_cut_nonempty_adds_the_whole_top_level():
    # levels: 1.0 (three answers, one recomputed 1e-7 higher), 2.0, 3.0
    s = np.array([2.0, 1.0, 3.0, 1.0 + 1e-7, 1.0])
    assert cut(s, 0.5, nonempty=False).tolist() == [False] * 5  # may be empty
    assert cut(s, 0.5).tolist() == [False, True, False, True, True]  # the whole top level
    assert cut(s, 2.0).tolist() == [True, True, False, True, True]
    assert cut(s, 2.0, nonempty=False).tolist() == cut(s, 2.0).tolist()
    assert cut(s, math.inf).all() and cut(s, math.inf, nonempty=False).all()
    assert cut(np.zeros(0), 1.0).tolist() == []
    rng = np.random.default_rng(6)
    for _ in range(300):
        x = np.round(rng.normal(size=int(rng.integers(1, 12))), 1)  # ties
        tau = float(rng.normal())
        plain, full = cut(x, tau, nonempty=False), cut(x, tau)
        assert (full >= plain).all() and full.any()  # superset, never empty
        assert np.array_equal(full, plain | (x <= x.min() + TOLERANCE * (1 + abs(x.min()))))
        # ties never split: equal scores are in or out together
        for v in np.unique(x):
            assert len(set(full[x == v].tolist())) == 1


def test_cut_flat_equals_the_per_question_cut():
    rng = np.random.default_rng(7)
    nq = 60
    sizes = rng.integers(0, 9, size=nq)  # some questions without candidates
    q = np.repeat(np.arange(nq), sizes)
    s = np.round(rng.normal(size=q.size), 1)
    per_q = rng.normal(size=nq)
    per_q[::7] = math.inf
    for tau in (-0.5, 0.0, 0.7, math.inf, per_q):
        for nonempty in (True, False):
            got = cut_flat(q, s, tau, nq, nonempty=nonempty)
            for i in range(nq):
                t = tau[i] if np.ndim(tau) else tau
                want = cut(s[q == i], t, nonempty=nonempty)
                assert np.array_equal(got[q == i], want), (i, tau, nonempty)
    assert cut_flat(np.zeros(0, int), np.zeros(0), 1.0, 3).tolist() == []
