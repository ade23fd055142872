"""Conformal risk control of the false-negative rate (conformal.risk)."""

from __future__ import annotations

import json
import math
from fractions import Fraction

import numpy as np
import pytest

from cpr_neo4j.conformal.mondrian import ALL, SMALL
from cpr_neo4j.conformal.risk import FnrCurve, GroupedFnr
from cpr_neo4j.errors import BadInput


def _questions(rng, nq, shift=0.0, recall=0.95, ties=True):
    """Flat table: 1-8 gold answers per question, some not among the candidates (missed by
    retrieval: they count in n_gold only), gold scores below the wrong ones on average."""
    n_gold = rng.integers(1, 9, size=nq)
    n_found = rng.binomial(n_gold, recall)
    n_wrong = rng.integers(0, 20, size=nq)
    q = np.r_[np.repeat(np.arange(nq), n_found), np.repeat(np.arange(nq), n_wrong)]
    gold = np.r_[np.ones(n_found.sum(), bool), np.zeros(n_wrong.sum(), bool)]
    s = np.where(gold, rng.normal(shift, 1.0, gold.size), rng.normal(shift + 1.5, 1, gold.size))
    return q, (np.round(s, 1) if ties else s), gold, n_gold


def _brute_lam(q, s, gold, n_gold, alpha) -> float:
    """The definition, in rationals: the smallest lambda (a gold score; the loss only moves
    there) with (n/(n+1)) mean L + 1/(n+1) <= alpha."""
    a = Fraction(alpha).limit_denominator(10**9)
    keep = n_gold > 0
    n = int(keep.sum())
    for lam in sorted(set(s[gold].tolist())):
        hit = np.bincount(q[gold & (s <= lam)], minlength=n_gold.size)
        loss = sum(Fraction(int(n_gold[i] - hit[i]), int(n_gold[i])) for i in np.flatnonzero(keep))
        if Fraction(n, n + 1) * loss / n + Fraction(1, n + 1) <= a:
            return lam
    return math.inf


@pytest.mark.parametrize("seed", range(4))
def test_stored_curve_gives_the_definitions_lambda(seed):
    rng = np.random.default_rng(seed)
    q, s, gold, n_gold = _questions(rng, 150)
    n_gold[:3] = 0  # no gold at all: left out of n
    gold[np.isin(q, [0, 1, 2])] = False
    curve = FnrCurve.from_flat(q, s, gold, n_gold)
    assert curve.n == 147 and curve.n_skipped == 3
    for alpha in (0.05, 0.1, 0.2, 0.3, 0.5, 0.7):
        assert curve.lam(alpha) == _brute_lam(q, s, gold, n_gold, alpha), alpha


def test_exact_ties_follow_the_definition():
    """99 single-answer questions and alpha = 0.1: the bound needs W >= 90 exactly, so the
    90th gold score; thirds (|Y| = 3) add up to whole numbers the same way."""
    s = np.arange(99.0)
    c = FnrCurve(s, np.ones(99, int), 99)
    assert c.lam(0.1) == 89.0 == _brute_lam(np.arange(99), s, np.ones(99, bool), np.ones(99), 0.1)
    c3 = FnrCurve(np.arange(297.0), np.full(297, 3), 99)  # 99 questions with 3 found each
    assert c3.lam(0.1) == 269.0  # 270 thirds = 90


def test_monotone_in_alpha():
    rng = np.random.default_rng(7)
    curve = FnrCurve.from_flat(*_questions(rng, 500, ties=False))
    alphas = np.linspace(0.06, 0.95, 60)
    lams = [curve.lam(float(a)) for a in alphas]
    assert all(x >= y for x, y in zip(lams, lams[1:], strict=False))


def test_unattainable_when_recall_is_too_low():
    rng = np.random.default_rng(8)
    q, s, gold, n_gold = _questions(rng, 400, recall=0.7)
    c = FnrCurve.from_flat(q, s, gold, n_gold)
    a_min = c.smallest_alpha()
    assert c.recall == pytest.approx(0.7, abs=0.05)
    assert a_min == pytest.approx(1 - c.recall * 400 / 401)
    assert math.isinf(c.lam(0.1)) and "answer recall" in c.unattainable(0.1)
    assert f"{a_min:.3f}" in c.unattainable(0.1)
    assert c.unattainable(a_min + 1e-9) is None and math.isfinite(c.lam(a_min + 1e-9))
    assert c.unattainable(a_min - 1e-6) is not None
    few = FnrCurve(np.zeros(5), np.ones(5, int), 5)  # perfect recall, n = 5 < 1/0.1 - 1
    assert "too few" in few.unattainable(0.1) and "at least 9" in few.unattainable(0.1)
    assert FnrCurve(np.zeros(9), np.ones(9, int), 9).unattainable(0.1) is None
    with pytest.raises(BadInput):
        FnrCurve.from_flat([0, 0], [0.0, 1.0], [True, True], [1])


