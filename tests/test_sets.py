"""conformal.sets.SetCounter against a brute-force loop over questions: set sizes, gold
answers in the set, S(q) and the top level, for any per-question thresholds."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cpr_neo4j.conformal.sets import SetCounter, slack
from cpr_neo4j.conformal.threshold import TOLERANCE, cut_flat


def _random_table(rng, nq: int, ties: bool):
    """Flat table in arbitrary row order: 0-14 candidates per question (some none), gold
    flags on ~30% of candidates (some questions none), scores with or without ties."""
    sizes = rng.integers(0, 15, size=nq)
    q = np.repeat(np.arange(nq), sizes)
    perm = rng.permutation(q.size)  # SetCounter must not rely on the row order
    q = q[perm]
    s = rng.normal(size=q.size)
    if ties:
        s = np.round(s, 1)
    g = rng.random(q.size) < 0.3
    return q, s, g


def _bound(tau: float, eps: float = TOLERANCE) -> float:
    return math.inf if math.isinf(tau) else tau + eps * (1 + abs(tau))


def _brute(q, s, g, nq, taus, nonempty):
    """Per question, as the docs define the set: scores within the tolerance of tau, plus
    (nonempty) the top level, every answer within the tolerance of the best score."""
    size, hit = np.zeros(nq, int), np.zeros(nq, int)
    for i in range(nq):
        mine, gold = s[q == i], g[q == i]
        keep = mine <= _bound(taus[i])
        if nonempty and mine.size:
            keep |= mine <= _bound(mine.min())
        size[i], hit[i] = keep.sum(), (keep & gold).sum()
    return size, hit


@pytest.mark.parametrize("ties", [False, True])
def test_counts_equal_a_loop_over_questions(ties):
    rng = np.random.default_rng(1 + ties)
    nq = 150
    q, s, g = _random_table(rng, nq, ties)
    c = SetCounter(q, s, g, nq)
    per_q = np.round(rng.normal(size=nq), 1)
    per_q[::9] = math.inf
    several = rng.choice([-0.3, 0.2, math.inf], size=nq)
    cases = [-3.0, -0.4, 0.0, 0.35, 1.0, 5.0, math.inf, per_q, several]
    if ties:  # thresholds that are scores themselves: ties at tau are in
        cases.append(float(np.median(s)))
        cases.append(rng.choice(s, size=nq))
    for tau in cases:
        taus = np.broadcast_to(np.asarray(tau, dtype=float), (nq,))
        for nonempty in (False, True):
            size, hit = c.counts(tau, nonempty=nonempty)
            want = _brute(q, s, g, nq, taus, nonempty)
            assert size.tolist() == want[0].tolist(), (tau, nonempty)
            assert hit.tolist() == want[1].tolist(), (tau, nonempty)
    # +inf keeps every candidate, nonempty or not
    for nonempty in (False, True):
        size, hit = c.counts(math.inf, nonempty)
        assert size.tolist() == np.bincount(q, minlength=nq).tolist()
        assert hit.tolist() == np.bincount(q[g], minlength=nq).tolist()


def test_score_and_top_level_equal_a_loop():
    rng = np.random.default_rng(3)
    nq = 200
    q, s, g = _random_table(rng, nq, ties=True)
    c = SetCounter(q, s, g, nq)
    for i in range(nq):
        mine, gold = s[q == i], g[q == i]
        # S(q): the best gold answer's score, +inf when no gold answer is a candidate
        assert c.score[i] == (mine[gold].min() if gold.any() else math.inf)
        top = mine <= _bound(mine.min()) if mine.size else np.zeros(0, bool)
        assert c.top_size[i] == top.sum() and c.top_gold[i] == (top & gold).sum()
        assert c.total[i] == mine.size
        assert c.best[i] == (mine.min() if mine.size else math.inf)
    # questions covered at tau are exactly those whose S is within tau (empty sets allowed)
    for tau in (-0.5, 0.0, 0.8):
        _, hit = c.counts(tau, nonempty=False)
        assert np.array_equal(hit > 0, np.isfinite(c.score) & (c.score <= _bound(tau)))


def test_counts_equal_the_served_cut_on_random_tables():
    """Evaluation (SetCounter) and serving (threshold.cut_flat) make the same sets."""
    rng = np.random.default_rng(4)
    nq = 120
    q, s, g = _random_table(rng, nq, ties=True)
    c = SetCounter(q, s, g, nq)
    taus = rng.normal(size=nq)
    for tau in (0.1, taus, math.inf):
        for nonempty in (False, True):
            mask = cut_flat(q, s, tau, nq, nonempty=nonempty)
            size, hit = c.counts(tau, nonempty)
            assert size.tolist() == np.bincount(q[mask], minlength=nq).tolist()
            assert hit.tolist() == np.bincount(q[mask & g], minlength=nq).tolist()


def test_nonempty_adds_the_top_level_even_when_tau_only_reaches_into_its_tolerance():
    """One question, best score 0.5 eps (inside tau = 0's tolerance band, eps), a gold
    answer at 1.4 eps (outside tau's band, inside the best score's, ~1.5 eps). The served
    set (threshold.cut: within tau, plus the top level) holds both; evaluation must count
    the same set, or it reports a miss that `cpr ask` would have covered."""
    q = np.array([0, 0, 0])
    s = np.array([0.5 * TOLERANCE, 1.4 * TOLERANCE, 1.0])
    g = np.array([False, True, False])
    served = cut_flat(q, s, 0.0, 1)
    assert served.tolist() == [True, True, False]
    size, hit = SetCounter(q, s, g, 1).counts(0.0, nonempty=True)
    assert (int(size[0]), int(hit[0])) == (2, 1)


def test_minus_inf_threshold_keeps_nothing_like_within():
    """threshold.within defines tau = -inf as keeping no finite score; SetCounter's
    tolerance (sets.slack) must not turn -inf into NaN and keep everything."""
    q, s, g = np.array([0, 0, 1]), np.array([0.2, 1.0, -3.0]), np.array([True, False, True])
    size, hit = SetCounter(q, s, g, 2).counts(-math.inf, nonempty=False)
    assert size.tolist() == [0, 0] and hit.tolist() == [0, 0]


def test_slack_and_edges():
    assert slack(1.0) == pytest.approx(1.0 + 2 * TOLERANCE)
    assert slack(-2.0) == pytest.approx(-2.0 + 3 * TOLERANCE)
    assert slack(math.inf) == math.inf
    assert np.allclose(slack(np.array([0.0, 3.0])), [TOLERANCE, 3.0 + 4 * TOLERANCE])
    # a table without candidates: every set is empty, whatever tau
    c = SetCounter(np.zeros(0, int), np.zeros(0), np.zeros(0, bool), 3)
    for tau in (0.0, math.inf):
        size, hit = c.counts(tau)
        assert size.tolist() == [0, 0, 0] and hit.tolist() == [0, 0, 0]
    assert c.score.tolist() == [math.inf] * 3
    # nonempty never empties a question with candidates, and never shrinks a set
    rng = np.random.default_rng(5)
    q, s, g = _random_table(rng, 80, ties=True)
    c = SetCounter(q, s, g, 80)
    has = np.bincount(q, minlength=80) > 0
    for tau in (-5.0, 0.0, 1.0):
        a, ha = c.counts(tau, nonempty=False)
        b, hb = c.counts(tau, nonempty=True)
        assert (b >= a).all() and (hb >= ha).all() and (b[has] > 0).all()


def test_answers_rank_by_cost_then_id_as_lexsort_does():
    """answer_columns ranks by (cost, id) comparing ids only within runs of equal costs;
    the order must be np.lexsort's over a str column (code points: "É" after "z")."""
    import random

    from cpr_neo4j.search.answers import rank_by_cost_then_id

    rng = np.random.default_rng(0)
    names = [f"e{i}" for i in range(200)] + ["É", "a", "Z", "zz"]
    for trial in range(2000):
        n = int(rng.integers(0, 60))
        pool = [0.0, 1.0, 2.5, np.inf, -1.0, np.nan] if trial % 3 == 0 else rng.random(5)
        costs = rng.choice(pool, n)
        ids = random.Random(trial).sample(names, n)
        want = np.lexsort((np.array(ids, dtype=str), costs)) if n else []
        assert rank_by_cost_then_id(costs, ids).tolist() == list(want)
