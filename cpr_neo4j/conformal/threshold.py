"""Split-conformal threshold: the k-th smallest calibration score.

Plain (marginal): k = ceil((n+1)(1-alpha)); with exchangeable questions
P(S_test <= tau) >= 1 - alpha on average over calibration draws.
Calibration-conditional (PAC, Vovk 2012), with delta: the coverage of the k-th order
statistic is Beta(k, n+1-k) distributed, and P(Beta(k, n+1-k) < 1-alpha) =
P(Binomial(n, 1-alpha) >= k); the smallest k with that tail <= delta gives a tau whose
coverage is >= 1 - alpha with probability >= 1 - delta over the calibration draw.

Scores are costs; a question whose candidates miss every gold answer scores +inf and
counts against coverage. When k exceeds the number of finite scores, tau = +inf and the
set is every candidate: the alpha is then unattainable, because there are too few
questions (k > n) or because retrieval recall caps coverage (k > number of finite scores).

No scipy here: `cpr ask` imports this module, and scipy.stats alone costs about a second.
The binomial tail is summed in log space from log-gamma values (relative error ~1e-12);
a tail within 1e-8 of delta is decided again in exact rational arithmetic, so exact ties
(alpha = delta = 0.5 and odd n, say) go by the definition, not by rounding.

Cuts at tau use a tolerance (`within`): score <= tau + eps (1 + |tau|), which only enlarges
sets and absorbs what another machine's or backend's sums move (the canary bounds it).
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Iterable, Mapping
from fractions import Fraction
from functools import lru_cache

import numpy as np

from cpr_neo4j.errors import BadInput

# The cut is score <= tau + TOLERANCE * (1 + |tau|), an enlargement only: a test question
# whose score at calibration would have been <= tau stays in its set whenever recomputing
# moved its score by at most the slack, so coverage holds. The numpy scorer's costs are the
# same bits in every batch, order and thread count and on every BLAS kernel (model.exact;
# experiments/batch_invariance.py): no move at all on one machine. What the slack absorbs is
# another machine's or backend's sums (ONNX Runtime on another CPU; the torch backend, what
# --device cuda runs, moves costs by up to ~1e-5); the canary (stages/canary.py) refuses a
# process whose costs could move a score by more than TOLERANCE, in score units (a cost
# change d moves a surprisal by at most 2 d / T). docs/method.md has the derivation.
TOLERANCE = 1e-4
_BAND = 1e-8  # |log tail - log delta| below this: decide exactly
_EXACT_MAX_N = 20000  # exact sums beyond this are slow; the float decision stands


def conformal_rank(n: int, alpha: float) -> int:
    """k = ceil((n+1)(1-alpha)), computed exactly.

    alpha arrives as a float (0.3 is stored as 0.29999...); rounding it to a fraction
    with denominator <= 10^9 first keeps (n+1)(1-alpha) from landing just above an
    integer and shifting k by one.
    """
    if not 0.0 < alpha < 1.0:
        raise BadInput(f"alpha must lie strictly between 0 and 1, got {alpha}")
    a = Fraction(alpha).limit_denominator(10**9)
    return math.ceil((n + 1) * (1 - a))


@lru_cache(maxsize=64)
def _log_comb(n: int) -> np.ndarray:
    """log C(n, j) for j = 0..n from log-gamma values (absolute error ~ eps * n log n).
    Cached (read-only): a calibration asks for several alphas with one n."""
    lf = np.array([math.lgamma(i + 1.0) for i in range(n + 1)])
    out = lf[n] - lf - lf[::-1]
    out.flags.writeable = False
    return out


def _log_pmf(log_comb: np.ndarray, j: np.ndarray, n: int, p: float) -> np.ndarray:
    """log P(Binomial(n, p) = j) for the j given (log_comb aligned with j)."""
    return log_comb + j * math.log(p) + (n - j) * math.log1p(-p)


def _exact_tail_le(n: int, k: int, alpha: float, delta: float) -> bool:
    """P(Binomial(n, 1-alpha) >= k) <= delta in exact rationals (alpha and delta read as
    the decimals they were typed as, like conformal_rank). Homogeneous Horner over
    sum_j C(n, j) P^j Q^(n-j) with p = P/D, keeping every number an integer."""
    p = 1 - Fraction(alpha).limit_denominator(10**9)
    d = Fraction(delta).limit_denominator(10**9)
    big_p, den = p.numerator, p.denominator
    big_q = den - big_p
    m = n - k  # terms j = k..n, i.e. i = j - k = 0..m
    c = 1  # C(n, k + i), starting at i = m (j = n)
    acc, q_pow = c, 1
    for i in range(m - 1, -1, -1):
        c = c * (k + i + 1) // (n - k - i)  # C(n, k+i) from C(n, k+i+1)
        q_pow *= big_q
        acc = acc * big_p + c * q_pow
    tail_num = acc * big_p**k  # tail = tail_num / den^n
    return tail_num * d.denominator <= d.numerator * den**n


@lru_cache(maxsize=4096)  # a pure function of its arguments; every ask needs one
def pac_rank(n: int, alpha: float, delta: float) -> int:
    """Smallest k with P(Binomial(n, 1-alpha) >= k) <= delta; n + 1 when none is.

    The tail is accumulated from the top in log space, so tiny deltas (1e-12) lose
    nothing to underflow; a tail within 1e-8 (relative) of delta is re-decided exactly.
    """
    conformal_rank(n, alpha)  # validates alpha
    if not 0.0 < delta < 1.0:
        raise BadInput(f"delta must lie strictly between 0 and 1, got {delta}")
    if n == 0:
        return 1
    j = np.arange(n + 1, dtype=float)
    log_tail = np.logaddexp.accumulate(_log_pmf(_log_comb(n), j, n, 1.0 - alpha)[::-1])[::-1]
    log_delta = math.log(delta)
    ok = np.flatnonzero(log_tail[1:] <= log_delta)
    k = int(ok[0]) + 1 if ok.size else n + 1
    if n > _EXACT_MAX_N:
        return k

    def near(kk: int) -> bool:
        return 1 <= kk <= n and abs(log_tail[kk] - log_delta) < _BAND

    if near(k) and not _exact_tail_le(n, k, alpha, delta):
        while near(k) and not _exact_tail_le(n, k, alpha, delta):
            k += 1
    else:
        while near(k - 1) and _exact_tail_le(n, k - 1, alpha, delta):
            k -= 1
    return k


def rank(n: int, alpha: float, delta: float | None = None) -> int:
    """The order statistic used for tau: plain, or PAC when delta is given."""
    return conformal_rank(n, alpha) if delta is None else pac_rank(n, alpha, delta)


def smallest_alpha(n: int, n_finite: int, delta: float | None = None) -> float:
    """The smallest alpha whose tau is finite with n scores of which n_finite are finite.

    Plain: k <= n_finite iff alpha >= 1 - n_finite/(n+1) = (1 - recall) + recall/(n+1).
    PAC: 1 - the delta-quantile of Beta(n_finite, n + 1 - n_finite). By the Beta/Binomial
    identity that quantile is the x with P(Binomial(n, x) >= n_finite) = delta; the tail
    rises with x, so bisection on x finds it to double precision.
    """
    if n_finite <= 0:
        return 1.0
    if delta is None:
        return 1.0 - n_finite / (n + 1)
    if not 0.0 < delta < 1.0:
        raise BadInput(f"delta must lie strictly between 0 and 1, got {delta}")
    k = min(n_finite, n)
    j = np.arange(k, n + 1, dtype=float)
    log_comb = _log_comb(n)[k:]
    log_delta = math.log(delta)
    lo, hi = 0.0, 1.0  # tail(lo) <= delta < tail(hi)
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid in (lo, hi):
            break
        lp = _log_pmf(log_comb, j, n, mid)
        top = lp.max()
        if top + math.log(np.exp(lp - top).sum()) <= log_delta:
            lo = mid
        else:
            hi = mid
    return 1.0 - lo


@functools.lru_cache(maxsize=256)  # asked several times per request (group floors)
def min_questions(alpha: float, delta: float | None = None) -> int:
    """Calibration questions needed for a finite tau at alpha, with perfect recall."""
    if delta is None:
        a = Fraction(alpha).limit_denominator(10**9)
        return math.ceil((1 - a) / a)
    return math.ceil(math.log(delta) / math.log(1 - alpha))  # (1-alpha)^n <= delta


def percent(share: float) -> str:
    """0.997 -> '99.7%', 0.9 -> '90%' (never rounds a target up to 100%)."""
    return f"{share * 100:.4g}%"


def unattainable(
    n: int,
    n_finite: int,
    alpha: float,
    delta: float | None = None,
    smallest: float | None = None,
) -> str | None:
    """Why tau is +inf at alpha (too few questions, or recall), or None when it is finite.
    smallest: the smallest attainable alpha to print (a grouped threshold's own, which
    follows the pools of each alpha: Mondrian.smallest_alpha), else this pool's."""
    k = rank(n, alpha, delta)
    if k <= n_finite:
        return None
    pac = "" if delta is None else f" with delta={delta:g}"
    if k > n:
        also = "" if smallest is None else f"; the smallest attainable alpha is {smallest:.3f}"
        return (
            f"{n} calibration question(s) are too few for alpha={alpha:g}{pac}: at least "
            f"{min_questions(alpha, delta)} are needed for a finite threshold{also}"
        )
    least = smallest_alpha(n, n_finite, delta) if smallest is None else smallest
    return (
        f"retrieval recall caps coverage: only {n_finite} of the {n} calibration questions "
        f"({n_finite / n:.1%}) have a correct answer among the retrieved candidates, so no "
        f"threshold reaches {percent(1 - alpha)} coverage{pac}; the smallest attainable alpha is "
        f"{least:.3f}"
    )