def test_gold_scored_inf_counts_only_at_lambda_inf():
    c = FnrCurve(np.arange(8.0), np.ones(8, int), 10, inf_n_gold=[1, 1])
    assert c.lam(0.1) == math.inf and c.unattainable(0.1) is None  # W(+inf) = 10 >= 9.9
    assert c.lam(0.3) == 7.0  # need W >= 11 * 0.7 = 7.7: the 8th score, 7.0


def _fnr_draws(rng, q, s, gold, n_gold, alpha, draws, n_cal):
    """Per draw: lambda-hat from n_cal random questions, mean FNR over the others."""
    nq = n_gold.size
    out = []
    for _ in range(draws):
        is_cal = np.zeros(nq, bool)
        is_cal[rng.choice(nq, n_cal, replace=False)] = True
        g_cal = gold & is_cal[q]
        lam = FnrCurve(s[g_cal], n_gold[q[g_cal]], n_cal).lam(alpha)
        hit = np.bincount(q[gold & (s <= lam)], minlength=nq)
        out.append((1 - hit / n_gold)[~is_cal].mean())
    return np.array(out)


def test_mean_test_fnr_is_at_most_alpha_over_random_draws():
    """CRC promises E[FNR_test] <= alpha over calibration draws and test questions; the
    mean over R draws may exceed alpha by sampling error only: 3 standard errors of that
    mean (std over draws / sqrt(R))."""
    rng = np.random.default_rng(9)
    q, s, gold, n_gold = _questions(rng, 3000)
    for alpha in (0.1, 0.2):
        f = _fnr_draws(rng, q, s, gold, n_gold, alpha, draws=300, n_cal=300)
        assert f.mean() <= alpha + 3 * f.std() / math.sqrt(len(f)), alpha


def test_grouped_curves_pool_small_groups_and_round_trip():
    rng = np.random.default_rng(10)
    parts = [_questions(rng, n, shift=sh) for n, sh in [(400, 0.0), (300, 2.0), (20, 1), (15, 3)]]
    q, s, gold, n_gold, grp, base = [], [], [], [], [], 0
    for k, (qq, ss, gg, ng) in enumerate(parts, start=1):
        q.append(qq + base)
        s.append(ss)
        gold.append(gg)
        n_gold.append(ng)
        grp.append(np.full(ng.size, k))
        base += ng.size
    q, s, gold, n_gold, grp = map(np.concatenate, (q, s, gold, n_gold, grp))
    gf = GroupedFnr.from_flat(q, s, gold, n_gold, grp, min_group=30)
    assert [gf.pool_of(k, 0.2) for k in (1, 2, 3, 4, 99)] == ["g1", "g2"] + [SMALL] * 3
    assert gf.pool_of(1, 0.001) == ALL  # the floor follows alpha: 999 questions needed
    for k, sub in [(1, grp == 1), (2, grp == 2)]:
        cand = sub[q]
        remap = np.cumsum(sub) - 1
        own = FnrCurve.from_flat(remap[q[cand]], s[cand], gold[cand], n_gold[sub])
        assert gf.lam(0.2, k) == own.lam(0.2)
    assert gf.lam(0.2, 3) == gf.lam(0.2, 4) == gf.lam(0.2, 99)  # unseen: the small pool
    assert gf.lam(0.2, 2) > gf.lam(0.2, 1)  # the shifted group needs a larger lambda
    d = json.loads(json.dumps(gf.to_dict(), allow_nan=False))
    assert all(not isinstance(v, dict) for v in d.values())
    back = GroupedFnr.from_dict(d)
    assert np.array_equal(back.lams(0.2, grp), gf.lams(0.2, grp))
    assert FnrCurve.from_dict(gf.curves[1].to_dict()).lam(0.1) == gf.lam(0.1, 1)
    assert gf.unattainable(0.001, 1).startswith("group 1 (all groups: marginal)")
