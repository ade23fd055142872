"""evaluation/shift.py: the exact law of the test split's misses, Holm across alphas, and a
null check (random splits of one pool, nothing shifted: flags at most at the nominal rate)."""

from __future__ import annotations

import math

import numpy as np
from test_effective import _pool, _split

from cpr_neo4j.conformal.guarantee import Calibrated, Request
from cpr_neo4j.conformal.sets import SetCounter, slack
from cpr_neo4j.evaluation.shift import (
    MissTest,
    holm,
    miss_law,
    miss_test,
    permutation_tests,
    template_codes,
)


def test_miss_law_is_a_pmf_with_the_beta_binomial_mean():
    pools = [(100, 91, 40), (35, 33, 12)]
    pmf = miss_law(pools)
    assert len(pmf) == 53 and math.isclose(pmf.sum(), 1.0, rel_tol=1e-12)
    mean = (np.arange(len(pmf)) * pmf).sum()
    assert math.isclose(mean, 40 * 10 / 101 + 12 * 3 / 36, rel_tol=1e-9)


def test_holm_adjusts_step_down_and_skips_nan():
    ts = [
        MissTest(a, 10, 1, 1.0, p)
        for a, p in [(0.1, 0.01), (0.2, 0.04), (0.3, 0.03), (0.4, math.nan)]
    ]
    holm(ts)
    assert [t.p_holm for t in ts[:3]] == [0.03, 0.06, 0.06] and math.isnan(ts[3].p_holm)
    assert [t.flag for t in ts] == [True, False, False, False]


def test_random_splits_flag_at_most_at_the_nominal_rate():
    """R random splits of one pool: the share of splits with any Holm flag over 4 alphas is
    at most 5% (+3 binomial standard errors), grouped PAC, plain and effective alike."""
    pool = _pool(np.random.default_rng(9), 2400)
    n, R, rng = 2400, 120, np.random.default_rng(1)
    alphas = (0.1, 0.2, 0.3, 0.5)
    reqs = {
        "pac": lambda a: Request(a),
        "plain": lambda a: Request(a, None),
        "effective": lambda a: Request(a, None, effective=True),
    }
    flagged = dict.fromkeys(reqs, 0)
    for _ in range(R):
        perm = rng.permutation(n)
        cal, test = np.sort(perm[: n // 2]), np.sort(perm[n // 2 :])
        c = Calibrated.from_flat(*_split(pool, cal), {})
        tq, ts, tg, _, tgr = _split(pool, test)
        counter = SetCounter(tq, ts, tg, len(test))
        for name, make in reqs.items():
            tests = []
            for a in alphas:
                req = make(a)
                s = (
                    np.where(counter.top_gold > 0, -np.inf, counter.score)
                    if req.eff
                    else counter.score
                )
                miss = ~(s <= slack(c.thresholds(req, tgr)))
                tests.append(miss_test(c, req, tgr, miss))
            flagged[name] += any(t.flag for t in holm(tests))
    for name, k in flagged.items():
        assert k <= R * 0.05 + 3 * math.sqrt(R * 0.05 * 0.95), (name, k)


def test_a_harder_test_split_is_flagged():
    pool = _pool(np.random.default_rng(9), 2000)
    c = Calibrated.from_flat(*_split(pool, np.arange(1000)), {})
    tq, ts, tg, _, tgr = _split(pool, np.arange(1000, 2000))
    counter = SetCounter(tq, ts + 1.0 * (tgr == 2)[tq], tg, 1000)  # group 2 got harder
    tests = [miss_test(c, Request(a), tgr, ~(counter.score <= slack(c.thresholds(Request(a), tgr))))
             for a in (0.1, 0.3)]  # fmt: skip
    assert all(t.flag for t in holm(tests)) and all(t.miss_test > t.expected for t in tests)


def _templated(rng, n, effect, test_share):
    """n questions of len(effect) templates, score = template effect + noise (+inf for 3%),
    group 1 or 2 by template parity; each question on the test side with its template's
    share (so the sides' template mixes differ, nothing else)."""
    tpl = rng.integers(len(effect), size=n)
    s = effect[tpl] + rng.normal(0, 1, n)
    s[rng.random(n) < 0.03] = math.inf
    return s, 1 + tpl % 2, tpl, rng.random(n) < test_share[tpl]


def test_template_permutation_flags_at_most_at_the_nominal_rate_under_a_mix_shift():
    """A clustered null: strong template effects (sd 1.5) and each template's test share
    drawn anew per split (Beta(2, 2)), within templates nothing shifted. The permutation
    test's share of splits with any Holm flag is at most 5% + 3 binomial standard errors;
    the exact question-level test, which reads the mix difference as a shift, flags more."""
    rng = np.random.default_rng(2)
    R, alphas = 60, (0.1, 0.3)
    reqs = [Request(a) for a in alphas]
    perm_flags = exact_flags = 0
    for d in range(R):
        effect = rng.normal(0, 1.5, 16)
        s, g, tpl, is_t = _templated(rng, 1200, effect, rng.beta(2, 2, 16))
        c = Calibrated.from_flat(np.arange((~is_t).sum()), s[~is_t], np.ones((~is_t).sum(), bool),
                                 np.ones((~is_t).sum(), int), g[~is_t], {})  # fmt: skip
        ps = permutation_tests(s[~is_t], g[~is_t], tpl[~is_t], s[is_t], g[is_t], tpl[is_t],
                               reqs, perms=99, seed=d)  # fmt: skip
        tests = []
        for req, p in zip(reqs, ps, strict=True):
            miss = ~(s[is_t] <= slack(c.thresholds(req, g[is_t])))
            tests.append(miss_test(c, req, g[is_t], miss))
            tests[-1].p_perm = p
        holm(tests)
        perm_flags += any(t.flag for t in tests)
        exact_flags += any(t.flag_exact for t in tests)
    assert perm_flags <= R * 0.05 + 3 * math.sqrt(R * 0.05 * 0.95), perm_flags
    assert exact_flags > perm_flags, (exact_flags, perm_flags)


def test_template_permutation_flags_a_shift_within_templates():
    rng = np.random.default_rng(4)
    s, g, tpl, is_t = _templated(rng, 1600, rng.normal(0, 1.0, 12), np.full(12, 0.5))
    harder = np.where(is_t, s + 0.8, s)
    reqs = [Request(0.1), Request(0.3, None)]
    ps = permutation_tests(harder[~is_t], g[~is_t], tpl[~is_t], harder[is_t], g[is_t],
                           tpl[is_t], reqs, perms=199)  # fmt: skip
    assert all(p <= 0.01 for p in ps), ps
    same = permutation_tests(s[~is_t], g[~is_t], tpl[~is_t], s[is_t], g[is_t], tpl[is_t], reqs,
                             perms=199)  # fmt: skip
    assert all(p > 0.01 for p in same), same


def test_template_codes_match_texts_across_tables():
    c, t = template_codes(["a", "b"], [1, 0, 1], ["b", "c"], [0, 1])
    assert c.tolist() == [1, 0, 1] and t.tolist() == [1, 2]
