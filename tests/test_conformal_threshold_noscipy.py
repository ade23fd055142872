"""threshold.py without scipy: PAC ranks and attainable alphas against scipy.stats, exact
ties against rational arithmetic, and the tolerance / nonempty cuts."""

from __future__ import annotations

import math
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from cpr_neo4j.conformal.threshold import (
    TOLERANCE,
    cut,
    cut_flat,
    pac_rank,
    smallest_alpha,
    within,
)

NS = sorted({*range(1, 201), *np.unique(np.geomspace(200, 5000, 40).astype(int)).tolist()})
ALPHAS = [0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.9]
DELTAS = [1e-4, 0.01, 0.05, 0.1, 0.2, 0.5]


def _exact_rank(n: int, alpha: float, delta: float) -> int:
    """The definition in rationals (alpha, delta read as decimals): an independent oracle."""
    p = 1 - Fraction(alpha).limit_denominator(10**9)
    d = Fraction(delta).limit_denominator(10**9)
    big_p, den = p.numerator, p.denominator
    big_q = den - big_p
    tail = 0
    for k in range(n, 0, -1):  # tail(k) = sum_{j>=k} C(n,j) P^j Q^(n-j) / den^n
        tail += math.comb(n, k) * big_p**k * big_q ** (n - k)
        if tail * d.denominator > d.numerator * den**n:
            return k + 1
    return 1


def test_import_does_not_load_scipy_stats():
    code = "import cpr_neo4j.conformal.threshold, sys; print('scipy.stats' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_pac_rank_equals_scipy_except_exact_ties_which_follow_the_definition():
    """scipy's binom.sf rounds exact ties (alpha = delta = 0.5, odd n: the tail is exactly
    1/2) either way; there our rank must equal the rational oracle, everywhere else scipy."""
    ties = 0
    for n in NS:
        ks = np.arange(1, n + 1)
        sf = stats.binom.sf(ks[None, :] - 1, n, 1 - np.array(ALPHAS)[:, None])  # alpha x k
        for i, a in enumerate(ALPHAS):
            for d in DELTAS:
                ok = np.flatnonzero(sf[i] <= d)
                ref = int(ks[ok[0]]) if ok.size else n + 1
                got = pac_rank(n, a, d)
                if got != ref:
                    ties += 1
                    assert (a, d) == (0.5, 0.5) and n % 2 == 1, (n, a, d, got, ref)
                    assert got == _exact_rank(n, a, d) == (n + 1) // 2
    assert ties < len(NS)  # a handful, all of them exact ties


@pytest.mark.parametrize("n", [1, 2, 3, 7, 20, 51])
def test_pac_rank_equals_the_rational_oracle(n):
    for a in ALPHAS + [0.25, 0.75]:
        for d in DELTAS + [0.25, 0.125]:
            assert pac_rank(n, a, d) == _exact_rank(n, a, d), (n, a, d)


def test_tiny_delta_does_not_underflow():
    # (1-alpha)^n <= delta needs n >= log(1e-12)/log(0.9) = 262.3: rank n+1 below, n at 263
    assert pac_rank(262, 0.1, 1e-12) == 263
    assert pac_rank(263, 0.1, 1e-12) == 263
    assert pac_rank(100000, 0.1, 0.05) == int(stats.binom.isf(0.05, 100000, 0.9)) + 1


def test_smallest_alpha_equals_one_minus_the_beta_quantile():
    worst = 0.0
    for n in [1, 2, 3, 5, 10, 29, 100, 257, 1000, 1487, 5000]:
        for nf in sorted({1, 2, n // 3, n // 2, n - 5, n - 1, n} & set(range(1, n + 1))):
            for d in [1e-6, 1e-3, 0.05, 0.1, 0.5, 0.9]:
                ref = 1 - stats.beta.ppf(d, nf, n + 1 - nf)
                worst = max(worst, abs(smallest_alpha(n, nf, d) - ref))
    assert worst < 1e-9
    assert smallest_alpha(10, 0, 0.05) == 1.0 and smallest_alpha(9, 9) == pytest.approx(0.1)


def test_within_only_enlarges_and_handles_infinities():
    s = np.array([-np.inf, -2.0, 0.0, 1.0, 1.0 + TOLERANCE, 1.0 + 3 * TOLERANCE, np.inf])
    assert within(s, 1.0).tolist() == [True, True, True, True, True, False, False]
    assert within(s, 1.0, eps=0).tolist() == [True, True, True, True, False, False, False]
    assert within(s, np.inf).all() and within(s, -np.inf).tolist() == [True] + [False] * 6
    assert not within(np.nan, np.inf)
    tau = np.array([0.0, 5.0])  # one tau per score broadcasts
    assert within(np.array([1.0, 1.0]), tau).tolist() == [False, True]


def test_nonempty_cut_is_a_superset_and_never_empty():
    rng = np.random.default_rng(0)
    for _ in range(200):
        k = int(rng.integers(1, 30))
        s = np.round(rng.normal(size=k), 1)  # ties are common
        tau = float(rng.normal() - 1.5)
        plain, ne = cut(s, tau, nonempty=False), cut(s, tau)
        assert (ne >= plain).all() and ne.any()
        assert ne[s == s.min()].all()  # the whole top level is kept together
    assert cut(np.array([]), 0.0).size == 0


def test_cut_flat_equals_the_per_question_cut():
    rng = np.random.default_rng(1)
    nq = 50
    q = rng.integers(0, nq, size=2000)
    s = np.round(rng.normal(size=2000), 1)
    taus = rng.normal(size=nq) - 1
    for ne in (False, True):
        flat = cut_flat(q, s, taus, nq, nonempty=ne)
        for i in range(nq):
            assert np.array_equal(flat[q == i], cut(s[q == i], taus[i], nonempty=ne))
        assert np.array_equal(cut_flat(q, s, 0.3, nq, nonempty=ne), _per_q(q, s, 0.3, nq, ne))


def _per_q(q, s, tau, nq, ne):
    out = np.zeros(len(s), bool)
    for i in range(nq):
        out[q == i] = cut(s[q == i], tau, nonempty=ne)
    return out
