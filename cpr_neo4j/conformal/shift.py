"""Is the evaluation split's miss count what exchangeable questions would give? One exact
test per alpha, Holm across alphas.

Under the guarantee's own premise (calibration and test questions exchangeable), the
coverage of a split-conformal threshold that is the k-th smallest of n calibration scores
is Beta(k, n + 1 - k) distributed (exactly, for continuous scores; ties and +inf scores
only raise it), so the number of misses among n_t test questions of that pool is
BetaBinomial(n_t, n + 1 - k, k), whatever the score distribution and whether the
threshold is plain or PAC (only k differs). Pools are independent given the counts, so
the test split's total is the convolution over pools; the p-value is its upper tail at
the observed misses (one-sided: too many misses). This uses the test misses alone and the
calibration only through (n, k) per pool, so it has none of the in-sample bias of
comparing the calibration questions' own miss rate (about (n - k)/n by construction).

Template clustering does not break it: exchangeable questions drawn from a population of
templates are still exchangeable, and the law above is exact for them; clustering widens
intervals for the population's coverage (diagnostics.cluster_bootstrap), not this law.
A split made by template (no template on both sides) is not exchangeable at the question
level, and the guarantee does not hold there either: flagging it is right.

Test questions whose threshold is the fallback over ALL calibration questions are left
out (their guarantee is marginal over all questions, no promise for their group), and so
are pools whose threshold is +inf (unattainable: every candidate, no claim).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
from scipy import stats

from cpr_neo4j.conformal.guarantee import Calibrated, Request
from cpr_neo4j.conformal.threshold import rank

LEVEL = 0.05  # family-wise over the alphas of one variant (Holm)


@dataclass
class MissTest:
    alpha: float
    n_test: int  # test questions tested (fallback-to-all and unattainable pools left out)
    miss_test: int
    expected: float  # expected misses under exchangeability, sum of n_t (n + 1 - k)/(n + 1)
    p: float  # one-sided: P(misses >= observed) under the beta-binomial convolution
    p_holm: float = float("nan")
    flag: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


def miss_law(pools: list[tuple[int, int, int]]) -> np.ndarray:
    """pmf of the total misses over pools (n calibration, k rank, n_t test questions)."""
    pmf = np.ones(1)
    for n, k, n_t in pools:
        j = np.arange(n_t + 1)
        pmf = np.convolve(pmf, stats.betabinom.pmf(j, n_t, n + 1 - k, k))
    return pmf


def miss_test(calibrated: Calibrated, req: Request, test_groups, test_miss) -> MissTest:
    """The test for one variant at one alpha (coverage mode)."""
    groups = calibrated.label(np.asarray(test_groups)) if req.grouped else None
    miss = np.asarray(test_miss, dtype=bool)
    by_pool: dict[tuple, list[int]] = {}
    for g in np.unique(groups).tolist() if groups is not None else [0]:
        th = calibrated.threshold(req, int(g))
        if (req.grouped and th.pool == "all") or not th.attainable:
            continue
        mine = groups == g if groups is not None else np.ones(len(miss), bool)
        key = (th.pool, th.n) if req.grouped else ("one", th.n)
        by_pool.setdefault(key, [0, 0])
        by_pool[key][0] += int(mine.sum())
        by_pool[key][1] += int(miss[mine].sum())
    pools = [(n, rank(n, req.alpha, req.pac), nt) for (_, n), (nt, _) in by_pool.items()]
    observed = sum(m for _, m in by_pool.values())
    pmf = miss_law(pools)
    p = float(min(1.0, pmf[observed:].sum())) if pools else float("nan")
    expected = sum(nt * (n + 1 - k) / (n + 1) for n, k, nt in pools)
    return MissTest(float(req.alpha), sum(nt for _, _, nt in pools), observed, expected, p)


def holm(tests: list[MissTest], level: float = LEVEL) -> list[MissTest]:
    """Holm's step-down adjustment across one variant's alphas; flag where p_holm < level."""
    ps = np.array([t.p for t in tests], dtype=float)
    ok = np.isfinite(ps)
    order = np.argsort(np.where(ok, ps, np.inf), kind="stable")
    m = int(ok.sum())
    running = 0.0
    for i, j in enumerate(order[:m]):
        running = max(running, min(1.0, (m - i) * ps[j]))
        tests[j].p_holm = running
        tests[j].flag = running < level
    return tests
