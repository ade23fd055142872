"""Is the evaluation split's miss count what exchangeable questions would give? Two tests
per alpha, each with Holm across alphas: `permutation_tests` (template-stratified, what
reports flag: valid for any template mix and any within-template correlation) and
`miss_test` (exact for question-level exchangeability, shown beside it), below.

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

Template clustering does not break it when the questions are exchangeable one by one (a
random split of one pool); but when the two sides' template mixes differ by more than such
a split gives, it reads that as a shift and over-flags (tests/test_shift.py), which is
why the flag is the template-stratified permutation test.
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
from cpr_neo4j.conformal.mondrian import MIN_GROUP, Mondrian
from cpr_neo4j.conformal.sets import slack
from cpr_neo4j.conformal.threshold import rank

LEVEL = 0.05  # family-wise over the alphas of one variant (Holm)
PERMS = 999  # template permutations per variant (p-values in steps of 1/1000)


@dataclass
class MissTest:
    alpha: float
    n_test: int  # test questions tested (fallback-to-all and unattainable pools left out)
    miss_test: int
    expected: float  # expected misses under exchangeability, sum of n_t (n + 1 - k)/(n + 1)
    p: float  # one-sided: P(misses >= observed) under the beta-binomial convolution
    p_holm: float = float("nan")
    flag_exact: bool = False  # p_holm < LEVEL (question-level exchangeability)
    p_perm: float = float("nan")  # template-stratified permutation (permutation_tests)
    p_perm_holm: float = float("nan")
    flag: bool = False  # what reports flag: p_perm_holm < LEVEL when run, else flag_exact

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
    return MissTest(
        alpha=float(req.alpha),
        n_test=sum(nt for _, _, nt in pools),
        miss_test=observed,
        expected=expected,
        p=p,
    )


def holm(tests: list[MissTest], level: float = LEVEL) -> list[MissTest]:
    """Holm's step-down adjustment across one variant's alphas, for the exact test and (when
    its p-values are set) the permutation test; `flag` follows the permutation test when it
    ran, else the exact one."""
    for adj, flag_name, ps in (
        ("p_holm", "flag_exact", [t.p for t in tests]),
        ("p_perm_holm", None, [t.p_perm for t in tests]),
    ):
        for t, q in zip(tests, holm_adjust(ps), strict=True):
            setattr(t, adj, q)
            if flag_name:
                setattr(t, flag_name, q < level)
    for t in tests:
        t.flag = t.p_perm_holm < level if np.isfinite(t.p_perm_holm) else t.flag_exact
    return tests


def holm_adjust(ps) -> list[float]:
    """Holm-adjusted p-values (nan stays nan and does not count among the hypotheses)."""
    ps = np.asarray(ps, dtype=float)
    out = np.full(len(ps), np.nan)
    ok = np.isfinite(ps)
    order = np.argsort(np.where(ok, ps, np.inf), kind="stable")
    m, running = int(ok.sum()), 0.0
    for i, j in enumerate(order[:m]):
        running = max(running, min(1.0, (m - i) * ps[j]))
        out[j] = running
    return out.tolist()


def template_codes(cal_templates: list[str], cal_code, test_templates: list[str], test_code):
    """One integer per question for the template text (codes of two tables made comparable)."""
    texts: dict[str, int] = {}
    c = np.array([texts.setdefault(s, len(texts)) for s in cal_templates], dtype=np.int64)
    t = np.array([texts.setdefault(s, len(texts)) for s in test_templates], dtype=np.int64)
    return c[np.asarray(cal_code, dtype=np.int64)], t[np.asarray(test_code, dtype=np.int64)]


def permutation_tests(
    cal_scores,
    cal_groups,
    cal_templates,
    test_scores,
    test_groups,
    test_templates,
    reqs: list[Request],
    perms: int = PERMS,
    seed: int = 0,
    min_group: int = MIN_GROUP,
) -> list[float]:
    """Template-stratified permutation p-value of the test split's misses, per request.

    Null: within every template, calibration and test questions are exchangeable (any
    template mix on either side, any correlation of a template's outcomes). Each
    permutation reshuffles the side labels within every template (per-template counts
    kept), re-plans the pools and recomputes every threshold from the permuted calibration
    share exactly as `cpr calibrate` would (Mondrian on it), and counts the permuted test
    share's misses. p = (1 + #{permuted misses >= observed}) / (1 + perms): valid at every
    level for that null (the observed split is one draw of the same permutation law), so
    Holm across alphas keeps the family-wise level. Scores are the ones the thresholds
    read (raw S, or effective scores), the same for a question on either side; groups as
    thresholds read them (Calibrated.label)."""
    x = np.r_[np.asarray(cal_scores, dtype=float), np.asarray(test_scores, dtype=float)]
    g = np.r_[np.asarray(cal_groups, dtype=np.int64), np.asarray(test_groups, dtype=np.int64)]
    tpl = np.r_[np.asarray(cal_templates), np.asarray(test_templates)]
    n_c = len(cal_scores)
    side = np.r_[np.ones(n_c, bool), np.zeros(len(x) - n_c, bool)]
    rng = np.random.default_rng(seed)

    def misses(is_cal: np.ndarray) -> np.ndarray:
        out = np.zeros(len(reqs))
        built: dict[bool, Mondrian] = {}
        for j, req in enumerate(reqs):
            gc = g[is_cal] if req.grouped else np.zeros(n_c, np.int64)
            gt = g[~is_cal] if req.grouped else np.zeros(len(x) - n_c, np.int64)
            if req.grouped not in built:
                built[req.grouped] = Mondrian.from_scores(x[is_cal], gc, min_group)
            tau = built[req.grouped].taus(req.alpha, req.pac, gt)
            out[j] = (~(x[~is_cal] <= slack(tau))).sum()
        return out

    observed = misses(side)
    order = np.argsort(tpl, kind="stable")  # template blocks; side counts kept per block
    block_side = side[order]
    ge = np.zeros(len(reqs))
    for _ in range(perms):
        key = tpl[order] * 2.0 + rng.random(len(x))  # shuffle within each template block
        perm = order[np.argsort(key, kind="stable")]
        is_cal = np.empty(len(x), bool)
        is_cal[perm] = block_side
        ge += misses(is_cal) >= observed
    return ((1 + ge) / (1 + perms)).tolist()