def conformal_threshold(
    scores: Iterable[float] | np.ndarray, alpha: float, delta: float | None = None
) -> float:
    """tau = k-th smallest score (plain, or PAC with delta); +inf, with a warning that
    names the cause, when fewer than k scores are finite."""
    s = np.asarray(list(scores) if not isinstance(scores, np.ndarray) else scores, dtype=float)
    s = s.reshape(-1)
    if np.isnan(s).any():
        raise ValueError("calibration scores contain NaN")
    n = s.shape[0]
    k = rank(n, alpha, delta)
    if k > n:
        warnings.warn(f"{unattainable(n, n, alpha, delta)}; tau = +inf", stacklevel=2)
        return math.inf
    return float(np.partition(s, k - 1)[k - 1])


def nonconformity(answer_costs: Mapping[str, float], gold: Iterable[str]) -> float:
    """S(q): min cost over gold answers among the candidates; +inf if none is there."""
    costs = [answer_costs[g] for g in gold if g in answer_costs]
    return float(min(costs)) if costs else math.inf


def centred(answer_costs: Mapping[str, float], centre: float) -> dict[str, float]:
    """Costs minus `centre` times the question's best cost.

    A fixed function of the question's own candidates, so split conformal stays valid
    whatever `centre` is (chosen before calibration). 0 keeps the raw costs, whose level
    varies from question to question; 1 is the margin score (the best answer scores 0),
    whose ties at 0 take every end of the best sequence at once.
    """
    if not centre or not answer_costs:
        return dict(answer_costs)
    best = min(answer_costs.values())
    return {a: c - centre * best for a, c in answer_costs.items()}


