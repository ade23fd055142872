"""Evaluation diagnostics (never on the ask path; scipy.stats is fine here).

- miscoverage_test: is the test split's miss rate what calibration promised?
- cluster bootstrap: MetaQA questions come from ~150-210 templates per split, and
  questions of one template succeed or fail together; resampling single questions treats
  them as independent and gives intervals that are too narrow. Resampling templates
  (clusters) keeps that correlation; clusters=None resamples single questions, so a report
  can show both widths.
- held_share, answer_metrics (the KGQA metrics besides ECR/APSS), flat_set_stats.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from cpr_neo4j.conformal.threshold import TOLERANCE, cut_flat, rank, within
from cpr_neo4j.errors import BadInput

CHUNK = 100  # bootstrap replicates per numpy batch (bounds memory on big splits)


@dataclass(kw_only=True)  # built by keyword: many fields
class MiscoverageTest:
    alpha: float
    n_cal: int
    n_test: int
    miss_cal: int
    miss_test: int
    rate_cal: float
    rate_test: float
    p_fisher: float  # two-sided Fisher exact: cal vs test x missed vs covered
    p_binom: float  # exact one-sided binomial: the test miss rate exceeds alpha
    flag: bool  # either p < 0.05

    def to_dict(self) -> dict:
        return asdict(self)


def miscoverage_test(cal_miss, test_miss, alpha: float) -> MiscoverageTest:
    """Fisher's exact test (two-sided) on the 2x2 table, and an exact one-sided binomial
    test of test misses against alpha. The binomial test ignores the calibration draw:
    given one tau the test miss rate is not alpha but tau's own miscoverage (which varies
    by about sqrt(alpha(1-alpha)/n_cal) around alpha), so with a large test split it flags
    a plain tau more often than 5% even when nothing shifted; read it with the PAC tau."""
    c = np.asarray(cal_miss, dtype=bool)
    t = np.asarray(test_miss, dtype=bool)
    if not c.size or not t.size:
        raise BadInput("miscoverage test needs calibration and test questions")
    mc, mt = int(c.sum()), int(t.sum())
    p_f = float(stats.fisher_exact([[mc, c.size - mc], [mt, t.size - mt]]).pvalue)
    p_b = float(stats.binomtest(mt, t.size, alpha, alternative="greater").pvalue)
    return MiscoverageTest(
        alpha=float(alpha),
        n_cal=c.size,
        n_test=t.size,
        miss_cal=mc,
        miss_test=mt,
        rate_cal=mc / c.size,
        rate_test=mt / t.size,
        p_fisher=p_f,
        p_binom=p_b,
        flag=p_f < 0.05 or p_b < 0.05,
    )


def _clusters(clusters, n: int) -> tuple[np.ndarray, int]:
    """Dense cluster index per question (0..C-1); None: every question its own cluster."""
    if clusters is None:
        return np.arange(n), n
    c = np.asarray(clusters)
    if c.shape != (n,):
        raise BadInput(f"{c.size} cluster ids for {n} questions")
    uniq, inv = np.unique(c, return_inverse=True)
    return inv, uniq.size


def _counts(rng: np.random.Generator, c: int, b: int) -> np.ndarray:
    """How often each of c clusters is drawn in b resamples of c clusters with replacement."""
    return rng.multinomial(c, np.full(c, 1.0 / c), size=b)


def cluster_draws(values, clusters=None, boot: int = 1000, rng=None) -> np.ndarray:
    """Bootstrap replicates of mean(values) over questions, resampling whole clusters: a
    replicate is the mean over every question of the drawn clusters (weighted by draws)."""
    v = np.asarray(values, dtype=float)
    rng = np.random.default_rng(rng)
    inv, c = _clusters(clusters, v.size)
    sums, sizes = np.bincount(inv, weights=v, minlength=c), np.bincount(inv, minlength=c)
    out = []
    for start in range(0, boot, CHUNK):
        m = _counts(rng, c, min(CHUNK, boot - start))
        out.append((m @ sums) / (m @ sizes))
    return np.concatenate(out)


def cluster_bootstrap(
    values, clusters=None, boot: int = 1000, rng=None, level: float = 0.95
) -> tuple[float, float]:
    """Percentile interval of a per-question statistic's mean (coverage 0/1, set size,
    FNR...) with tau fixed: test questions resampled by cluster (None: by question)."""
    return _percentiles(cluster_draws(values, clusters, boot, rng), level)


def cluster_draws_cal_test(
    cal_scores,
    test_scores,
    alpha: float,
    delta: float | None = None,
    cal_clusters=None,
    test_clusters=None,
    boot: int = 1000,
    rng=None,
    eps: float = TOLERANCE,
) -> np.ndarray:
    """Replicate coverages redrawing calibration clusters too: each replicate's tau is the
    rank(n_rep, alpha, delta)-th smallest of its resampled calibration scores (n_rep varies
    with the clusters drawn), then coverage (finite score within tau) over its resampled
    test clusters. The order statistic of a weighted multiset is read off cumulative
    cluster counts over the once-sorted calibration scores."""
    cal = np.asarray(cal_scores, dtype=float)
    test = np.asarray(test_scores, dtype=float)
    if not cal.size or not test.size:
        raise BadInput("the bootstrap needs calibration and test questions")
    rng = np.random.default_rng(rng)
    order = np.argsort(cal, kind="stable")
    cal_sorted = cal[order]
    inv_c, nc = _clusters(cal_clusters, cal.size)
    inv_c = inv_c[order]
    inv_t, nt = _clusters(test_clusters, test.size)
    found = np.isfinite(test)
    ranks: dict[int, int] = {}
    out = []
    for start in range(0, boot, CHUNK):
        b = min(CHUNK, boot - start)
        mc, mt = _counts(rng, nc, b), _counts(rng, nt, b)
        w = mc[:, inv_c]  # copies of each sorted calibration score per replicate
        cum = np.cumsum(w, axis=1)
        n_rep = cum[:, -1]
        k = np.array([ranks.setdefault(int(n), rank(int(n), alpha, delta)) for n in n_rep])
        pos = (cum < k[:, None]).sum(axis=1)  # first index whose cumulative count reaches k
        tau = np.where(k <= n_rep, cal_sorted[np.minimum(pos, cal.size - 1)], np.inf)
        wt = mt[:, inv_t]
        hit = found[None, :] & within(test[None, :], tau[:, None], eps)
        out.append((wt * hit).sum(axis=1) / wt.sum(axis=1))
    return np.concatenate(out)


def cluster_bootstrap_cal_test(
    cal_scores,
    test_scores,
    alpha: float,
    delta: float | None = None,
    cal_clusters=None,
    test_clusters=None,
    boot: int = 1000,
    rng=None,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile interval of coverage over calibration and test redraws (see
    cluster_draws_cal_test); clusters None = question-level resampling."""
    draws = cluster_draws_cal_test(
        cal_scores, test_scores, alpha, delta, cal_clusters, test_clusters, boot, rng
    )
    return _percentiles(draws, level)


