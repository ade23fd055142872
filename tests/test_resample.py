"""evaluation.resample: the pooled view (re-splits) and the cal+test interval, against
brute-force loops that follow the documented rules."""

from __future__ import annotations

import math
from fractions import Fraction
from functools import cache

import numpy as np
import pytest
from scipy import special, stats

from cpr_neo4j.conformal.mondrian import ALL, Mondrian
from cpr_neo4j.conformal.threshold import TOLERANCE
from cpr_neo4j.evaluation.resample import (
    COVERED,
    cal_test_interval,
    effective,
    interval_draws,
    resplits,
)


@cache
def _k(n: int, alpha: float, delta: float | None) -> int:
    """The rank from its definitions (exact decimals; scipy's binomial tail for PAC)."""
    if delta is None:
        return math.ceil((n + 1) * (1 - Fraction(str(alpha))))
    ok = [k for k in range(1, n + 1) if stats.binom.sf(k - 1, n, 1 - alpha) <= delta]
    return ok[0] if ok else n + 1


def _covered(s: np.ndarray, tau: np.ndarray) -> np.ndarray:
    bound = np.where(np.isinf(tau), tau, tau + TOLERANCE * (1 + np.abs(tau)))
    return np.isfinite(s) & (s <= bound)


def _brute_resplits(s, groups, n_cal, alpha, delta, draws, seed, pools):
    """Each draw: the same permutation resplits takes (one rng.permutation per draw), the
    first n_cal calibration; a test question's tau is the k-th smallest calibration score
    of its pool (pool ALL: every calibration question, as conformal.mondrian reads it)."""
    rng = np.random.default_rng(seed)
    lab = np.array(["one" if pools is None else pools.get(int(g), "?") for g in groups])
    ecr = []
    for _ in range(draws):
        perm = rng.permutation(len(s))
        cal, test = perm[:n_cal], perm[n_cal:]
        tau = np.empty(len(test))
        for i, t in enumerate(test):
            mine = s[cal] if lab[t] == ALL else s[cal][lab[cal] == lab[t]]
            k = _k(len(mine), alpha, delta)
            tau[i] = np.sort(mine)[k - 1] if k <= len(mine) else math.inf
        ecr.append(_covered(s[test], tau).mean())
    ecr = np.array(ecr)
    return ecr.mean(), np.percentile(ecr, 5), (ecr >= 1 - alpha - 1e-12).mean()


def _pool(rng, n1=60, n2=50, shift=1.5):
    s = np.r_[rng.normal(0, 1, n1), rng.normal(shift, 1, n2)]
    s[rng.random(s.size) < 0.05] = math.inf  # missed retrieval
    g = np.r_[np.full(n1, 1), np.full(n2, 2)]
    perm = rng.permutation(s.size)
    return np.round(s[perm], 2), g[perm]


@pytest.mark.parametrize("delta", [None, 0.1])
def test_resplits_equal_a_brute_force_loop_one_pool(delta):
    rng = np.random.default_rng(0)
    s, g = _pool(rng)
    for alpha in (0.1, 0.3):
        got = resplits(s, g, 55, alpha, delta, draws=40, seed=5)
        want = _brute_resplits(s, g, 55, alpha, delta, 40, 5, None)
        assert got == pytest.approx(want, rel=1e-12, abs=1e-12), alpha
        assert got[1] <= got[0]  # the 5th percentile of ECR is at most its mean


@pytest.mark.parametrize("delta", [None, 0.1])
def test_resplits_equal_a_brute_force_loop_per_group(delta):
    rng = np.random.default_rng(1)
    s, g = _pool(rng)
    pools = {1: "g1", 2: "g2"}
    for alpha in (0.2, 0.4):
        got = resplits(s, g, 55, alpha, delta, draws=40, seed=6, pools=pools)
        want = _brute_resplits(s, g, 55, alpha, delta, 40, 6, pools)
        assert got == pytest.approx(want, rel=1e-12, abs=1e-12), alpha


