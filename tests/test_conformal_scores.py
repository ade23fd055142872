"""Score families (conformal.scores): definitions, flat == per question, temperature fit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cpr_neo4j.conformal import scores as sc
from cpr_neo4j.conformal.temperature import fit_temperature
from cpr_neo4j.errors import BadInput

EPS = np.finfo(float).eps


def _table(rng, nq=60, kmax=40):
    """Flat candidates with many ties (costs on a 0.1 grid), questions shuffled together."""
    k = rng.integers(1, kmax, size=nq)
    q = np.repeat(np.arange(nq, dtype=np.int32), k)
    c = np.round(rng.normal(size=q.size) * 2, 1)
    perm = rng.permutation(q.size)  # candidates of a question need not be contiguous
    return q[perm], c[perm], int(k.max())


def test_definitions_on_a_small_question():
    c = np.array([2.0, 1.0, 1.0, 3.0])
    assert sc.level_rank(c).tolist() == [2, 1, 1, 3]
    p = sc.softmax_probs(c, 1.0)
    w = np.exp(-c)
    assert np.allclose(p, w / w.sum(), rtol=4 * EPS, atol=0)
    s = sc.aps(c, 1.0)
    assert s[1] == s[2] == pytest.approx(p[1] + p[2])  # a level shares its mass
    assert s[0] == pytest.approx(p[0] + p[1] + p[2]) and s[3] == pytest.approx(1.0)
    r = sc.raps(c, 1.0, lam=0.5, k_reg=1)
    assert np.allclose(r - s, [0.5, 0, 0, 1.0])
    assert sc.id_rank(c, np.array(["b", "z", "a", "c"])).tolist() == [3, 2, 1, 4]
    assert sc.centred(c, 0.97).tolist() == pytest.approx((c - 0.97).tolist())
    assert sc.mass_score([0.25, 1.0]).tolist() == [0.75, 0.0]
    assert sc.softmax_probs(np.array([1e5, 1e5 + 1]), 1e-3)[0] == 1.0  # no overflow


@pytest.mark.parametrize(
    "family, params",
    [
        ("centred", {"centre": 0.97}),
        ("centred", {"centre": 0.0}),
        ("aps", {"T": 0.7}),
        ("raps", {"T": 0.3, "lam": 0.05, "k_reg": 2}),
        ("level", {}),
    ],
)
def test_flat_equals_per_question(family, params):
    """Per-question references: np.unique/bincount/sum. APS values are sums of at most
    kmax probabilities adding to 1, so each path's rounding is <= kmax * eps (the classic
    (k-1) eps sum|x| bound for summation); the two paths may differ by twice that."""
    rng = np.random.default_rng(5)
    q, c, kmax = _table(rng)
    per = {
        "centred": lambda x: sc.centred(x, params["centre"]),
        "aps": lambda x: sc.aps(x, params["T"]),
        "raps": lambda x: sc.raps(x, params["T"], params["lam"], params["k_reg"]),
        "level": sc.level_rank,
    }[family]
    flat = sc.family_scores(q, c, family, **params)
    one = sc.family_scores(np.zeros(0, np.int32), np.zeros(0), family, **params)
    assert one.size == 0
    tol = 2 * kmax * EPS
    for i in range(q.max() + 1):
        m = q == i
        ref = per(c[m])
        assert np.allclose(flat[m], ref, rtol=0, atol=tol * max(1.0, np.abs(c[m]).max()))
        # ask time (one question alone through the flat path) is bit-identical
        assert np.array_equal(sc.family_scores(q[m] * 0, c[m], family, **params), flat[m])


def test_flat_id_rank_and_mass():
    rng = np.random.default_rng(6)
    q, c, _ = _table(rng)
    ids = rng.permutation(q.size).astype(str)
    flat = sc.family_scores(q, c, "id_rank", ids=ids)
    for i in range(q.max() + 1):
        m = q == i
        assert np.array_equal(flat[m], sc.id_rank(c[m], ids[m]))
    mass = rng.random(q.size)
    assert np.array_equal(sc.family_scores(q, c, "mass", mass=mass), 1 - mass)
    with pytest.raises(BadInput):
        sc.mass_score([1.5])


def test_ties_always_share_a_score():
    rng = np.random.default_rng(7)
    q, c, _ = _table(rng)
    for fam, p in [("aps", {"T": 1.0}), ("raps", {"T": 1.0, "lam": 0.1, "k_reg": 1})]:
        s = sc.family_scores(q, c, fam, **p)
        key = q.astype(float) * 1e6 + c
        for v in np.unique(key):
            assert np.ptp(s[key == v]) == 0.0
        # non-decreasing in cost within every question: a cut at tau is a top set
        for i in range(q.max() + 1):
            m = q == i
            o = np.argsort(c[m], kind="stable")
            assert (np.diff(s[m][o]) >= 0).all()


def test_spec_round_trip_and_registry_errors():
    rng = np.random.default_rng(8)
    q, c, _ = _table(rng)
    spec = sc.make_spec("raps", T=0.5, lam=0.1, k_reg=3)
    assert spec == {"family": "raps", "T": 0.5, "lam": 0.1, "k_reg": 3.0}
    direct = sc.family_scores(q, c, "raps", T=0.5, lam=0.1, k_reg=3)
    assert np.array_equal(sc.from_spec(q, c, spec), direct)
    with pytest.raises(BadInput):
        sc.make_spec("raps", T=0.5)
    with pytest.raises(BadInput):
        sc.family_scores(q, c, "nope")
    with pytest.raises(BadInput):
        sc.family_scores(q, c, "aps", T=-1.0)
    with pytest.raises(BadInput):
        sc.family_scores(q, c, "id_rank")  # ids missing
    with pytest.raises(BadInput):
        sc.family_scores(q, np.where(c > 0, np.inf, c), "aps", T=1.0)


def _brute_loss(q, c, g, T):
    out = []
    for i in np.unique(q):
        m = q == i
        if g[m].any():
            p = sc.softmax_probs(c[m], T)
            out.append(-math.log(p[g[m]].sum()))
    return float(np.mean(out))


def test_fit_temperature_minimises_the_gold_log_loss():
    """Synthetic questions whose gold answer is drawn from the softmax at T0 = 0.5: the fit
    is the maximum-likelihood T, so it lies within 4 standard errors of T0, the standard
    error from the observed information (n times the loss curvature at the fit). Its loss
    matches a brute-force recomputation and no grid point does better."""
    rng = np.random.default_rng(9)
    nq, k, T0 = 400, 20, 0.5
    q = np.repeat(np.arange(nq), k)
    c = rng.normal(size=nq * k)
    g = np.zeros(nq * k, bool)
    for i in range(nq):
        p = sc.softmax_probs(c[i * k : (i + 1) * k], T0)
        g[i * k + rng.choice(k, p=p)] = True
    g[:k] = False  # one question without gold: it is left out of the mean
    fit = fit_temperature(q, c, g)
    assert fit.loss == pytest.approx(_brute_loss(q, c, g, fit.T), rel=1e-9)
    assert fit.loss <= fit.losses.min() + 1e-12 and not fit.at_edge
    h = 0.05 * fit.T
    lo, hi = _brute_loss(q, c, g, fit.T - h), _brute_loss(q, c, g, fit.T + h)
    curvature = (lo + hi - 2 * fit.loss) / h**2
    assert lo > fit.loss and hi > fit.loss and curvature > 0
    se = 1 / math.sqrt((nq - 1) * curvature)
    assert abs(fit.T - T0) < 4 * se
    with pytest.raises(BadInput):
        fit_temperature(q, c, np.zeros_like(g))