def _percentiles(draws: np.ndarray, level: float) -> tuple[float, float]:
    lo, hi = np.percentile(draws, [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def held_share(
    pool_scores,
    n_cal: int,
    alpha: float,
    delta: float | None = None,
    draws: int = 500,
    rng=None,
    eps: float = TOLERANCE,
) -> float:
    """The share of random calibration draws whose test coverage reaches 1 - alpha: each
    draw takes n_cal questions without replacement from the pooled scores as calibration
    and the rest as test. (Test coverage on a finite test split, so a PAC tau's share can
    fall a little short of 1 - delta: its promise is about coverage in the population.)"""
    s = np.asarray(pool_scores, dtype=float)
    if not 1 <= n_cal < s.size:
        raise BadInput(f"n_cal {n_cal} must be between 1 and {s.size - 1}")
    rng = np.random.default_rng(rng)
    k = rank(n_cal, alpha, delta)
    n_test = s.size - n_cal
    held = 0
    for start in range(0, draws, CHUNK):
        b = min(CHUNK, draws - start)
        perm = np.argsort(rng.random((b, s.size)), axis=1)
        cal, test = s[perm[:, :n_cal]], s[perm[:, n_cal:]]
        tau = np.partition(cal, k - 1, axis=1)[:, k - 1] if k <= n_cal else np.full(b, np.inf)
        cov = (np.isfinite(test) & within(test, tau[:, None], eps)).sum(axis=1) / n_test
        held += int((cov >= 1 - alpha - 1e-12).sum())
    return held / draws


@dataclass(kw_only=True)  # built by keyword: many fields
class AnswerMetrics:
    n: int  # questions with at least one gold answer (the others are left out)
    n_no_gold: int
    recall: float  # mean |A ∩ Y| / |Y|
    precision: float  # mean |A ∩ Y| / |A| (0 for an empty set)
    f1: float  # mean per-question F1 (0 when precision and recall are both 0)
    hits1: float
    ecr: float
    apss: float
    size_median: float
    size_p90: float
    empty_rate: float
    fnr: float  # 1 - recall
    ecr_gold_1: float  # ECR among questions with 1 gold answer (nan when none)
    n_gold_1: int
    ecr_gold_2_5: float
    n_gold_2_5: int
    ecr_gold_gt5: float
    n_gold_gt5: int

    def to_dict(self) -> dict:
        return asdict(self)


def answer_metrics(size, n_in_set, n_gold, covered, top_correct) -> AnswerMetrics:
    """The KGQA metrics (answer recall, precision, per-question F1 as RoG / GNN-RAG report
    them, Hits@1) next to ECR, APSS and the set-size distribution, per question arrays in.
    Questions with no gold answer have no recall and are left out of every mean."""
    size = np.asarray(size, dtype=float)
    hit = np.asarray(n_in_set, dtype=float)
    ng = np.asarray(n_gold, dtype=float)
    cov = np.asarray(covered, dtype=bool)
    top = np.asarray(top_correct, dtype=bool)
    keep = ng > 0
    size, hit, ng, cov, top = size[keep], hit[keep], ng[keep], cov[keep], top[keep]
    if (hit > np.minimum(size, ng)).any():
        raise BadInput("more gold answers in a set than the set or the gold list holds")
    rec = hit / ng if ng.size else np.zeros(0)
    prec = np.divide(hit, size, out=np.zeros_like(hit), where=size > 0)
    both = prec + rec
    f1 = np.divide(2 * prec * rec, both, out=np.zeros_like(both), where=both > 0)

    def mean(x) -> float:
        return float(np.mean(x)) if np.size(x) else float("nan")

    bins = [ng == 1, (ng >= 2) & (ng <= 5), ng > 5]
    by = [(mean(cov[b]), int(b.sum())) for b in bins]
    return AnswerMetrics(
        n=int(keep.sum()),
        n_no_gold=int((~keep).sum()),
        recall=mean(rec),
        precision=mean(prec),
        f1=mean(f1),
        hits1=mean(top),
        ecr=mean(cov),
        apss=mean(size),
        size_median=float(np.median(size)) if size.size else float("nan"),
        size_p90=float(np.percentile(size, 90)) if size.size else float("nan"),
        empty_rate=mean(size == 0),
        fnr=1 - mean(rec),
        ecr_gold_1=by[0][0],
        n_gold_1=by[0][1],
        ecr_gold_2_5=by[1][0],
        n_gold_2_5=by[1][1],
        ecr_gold_gt5=by[2][0],
        n_gold_gt5=by[2][1],
    )


def flat_set_stats(
    qidx,
    score,
    gold,
    n_questions: int,
    tau_per_question,
    nonempty: bool = False,
    eps: float = TOLERANCE,
) -> tuple[np.ndarray, np.ndarray]:
    """Per question: answer-set size and gold answers in the set, with the tolerance cut
    and the nonempty rule (threshold.cut_flat); tau is one value or one per question (a
    Mondrian group's tau for each). One pass over the flat table, no sort."""
    q = np.asarray(qidx, dtype=np.int64)
    mask = cut_flat(q, score, tau_per_question, n_questions, eps, nonempty)
    g = np.asarray(gold, dtype=bool)
    size = np.bincount(q[mask], minlength=n_questions)
    return size, np.bincount(q[mask & g], minlength=n_questions)