def answer_set(answer_costs: Mapping[str, float], tau: float) -> set[str]:
    """A_q = {a : cost(a) <= tau}."""
    return {a for a, c in answer_costs.items() if c <= tau}


def within(scores, tau, eps: float = TOLERANCE) -> np.ndarray:
    """scores <= tau + eps (1 + |tau|): the cut every answer set uses.

    The tolerance absorbs what another machine or backend moves (on one machine the numpy
    scorer's costs are bit-identical, model.exact) and only ever enlarges a set. tau may
    be one value or one per score; tau = +inf keeps every score (+inf included), tau =
    -inf only scores of -inf; NaN scores are never kept.
    """
    s = np.asarray(scores, dtype=float)
    t = np.asarray(tau, dtype=float)
    with np.errstate(invalid="ignore"):  # inf + inf: np.where keeps the infinite tau
        bound = np.where(np.isinf(t), t, t + eps * (1.0 + np.abs(t)))
    return s <= bound


def cut(score, tau: float, eps: float = TOLERANCE, nonempty: bool = True) -> np.ndarray:
    """One question's answer mask: scores within tau, plus (nonempty) its top level.

    The top level is every answer tied, under the same tolerance, at the question's
    minimum score: tied answers stay together, and a superset of the tau set can only
    raise coverage. A question with candidates never gets an empty set when nonempty.
    """
    s = np.asarray(score, dtype=float)
    mask = within(s, tau, eps)
    if nonempty and s.size and not np.isnan(s).all():
        mask |= within(s, np.nanmin(s), eps)
    return mask


def cut_flat(
    qidx,
    score,
    tau,
    n_questions: int | None = None,
    eps: float = TOLERANCE,
    nonempty: bool = True,
) -> np.ndarray:
    """`cut` over the flat candidate table at once: tau is one value, or one per question
    (length n_questions, e.g. a Mondrian group's tau for each question)."""
    q = np.asarray(qidx, dtype=np.int64)
    s = np.asarray(score, dtype=float)
    nq = int(n_questions) if n_questions is not None else (int(q.max()) + 1 if q.size else 0)
    t = np.asarray(tau, dtype=float)
    mask = within(s, t[q] if t.ndim else t, eps)
    if nonempty and s.size:
        best = np.full(nq, np.inf)
        np.fmin.at(best, q, s)  # fmin: NaN scores never become a question's minimum
        mask |= within(s, best[q], eps)
    return mask
