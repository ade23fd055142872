"""The deployed protocol: exactly what a user gets from `cpr calibrate` then `cpr ask`.

One tau per alpha from the calibration share alone (questions held out from training),
then every test question answered with that one tau (the paper's protocol). Unlike the
pooled view (conformal.evaluate), nothing makes calibration and test exchangeable by
construction, so this is where a shift between them shows.

Per (method, alpha): ECR, APSS, CE, Hits@1, retrieval recall and two 95% intervals for ECR:
- "test": percentile bootstrap over test questions with tau fixed (sampling error of this
  test estimate);
- "cal+test": each replicate also redraws the calibration share (with replacement) and
  recomputes tau, so it adds the spread a user with another calibration draw would see.
PAC rows (with delta): the calibration-conditional tau of the same scores; "held" is the
share of calibration-share redraws whose tau covers 1 - alpha of the whole evaluation
split (about half for the plain tau, at least 1 - delta for the PAC one when the
questions are exchangeable).
An alpha whose tau is +inf (recall or n too small) is marked unattainable, not scored.
Exchangeability check per method: a two-sample Kolmogorov-Smirnov test between the
calibration and test nonconformity scores (+inf, no gold among the candidates, is kept as
the largest value). A small p-value says the two come from different distributions, and
then the guarantee (which assumes exchangeable questions) need not hold on that test split.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from scipy import stats

from cpr_neo4j.conformal.evaluate import Queries, Record, RowTable, largest_finite, pac_name
from cpr_neo4j.conformal.threshold import rank

BOOT_CHUNK = 100  # bootstrap replicates per numpy batch (bounds memory on big test splits)


@dataclass
class DeployedRow:
    method: str
    alpha: float
    tau: float | list[float]  # a list for per-hop baselines
    ecr: float
    ecr_lo: float  # 95% bootstrap over test questions
    ecr_hi: float
    ecr_lo_cal: float  # 95% bootstrap over calibration share and test questions (nan: n/a)
    ecr_hi_cal: float
    apss: float
    ce: float
    hits1: float
    recall: float
    n_test: int
    hints: str = "none"
    recall_cal: float = math.nan  # retrieval recall on the calibration share
    held: float = math.nan  # share of cal+test bootstrap draws with ECR >= 1 - alpha

    @property
    def attainable(self) -> bool:
        """tau is finite: the calibration can honour alpha (else the set is every candidate)."""
        taus = self.tau if isinstance(self.tau, list) else [self.tau]
        return all(math.isfinite(t) for t in taus)

    @property
    def below_target(self) -> bool:
        """The whole test-bootstrap interval lies below 1 - alpha."""
        return self.ecr_hi < 1 - self.alpha - 1e-12


@dataclass
class Exchangeability:
    method: str
    ks_statistic: float
    p_value: float
    n_cal: int
    n_test: int
    recall_cal: float
    recall_test: float


@dataclass
class DeployedResults(RowTable):
    rows: list[DeployedRow]
    exchangeability: list[Exchangeability]
    methods: list[str]
    alphas: list[float]
    n_cal: int
    n_test: int
    boot: int
    seed: int
    notes: list[str] = field(default_factory=list)


def threshold(cal_scores: np.ndarray, alpha: float, delta: float | None = None) -> float:
    """The conformal tau of `cal_scores` (+inf when k > n), as `cpr calibrate` computes it."""
    k = rank(len(cal_scores), alpha, delta)
    return float(np.partition(cal_scores, k - 1)[k - 1]) if k <= len(cal_scores) else math.inf


def covered(scores: np.ndarray, tau: float) -> np.ndarray:
    """A question is covered when a gold answer is a candidate (finite score) within tau."""
    return np.isfinite(scores) & (scores <= tau)


def ci_test_only(hits: np.ndarray, boot: int, rng: np.random.Generator) -> tuple[float, float]:
    """95% percentile bootstrap of mean(hits) over test questions."""
    n = len(hits)
    means = []
    for start in range(0, boot, BOOT_CHUNK):
        idx = rng.integers(0, n, size=(min(BOOT_CHUNK, boot - start), n))
        means.append(hits[idx].mean(axis=1))
    lo, hi = np.percentile(np.concatenate(means), [2.5, 97.5])
    return float(lo), float(hi)


def ci_cal_and_test(
    cal_scores: np.ndarray,
    test_scores: np.ndarray,
    alpha: float,
    boot: int,
    rng: np.random.Generator,
    delta: float | None = None,
) -> tuple[float, float, float]:
    """95% bootstrap of ECR redrawing both the calibration share (so tau) and the test set;
    and "held": the share of calibration redraws whose tau covers at least 1 - alpha of the
    whole evaluation split (taken as the population, so only the calibration draw varies:
    what a PAC tau promises to hold with probability 1 - delta)."""
    n_cal, n_test = len(cal_scores), len(test_scores)
    k = rank(n_cal, alpha, delta)
    found = np.sort(test_scores[np.isfinite(test_scores)])
    ecrs, full = [], []
    for start in range(0, boot, BOOT_CHUNK):
        b = min(BOOT_CHUNK, boot - start)
        cal = np.sort(cal_scores[rng.integers(0, n_cal, size=(b, n_cal))], axis=1)
        taus = cal[:, k - 1] if k <= n_cal else np.full(b, math.inf)
        test = test_scores[rng.integers(0, n_test, size=(b, n_test))]
        ecrs.append((np.isfinite(test) & (test <= taus[:, None])).mean(axis=1))
        full.append(np.searchsorted(found, taus, side="right") / n_test)
    lo, hi = np.percentile(np.concatenate(ecrs), [2.5, 97.5])
    held = float((np.concatenate(full) >= 1 - alpha - 1e-12).mean())
    return float(lo), float(hi), held


def ks_test(method: str, cal_scores: np.ndarray, test_scores: np.ndarray) -> Exchangeability:
    """Two-sample KS between calibration and test scores (+inf kept as the largest value)."""
    both = np.concatenate([cal_scores, test_scores])
    finite = both[np.isfinite(both)]
    big = finite.max() + 1.0 if len(finite) else 0.0
    res = stats.ks_2samp(
        np.where(np.isfinite(cal_scores), cal_scores, big),
        np.where(np.isfinite(test_scores), test_scores, big),
    )
    return Exchangeability(
        method,
        float(res.statistic),
        float(res.pvalue),
        len(cal_scores),
        len(test_scores),
        float(np.isfinite(cal_scores).mean()),
        float(np.isfinite(test_scores).mean()),
    )


def deployed(
    cal_by_method: Mapping[str, Sequence[Record]],
    test_by_method: Mapping[str, Sequence[Record]],
    alphas: Sequence[float],
    boot: int = 1000,
    seed: int = 0,
    topk_from: str | None = None,
    hints: Mapping[str, str] | None = None,
    delta: float | None = None,
) -> DeployedResults:
    """Rows for every method (and top-k, and PAC with `delta`, from `topk_from`'s records)
    under the deployed protocol; `hints` maps a method to its hint mode (default "none")."""
    rng = np.random.default_rng(seed)
    rows: list[DeployedRow] = []
    checks: list[Exchangeability] = []
    names: list[str] = []
    hints = hints or {}
    n_cal = n_test = 0
    for m, cal_recs in cal_by_method.items():
        cal = Queries(cal_recs, upto=-math.inf)  # its scores only: no candidates kept
        taus = [threshold(cal.score, a, d) for a in alphas for d in (None, delta)]
        test = Queries(test_by_method[m], upto=largest_finite(np.array(taus)))  # sizes up to
        n_cal, n_test = len(cal.score), len(test.score)
        variants = [(m, cal.score, test.score, test.sizes, None)]
        if m == topk_from:  # top-k: nonconformity = rank of the best gold answer
            variants.append(
                (
                    f"top-k ({m})",
                    cal.rank,
                    test.rank,
                    lambda k, t=test: np.minimum(t.n_answers, k),
                    None,
                )
            )
            if delta:
                variants.append((pac_name(m, delta), cal.score, test.score, test.sizes, delta))
        for name, cal_s, test_s, sizes, d in variants:
            names.append(name)
            if d is None:
                checks.append(ks_test(name, cal_s, test_s))
            for a in alphas:
                tau = threshold(cal_s, a, d)
                hit = covered(test_s, tau)
                lo, hi, held = ci_cal_and_test(cal_s, test_s, a, boot, rng, d)
                rows.append(
                    row(
                        name,
                        a,
                        tau,
                        hit,
                        sizes(tau),
                        float(test.hits1.mean()),
                        float(test.recall.mean()),
                        ci_test_only(hit, boot, rng),
                        (lo, hi),
                        hints.get(m, "none"),
                        float(cal.recall.mean()),
                        held,
                    )
                )
    return DeployedResults(rows, checks, names, list(alphas), n_cal, n_test, boot, seed)


def row(
    method: str,
    alpha: float,
    tau: float | list[float],
    hit: np.ndarray,
    size: np.ndarray,
    hits1: float,
    recall: float,
    ci_test: tuple[float, float],
    ci_cal: tuple[float, float] = (math.nan, math.nan),
    hints: str = "none",
    recall_cal: float = math.nan,
    held: float = math.nan,
) -> DeployedRow:
    """One table row from per-test-question coverage `hit` and set `size`."""
    ecr, apss = float(hit.mean()), float(size.mean())
    ce = ecr / apss if apss > 0 else math.nan
    return DeployedRow(
        method,
        float(alpha),
        tau,
        ecr,
        *ci_test,
        *ci_cal,
        apss,
        ce,
        hits1,
        recall,
        len(hit),
        hints,
        recall_cal,
        held,
    )
