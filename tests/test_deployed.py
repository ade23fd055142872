"""The deployed protocol (one calibration, one tau, every test question): pure numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cpr_neo4j.conformal.deployed import (
    ci_cal_and_test,
    ci_test_only,
    covered,
    deployed,
    ks_test,
    threshold,
)
from cpr_neo4j.conformal.evaluate import QuestionRecord
from cpr_neo4j.conformal.threshold import conformal_threshold


def _records(n: int, rng: np.random.Generator, shift: float = 0.0, prefix: str = "q"):
    """Questions with 1-6 candidate answers of uniform cost; the gold one costs +shift."""
    out = []
    for q in range(n):
        m = int(rng.integers(1, 7))
        costs = {f"{prefix}{q}e{i}": float(rng.uniform(0, 1)) for i in range(m)}
        gold = f"{prefix}{q}e{int(rng.integers(m))}" if rng.random() < 0.95 else "missing"
        if gold in costs:
            costs[gold] += shift
        top = min(costs, key=lambda e: (costs[e], e))
        out.append(QuestionRecord(f"{prefix}{q}", frozenset({gold}), costs, top))
    return out


def test_tau_is_what_cpr_calibrate_computes():
    rng = np.random.default_rng(0)
    scores = np.append(rng.normal(size=300), [math.inf] * 7)
    for a in (0.05, 0.1, 0.3, 0.5, 0.9):
        assert threshold(scores, a) == conformal_threshold(scores, a)
    assert threshold(scores[:5], 0.1) == math.inf  # k = 6 > n = 5
    assert covered(np.array([0.1, math.inf, 0.5]), math.inf).tolist() == [True, False, True]


def test_coverage_holds_when_calibration_and_test_are_exchangeable():
    """Over independent (calibration, test) draws, mean ECR >= 1 - alpha.

    Tolerance: given tau, coverage ~ Beta(k, n_cal + 1 - k) (variance <= a(1-a)/(n_cal+2)),
    plus the test sample's binomial a(1-a)/n_test; the mean over R draws has standard
    error sqrt((both) / R); we allow 4 of them.
    """
    rng = np.random.default_rng(1)
    n_cal, n_test, draws, alphas = 200, 400, 60, (0.1, 0.3, 0.5)
    ecr = {a: [] for a in alphas}
    for _ in range(draws):
        res = deployed(
            {"m": _records(n_cal, rng, prefix="c")},
            {"m": _records(n_test, rng, prefix="t")},
            alphas,
            boot=100,
            seed=int(rng.integers(1 << 30)),
        )
        for a in alphas:
            ecr[a].append(res.row("m", a).ecr)
    for a in alphas:
        se = math.sqrt(a * (1 - a) * (1 / (n_cal + 2) + 1 / n_test) / draws)
        assert np.mean(ecr[a]) >= 1 - a - 4 * se, (a, np.mean(ecr[a]))


def test_a_shifted_test_split_breaks_coverage_and_the_ks_test_says_so():
    rng = np.random.default_rng(2)
    cal, same, harder = (
        _records(1000, rng, prefix="c"),
        _records(1000, rng, prefix="s"),
        _records(1000, rng, shift=0.3, prefix="h"),
    )
    ok = deployed({"m": cal}, {"m": same}, [0.1], boot=300, seed=0)
    bad = deployed({"m": cal}, {"m": harder}, [0.1], boot=300, seed=0)
    assert ok.exchangeability[0].p_value > 0.01
    assert bad.exchangeability[0].p_value < 1e-6
    row = bad.row("m", 0.1)
    assert row.below_target and row.ecr_hi < 0.9  # the interval shows the miss
    assert ok.row("m", 0.1).ecr_lo <= 0.9 <= ok.row("m", 0.1).ecr_hi + 0.02


def test_intervals():
    rng = np.random.default_rng(3)
    hits = rng.random(2000) < 0.9
    lo, hi = ci_test_only(hits, 1000, rng)
    se = math.sqrt(0.09 / 2000)
    assert lo < hits.mean() < hi
    assert hi - lo == pytest.approx(2 * 1.96 * se, rel=0.2)  # the normal approximation
    cal, test = rng.normal(size=300), rng.normal(size=2000)
    lo2, hi2, _ = ci_cal_and_test(cal, test, 0.1, 1000, rng)
    lo1, hi1 = ci_test_only(covered(test, threshold(cal, 0.1)), 1000, rng)
    assert hi2 - lo2 > hi1 - lo1  # redrawing the calibration share adds its spread


def test_topk_rows_and_hint_modes():
    rng = np.random.default_rng(4)
    res = deployed(
        {"CPR": _records(300, rng), "Abl": _records(300, rng)},
        {"CPR": _records(500, rng), "Abl": _records(500, rng)},
        [0.2],
        boot=100,
        topk_from="CPR",
        hints={"CPR": "llm:x"},
    )
    assert res.methods == ["CPR", "top-k (CPR)", "Abl"]
    assert res.row("CPR", 0.2).hints == res.row("top-k (CPR)", 0.2).hints == "llm:x"
    assert res.row("Abl", 0.2).hints == "none"
    topk = res.row("top-k (CPR)", 0.2)
    assert topk.tau == int(topk.tau) and topk.apss <= topk.tau
    assert [x.method for x in res.exchangeability] == res.methods


def test_ks_treats_missed_retrieval_as_the_worst_score():
    cal = np.array([0.1, 0.2, math.inf])
    x = ks_test("m", cal, np.array([0.1, 0.2, 0.3]))
    assert 0 <= x.ks_statistic <= 1 and x.recall_cal == pytest.approx(2 / 3)
    assert x.recall_test == 1.0
