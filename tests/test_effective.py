"""Effective-score calibration (conformal/effective.py): a never-empty set's coverage is
{S_eff <= tau} with S_eff = -inf where the top level already holds a gold answer, so
calibrating on S_eff stays valid and is never looser than the raw S. Checked by many
random calibration/test splits of one synthetic pool (nothing shifted), coverage and FNR."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cpr_neo4j.conformal import effective
from cpr_neo4j.conformal.guarantee import FNR, Calibrated, Request
from cpr_neo4j.conformal.sets import SetCounter
from tests.binomial import pac_allowance

P_TOP = {1: 0.8, 2: 0.6, 3: 0.45}  # the top candidate is right this often, by group


def _pool(rng, n):
    """Flat candidate table: per question 3-9 candidates with distinct scores; the top one
    is gold with P_TOP[group], else a random other candidate is (recall 0.97-0.99); a
    few questions have 2-3 gold answers, one of them sometimes missing from the table."""
    qidx, score, gold, n_gold, group = [], [], [], np.zeros(n, np.int64), np.zeros(n, np.int64)
    for i in range(n):
        h = int(rng.choice([1, 2, 3], p=[0.5, 0.3, 0.2]))
        m = int(rng.integers(3, 10))
        s = np.sort(rng.normal(0, 1, m)) + 0.3 * h
        g = np.zeros(m, bool)
        if rng.random() < P_TOP[h]:
            g[0] = True
        elif rng.random() < 0.95:
            g[int(rng.integers(1, m))] = True
        if g.any() and rng.random() < 0.3:
            g[int(rng.integers(0, m))] = True  # a second gold answer somewhere
        qidx += [i] * m
        score += s.tolist()
        gold += g.tolist()
        n_gold[i] = max(int(g.sum()) + int(rng.random() < 0.03), 1)
        group[i] = h
    return np.array(qidx), np.array(score), np.array(gold), n_gold, group


def _split(t, rows):
    qidx, score, gold, n_gold, group = t
    keep = np.isin(qidx, rows)
    remap = np.full(len(n_gold), -1)
    remap[rows] = np.arange(len(rows))
    return remap[qidx[keep]], score[keep], gold[keep], n_gold[rows], group[rows]


@pytest.fixture(scope="module")
def pool():
    return _pool(np.random.default_rng(35), 3000)


def test_effective_scores_are_minus_inf_exactly_where_the_top_level_holds_gold(pool):
    qidx, score, gold, n_gold, group = pool
    c = Calibrated.from_flat(qidx, score, gold, n_gold, group, {})
    counter = SetCounter(qidx, score, gold, len(n_gold))
    assert np.array_equal(c.top_hit, counter.top_gold > 0)
    s_eff = effective.scores(c.scores, c.top_hit)
    assert np.all(s_eff <= c.scores) and np.isneginf(s_eff).mean() > 0.5
    back = Calibrated.from_node({"n": c.n, **c.to_props()})
    assert np.array_equal(back.top_hit, c.top_hit)
    old = {k: v for k, v in c.to_props().items() if k != "fnr_top"}  # before this field
    assert not Calibrated.from_node({"n": c.n, **old}).top_hit.any()  # raw scores then
    for alpha in (0.1, 0.2, 0.3, 0.5):
        for delta in (None, 0.05):
            for risk in ("coverage", FNR):
                d = delta if risk == "coverage" else None
                raw = c.threshold(Request(alpha, d, risk, effective=False), 2).value
                eff = c.threshold(Request(alpha, d, risk, effective=True), 2).value
                assert eff <= raw, (alpha, delta, risk)
    # sets that may be empty never use effective scores (they would be invalid)
    req = Request(0.3, None, allow_empty=True, effective=True)
    assert not req.eff
    assert c.threshold(req, 2).value == c.threshold(Request(0.3, None, allow_empty=True), 2).value


@pytest.mark.parametrize("risk", ["coverage", FNR])
def test_random_splits_cover_with_effective_scores_and_sets_shrink(pool, risk):
    """R random splits (a third calibrates): mean coverage (mean FNR) within 3 standard
    errors of the target in every group, and the effective sets never larger on average
    than the raw ones. PAC: test_pac_holds_with_effective_scores."""
    qidx, score, gold, n_gold, group = pool
    n, draws, rng = len(n_gold), 150, np.random.default_rng(7)
    alphas = (0.1, 0.3)
    deltas = (None, 0.05) if risk == "coverage" else (None,)
    stats = {}
    for _ in range(draws):
        perm = rng.permutation(n)
        cal, test = np.sort(perm[: n // 3]), np.sort(perm[n // 3 :])
        c = Calibrated.from_flat(*_split(pool, cal), {})
        tq, ts, tg, tng, tgr = _split(pool, test)
        counter = SetCounter(tq, ts, tg, len(test))
        for a in alphas:
            for d in deltas:
                for eff in (False, True):
                    req = Request(a, d, risk, effective=eff)
                    size, hit = counter.counts(c.thresholds(req, tgr))
                    loss = hit > 0 if risk == "coverage" else 1 - hit / tng
                    for h in (1, 2, 3):
                        key = (a, d, eff, h)
                        stats.setdefault(key, []).append(float(loss[tgr == h].mean()))
                    stats.setdefault((a, d, eff, "size"), []).append(float(size.mean()))
    for a in alphas:
        for d in deltas:
            for h in (1, 2, 3):
                x = np.array(stats[(a, d, True, h)])
                se = x.std() / math.sqrt(draws)
                if risk == "coverage":
                    assert x.mean() >= 1 - a - 3 * se, (a, d, h, x.mean())
                else:
                    assert x.mean() <= a + 3 * se, (a, h, x.mean())
            raw = np.mean(stats[(a, d, False, "size")])
            eff = np.mean(stats[(a, d, True, "size")])
            assert eff <= raw + 1e-12, (a, d, raw, eff)


def _take(t, rows):
    """The questions `rows` (repeats allowed: an i.i.d. draw from the pool), renumbered."""
    qidx, score, gold, n_gold, group = t
    start = np.searchsorted(qidx, np.arange(len(n_gold) + 1))  # the pool is in question order
    at = [np.arange(start[r], start[r + 1]) for r in rows]
    keep = np.concatenate(at)
    new_q = np.repeat(np.arange(len(rows)), [len(a) for a in at])
    return new_q, score[keep], gold[keep], n_gold[rows], group[rows]


def test_pac_holds_with_effective_scores(pool):
    """PAC (delta 0.05) on effective scores, per group. Calibration questions drawn i.i.d.
    from the pool make the pool their exact distribution, so a draw's coverage is the
    pool's coverage, known exactly: under PAC it is below 1 - alpha in at most a
    Binomial(draws, delta) count of draws (pac_allowance: 28 of 300, false alarm 1e-3).
    The marginal threshold on the same draws must exceed the allowance in every group
    whose top level alone covers less than 1 - alpha (effective scores are exact there, so
    it sits at 1 - alpha and is below it about half the time): the check tells PAC from
    marginal."""
    qidx, score, gold, n_gold, group = pool
    n, draws, delta, rng = len(n_gold), 300, 0.05, np.random.default_rng(8)
    allowed = pac_allowance(draws, delta)
    assert allowed == 28
    everyone = SetCounter(qidx, score, gold, n)
    below: dict = {}
    for _ in range(draws):
        c = Calibrated.from_flat(*_take(pool, rng.integers(0, n, n // 3)), {})
        for a in (0.1, 0.3):
            for d in (None, delta):
                _, hit = everyone.counts(c.thresholds(Request(a, d, effective=True), group))
                for h in (1, 2, 3):
                    key = (a, d, h)
                    below[key] = below.get(key, 0) + int((hit[group == h] > 0).mean() < 1 - a)
    print("\ndraws below target of", draws, "(allowed", allowed, "):", below)
    for a in (0.1, 0.3):
        for h in (1, 2, 3):
            assert below[(a, delta, h)] <= allowed, (a, h, below)
            if P_TOP[h] < 1 - a:  # else the top level alone covers: no threshold can miss
                assert below[(a, None, h)] > allowed, (a, h, below)
