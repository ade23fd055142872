"""Evaluation diagnostics (evaluation.diagnostics)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from cpr_neo4j.conformal.threshold import cut, rank
from cpr_neo4j.evaluation import diagnostics as dg


def test_miscoverage_test_counts_and_p_values():
    cal = np.r_[np.ones(10, bool), np.zeros(90, bool)]
    test = np.r_[np.ones(30, bool), np.zeros(170, bool)]
    r = dg.miscoverage_test(cal, test, 0.1)
    assert (r.miss_cal, r.miss_test, r.n_cal, r.n_test) == (10, 30, 100, 200)
    assert r.rate_test == 0.15
    # exact one-sided binomial: P(X >= 30), X ~ Bin(200, 0.1)
    assert r.p_binom == pytest.approx(stats.binom.sf(29, 200, 0.1), rel=1e-12)
    # two-sided Fisher: sum of hypergeometric tables no more likely than the observed one
    h = stats.hypergeom(300, 40, 100)
    pmf = h.pmf(np.arange(41))
    assert r.p_fisher == pytest.approx(pmf[pmf <= h.pmf(10) * (1 + 1e-7)].sum(), rel=1e-9)
    assert r.flag == (r.p_fisher < 0.05 or r.p_binom < 0.05) and "p_fisher" in r.to_dict()


def test_miscoverage_flags_a_shift_and_rarely_flags_none():
    """Under no shift (test misses ~ Bin(n, alpha) exactly) the exact binomial test flags
    at most 5% of R draws, up to 3 binomial standard errors; a doubled miss rate is
    flagged almost always."""
    rng = np.random.default_rng(0)
    draws, alpha = 400, 0.1
    flags = np.array(
        [dg.miscoverage_test(rng.random(500) < alpha, rng.random(800) < alpha, alpha).p_binom
         < 0.05 for _ in range(draws)]
    )  # fmt: skip
    assert flags.mean() <= 0.05 + 3 * math.sqrt(0.05 * 0.95 / draws)
    shifted = dg.miscoverage_test(rng.random(500) < alpha, rng.random(800) < 2 * alpha, alpha)
    assert shifted.flag and shifted.p_binom < 1e-6


def test_question_level_interval_matches_the_normal_width():
    """n Bernoulli(0.9) values: the bootstrap distribution of the mean is close to normal
    with sd sigma = s/sqrt(n). A percentile estimated from B draws has standard error
    sqrt(q(1-q)/B)/phi(z_q) sigma (0.06 sigma at q = 2.5%, B = 2000): each end within 4 of
    those, plus one grid step 1/n of the discrete mean."""
    rng = np.random.default_rng(1)
    v = (rng.random(2000) < 0.9).astype(float)
    lo, hi = dg.cluster_bootstrap(v, None, boot=2000, rng=2)
    sigma = v.std() / math.sqrt(v.size)
    se = math.sqrt(0.025 * 0.975 / 2000) / stats.norm.pdf(1.96) * sigma
    for end, ref in ((lo, v.mean() - 1.96 * sigma), (hi, v.mean() + 1.96 * sigma)):
        assert abs(end - ref) < 4 * se + 1 / v.size


def test_cluster_interval_widens_by_sqrt_cluster_size_when_clusters_move_together():
    """C clusters of m identical values: the cluster bootstrap is the bootstrap of C
    values, so its interval is sqrt(m) times the question-level one. Each width carries a
    relative Monte Carlo error of about sqrt(2) * 0.06 / 3.92 = 2.2% (see above): the
    ratio is checked to 4 combined errors (~12%)."""
    rng = np.random.default_rng(3)
    c, m = 80, 25
    v = np.repeat((rng.random(c) < 0.8).astype(float), m)
    cl = np.repeat(rng.permutation(c) * 7 + 3, m)  # arbitrary ids
    lo_c, hi_c = dg.cluster_bootstrap(v, cl, boot=2000, rng=4)
    lo_q, hi_q = dg.cluster_bootstrap(v, None, boot=2000, rng=5)
    ratio = (hi_c - lo_c) / (hi_q - lo_q)
    assert abs(ratio / math.sqrt(m) - 1) < 4 * math.sqrt(2) * 0.022
    assert lo_c <= v.mean() <= hi_c


def _reference_cal_test(cal, test, cal_cl, test_cl, alpha, delta, boot, seed):
    """The same replicates built the slow way: explicit resampled arrays per replicate
    (same rng calls in the same order: calibration counts, then test counts, per chunk)."""
    rng = np.random.default_rng(seed)
    cu, ci = np.unique(cal_cl, return_inverse=True)
    tu, ti = np.unique(test_cl, return_inverse=True)
    out = []
    for start in range(0, boot, dg.CHUNK):
        b = min(dg.CHUNK, boot - start)
        mc = rng.multinomial(cu.size, np.full(cu.size, 1 / cu.size), size=b)
        mt = rng.multinomial(tu.size, np.full(tu.size, 1 / tu.size), size=b)
        for r in range(b):
            rc = np.concatenate([np.repeat(cal[ci == j], mc[r, j]) for j in range(cu.size)])
            rt = np.concatenate([np.repeat(test[ti == j], mt[r, j]) for j in range(tu.size)])
            k = rank(rc.size, alpha, delta)
            tau = np.sort(rc)[k - 1] if k <= rc.size else math.inf
            out.append(np.mean(np.isfinite(rt) & cut(rt, tau, nonempty=False)))
    return np.array(out)


@pytest.mark.parametrize("delta", [None, 0.1])
def test_cal_test_replicates_equal_the_explicit_resampling(delta):
    rng = np.random.default_rng(6)
    cal, test = rng.normal(size=300), rng.normal(size=250)
    cal[:10] = test[:5] = np.inf
    cal_cl, test_cl = rng.integers(0, 12, 300), rng.integers(0, 9, 250)
    got = dg.cluster_draws_cal_test(cal, test, 0.2, delta, cal_cl, test_cl, boot=150, rng=7)
    ref = _reference_cal_test(cal, test, cal_cl, test_cl, 0.2, delta, 150, 7)
    assert np.allclose(got, ref, rtol=0, atol=1e-12)
    lo, hi = dg.cluster_bootstrap_cal_test(cal, test, 0.2, delta, boot=300, rng=8)
    assert lo <= hi


def _exact_held(n_pool, n_cal, alpha, delta):
    """Distinct scores: tau is the k-th smallest of a random n_cal-subset; its rank R in
    the pool has P(R = r) = C(r-1, k-1) C(N-r, n_cal-k) / C(N, n_cal), and R - k test
    questions lie at or below it."""
    k, n_test = rank(n_cal, alpha, delta), n_pool - n_cal
    r = np.arange(k, n_pool - n_cal + k + 1)
    logp = (
        stats.binom.logpmf(k - 1, r - 1, 0.5) + (r - 1) * math.log(2)
        + stats.binom.logpmf(n_cal - k, n_pool - r, 0.5) + (n_pool - r) * math.log(2)
        - stats.binom.logpmf(n_cal, n_pool, 0.5) - n_pool * math.log(2)
    )  # fmt: skip
    return float(np.exp(logp)[(r - k) / n_test >= 1 - alpha - 1e-12].sum())


@pytest.mark.parametrize("delta", [None, 0.1])
def test_held_share_matches_the_exact_combinatorial_value(delta):
    """Integer scores (spacing 1 >> the tolerance): the share over D draws is a binomial
    mean, within 3 standard errors sqrt(h(1-h)/D) of the exact value h."""
    scores = np.random.default_rng(9).permutation(1200).astype(float)
    draws = 2000
    h = _exact_held(1200, 400, 0.1, delta)
    got = dg.held_share(scores, 400, 0.1, delta, draws=draws, rng=10)
    assert abs(got - h) <= 3 * math.sqrt(h * (1 - h) / draws) + 1e-12
    if delta:
        assert h > 0.8  # PAC: near 1 - delta even on a finite test split


def test_answer_metrics_by_hand():
    size = [2, 0, 4, 10, 1]
    n_in = [1, 0, 2, 6, 1]
    n_gold = [1, 3, 2, 8, 0]  # the last has no gold: left out
    covered = [True, False, True, True, True]
    top = [True, False, False, True, True]
    m = dg.answer_metrics(size, n_in, n_gold, covered, top)
    rec = [1, 0, 1, 0.75]
    prec = [0.5, 0, 0.5, 0.6]
    f1 = [2 * p * r / (p + r) if p + r else 0 for p, r in zip(prec, rec, strict=True)]
    assert (m.n, m.n_no_gold) == (4, 1)
    assert m.recall == pytest.approx(np.mean(rec)) and m.fnr == pytest.approx(1 - m.recall)
    assert m.precision == pytest.approx(np.mean(prec)) and m.f1 == pytest.approx(np.mean(f1))
    assert (m.hits1, m.ecr, m.apss, m.empty_rate) == (0.5, 0.75, 4.0, 0.25)
    assert (m.size_median, m.size_p90) == (3.0, pytest.approx(np.percentile([2, 0, 4, 10], 90)))
    assert (m.ecr_gold_1, m.n_gold_1, m.ecr_gold_2_5, m.n_gold_2_5) == (1.0, 1, 0.5, 2)
    assert (m.ecr_gold_gt5, m.n_gold_gt5) == (1.0, 1) and m.to_dict()["n"] == 4


@pytest.mark.parametrize("nonempty", [False, True])
def test_flat_set_stats_equal_a_loop_over_questions(nonempty):
    rng = np.random.default_rng(11)
    nq = 40
    q = rng.integers(0, nq - 2, size=1500)  # the last two questions have no candidates
    s = np.round(rng.normal(size=q.size), 1)
    g = rng.random(q.size) < 0.2
    taus = rng.normal(size=nq) - 1.0
    size, n_in = dg.flat_set_stats(q, s, g, nq, taus, nonempty)
    for i in range(nq):
        m = cut(s[q == i], taus[i], nonempty=nonempty)
        assert size[i] == m.sum() and n_in[i] == (m & g[q == i]).sum()
    if nonempty:
        assert (size[: nq - 2] > 0).all()
    assert (size[nq - 2 :] == 0).all()