def test_resplits_read_the_all_fallback_as_every_calibration_question():
    """Group 2 has too few questions for its own pool and too few small-group questions
    to pool, so conformal.mondrian gives it the marginal tau over ALL calibration
    questions; the pooled view must re-split that same rule, not a tau from group 2's
    few calibration questions alone."""
    rng = np.random.default_rng(2)
    s, g = _pool(rng, n1=150, n2=20, shift=2.0)
    m = Mondrian.from_scores(s[:80], g[:80])
    pools = {k: m.pool_of(k, 0.2) for k in (1, 2)}
    assert pools == {1: "g1", 2: ALL}
    got = resplits(s, g, 80, 0.2, None, draws=40, seed=7, pools=pools)
    want = _brute_resplits(s, g, 80, 0.2, None, 40, 7, pools)
    assert got == pytest.approx(want, rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("delta", [None, 0.1])
def test_held_share_and_mean_equal_their_exact_values(delta):
    """N distinct scores, n_cal of them drawn as calibration: the k-th smallest calibration
    score has pool rank R with P(R = r) = C(r-1, k-1) C(N-r, n_cal-k) / C(N, n_cal), and
    exactly R - k test scores lie at or below it. So held = P((R-k)/n_test >= 1 - alpha)
    and the mean ECR = E[(R-k)/n_test] exactly. Over `draws` re-splits, held may differ
    from its exact value by 3 binomial standard errors sqrt(p(1-p)/draws), the mean ECR by
    3 standard errors of a mean of draws (its exact sd / sqrt(draws)). The exact values
    themselves (no noise): the plain tau's mean reaches 1 - alpha but it holds in only
    about half the draws; the PAC tau (delta 0.1) holds in at least 1 - delta of them."""
    N, n, alpha, draws = 3000, 500, 0.1, 300
    s = np.random.default_rng(3).normal(size=N)
    k = _k(n, alpha, delta)
    r = np.arange(k, N - n + k + 1)
    lg = special.gammaln
    logp = (
        lg(r) - lg(k) - lg(r - k + 1)
        + lg(N - r + 1) - lg(n - k + 1) - lg(N - r - n + k + 1)
        - (lg(N + 1) - lg(n + 1) - lg(N - n + 1))
    )  # fmt: skip
    p = np.exp(logp)
    assert p.sum() == pytest.approx(1.0, abs=1e-9)
    cov = (r - k) / (N - n)
    held_exact = p[cov >= 1 - alpha - 1e-12].sum()
    mean_exact = (p * cov).sum()
    sd_exact = math.sqrt((p * (cov - mean_exact) ** 2).sum())
    mean, p5, held = resplits(s, np.zeros(N), n, alpha, delta, draws, seed=1)
    assert abs(held - held_exact) <= 3 * math.sqrt(held_exact * (1 - held_exact) / draws)
    assert abs(mean - mean_exact) <= 3 * sd_exact / math.sqrt(draws)
    assert p5 <= mean
    if delta is None:
        assert mean_exact >= 1 - alpha and held_exact < 0.6  # on average, not PAC
    else:
        assert held_exact >= 1 - delta


def test_effective_marks_questions_the_top_level_covers():
    s = np.array([0.3, math.inf, 2.0, -1.0])
    top = np.array([True, True, False, False])
    eff = effective(s, top, nonempty=True)
    assert eff.tolist() == [COVERED, COVERED, 2.0, -1.0]  # +inf S covered by the top level
    assert effective(s, top, nonempty=False).tolist() == s.tolist()  # empty sets allowed
    # COVERED is finite and within any threshold a calibration can produce
    assert math.isfinite(COVERED)
    assert _covered(np.array([COVERED]), np.array([-1e6]))[0]
    assert resplits(np.full(20, COVERED), np.zeros(20), 10, 0.5, None, draws=5) == (1.0, 1.0, 1.0)


def _draw_templates(rng, n, effect):
    tpl = rng.integers(len(effect), size=n)
    grp = rng.integers(1, 3, size=n)
    s = rng.normal(0.5 * grp + effect[tpl], 1.0)
    s[rng.random(n) < 0.03] = math.inf
    return s, grp, tpl


@pytest.mark.parametrize("delta", [None, 0.05])
def test_cal_test_interval_brackets_the_point_coverage(delta):
    """Exchangeable calibration and test questions in 40 templates with template effects;
    the interval redraws both sides (pools re-planned per replicate) and must contain the
    coverage the actual calibration gives on the actual test split."""
    rng = np.random.default_rng(4)
    effect = rng.normal(0, 0.3, 40)
    s_c, g_c, t_c = _draw_templates(rng, 600, effect)
    s_t, g_t, t_t = _draw_templates(rng, 900, effect)
    for alpha in (0.1, 0.3):
        for grouped in (True, False):
            m = Mondrian.from_scores(s_c, g_c if grouped else np.zeros(600))
            tau = m.taus(alpha, delta, g_t if grouped else np.zeros(900))
            point = _covered(s_t, tau).mean()
            lo, hi = cal_test_interval(
                s_c, s_t, alpha, delta, g_c, g_t, t_c, t_t, 400, 0, grouped=grouped
            )
            assert lo <= point <= hi, (alpha, grouped, lo, point, hi)
            assert hi - lo < 0.15  # an interval, not everything


def _brute_interval_draws(s_c, s_t, alpha, delta, g_c, g_t, t_c, t_t, boot, seed):
    """Each replicate written out: the same cluster counts interval_draws draws (one
    multinomial per side per chunk, boot <= CHUNK here), the resampled calibration
    questions materialised (np.repeat), Mondrian built on them (its own pool plan, test
    question counted in its group) and each resampled test question cut at its group's tau."""
    rng = np.random.default_rng(seed)
    uc, ic = np.unique(t_c, return_inverse=True)
    ut, it = np.unique(t_t, return_inverse=True)
    mc = rng.multinomial(len(uc), np.full(len(uc), 1 / len(uc)), size=boot)
    mt = rng.multinomial(len(ut), np.full(len(ut), 1 / len(ut)), size=boot)
    out = []
    for r in range(boot):
        wc, wt = mc[r][ic], mt[r][it]
        m = Mondrian.from_scores(np.repeat(s_c, wc), np.repeat(g_c, wc))
        tau = m.taus(alpha, delta, g_t)
        out.append((wt * _covered(s_t, tau)).sum() / wt.sum())
    return np.array(out)


@pytest.mark.parametrize("delta", [None, 0.05])
def test_interval_draws_replan_the_pools_as_mondrian_would_on_each_replicate(delta):
    """Group 2 sits near the floor (about 30 of 100 calibration questions, floor 30 plain,
    59 PAC at alpha 0.05): in some replicates it has its own threshold, in others it is
    pooled or gets the all-questions fallback. Every replicate must equal Mondrian's own
    rule on that replicate's calibration questions."""
    rng = np.random.default_rng(8)
    effect = rng.normal(0, 0.3, 25)
    s_c, _, t_c = _draw_templates(rng, 100, effect)
    g_c = np.where(rng.random(100) < 0.3, 2, 1)
    s_c = s_c + 0.8 * (g_c == 2)
    s_t, _, t_t = _draw_templates(rng, 150, effect)
    g_t = np.where(rng.random(150) < 0.3, 2, 1)
    for alpha in (0.05, 0.2):
        got = interval_draws(s_c, s_t, alpha, delta, g_c, g_t, t_c, t_t, 80, 3)
        want = _brute_interval_draws(s_c, s_t, alpha, delta, g_c, g_t, t_c, t_t, 80, 3)
        assert got == pytest.approx(want, rel=1e-12, abs=1e-12), alpha
    # the plans really vary across replicates at alpha 0.2, delta None (floor 30)
    rng2 = np.random.default_rng(3)
    uc, ic = np.unique(t_c, return_inverse=True)
    mc = rng2.multinomial(len(uc), np.full(len(uc), 1 / len(uc)), size=80)
    n2 = np.array([(mc[r][ic] * (g_c == 2)).sum() for r in range(80)])
    assert (n2 >= 30).any() and (n2 < 29).any()


def test_cal_test_interval_ungrouped_is_one_pool_of_every_question():
    """grouped=False: the group labels are ignored (one threshold from every calibration
    question), so relabelling the groups changes nothing."""
    rng = np.random.default_rng(5)
    s_c, s_t = rng.normal(size=300), rng.normal(size=400)
    g_c, g_t = rng.integers(1, 4, 300), rng.integers(1, 4, 400)
    t_c, t_t = np.arange(300), np.arange(400)
    got = cal_test_interval(s_c, s_t, 0.2, None, g_c, g_t, t_c, t_t, 300, 0, grouped=False)
    want = cal_test_interval(
        s_c, s_t, 0.2, None, np.ones(300), np.ones(400), t_c, t_t, 300, 0, grouped=True
    )
    assert got == pytest.approx(want)


def test_resplits_can_replan_the_pools_in_every_draw():
    """replan: each draw's pools come from its own calibration share (Mondrian on it), so a
    group near the floor gets its own threshold in some draws and the fallback in others;
    the result equals a loop doing exactly that, and differs from the fixed plan here."""
    rng = np.random.default_rng(3)
    s, g = _pool(rng, n1=150, n2=64, shift=2.0)  # group 2: ~30 of it in a 100-question share
    got = resplits(s, g, 100, 0.2, None, draws=60, seed=4, pools={1: "g1", 2: "g2"}, replan=True)
    r, ecr = np.random.default_rng(4), []
    for _ in range(60):
        perm = r.permutation(len(s))
        cal, test = perm[:100], perm[100:]
        tau = Mondrian.from_scores(s[cal], g[cal]).taus(0.2, None, g[test])
        ecr.append(_covered(s[test], tau).mean())
    ecr = np.array(ecr)
    want = (ecr.mean(), np.percentile(ecr, 5), (ecr >= 0.8 - 1e-12).mean())
    assert got == pytest.approx(want, rel=1e-12, abs=1e-12)
    fixed = resplits(s, g, 100, 0.2, None, draws=60, seed=4, pools={1: "g1", 2: "g2"})
    assert fixed != got
