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
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping
from fractions import Fraction

import numpy as np
from scipy import stats

from cpr_neo4j.errors import BadInput


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


def pac_rank(n: int, alpha: float, delta: float) -> int:
    """Smallest k with P(Binomial(n, 1-alpha) >= k) <= delta; n + 1 when none is."""
    conformal_rank(n, alpha)  # validates alpha
    if not 0.0 < delta < 1.0:
        raise BadInput(f"delta must lie strictly between 0 and 1, got {delta}")
    if n == 0:
        return 1
    ks = np.arange(1, n + 1)
    ok = np.flatnonzero(stats.binom.sf(ks - 1, n, 1.0 - alpha) <= delta)
    return int(ks[ok[0]]) if ok.size else n + 1


def rank(n: int, alpha: float, delta: float | None = None) -> int:
    """The order statistic used for tau: plain, or PAC when delta is given."""
    return conformal_rank(n, alpha) if delta is None else pac_rank(n, alpha, delta)


def smallest_alpha(n: int, n_finite: int, delta: float | None = None) -> float:
    """The smallest alpha whose tau is finite with n scores of which n_finite are finite.

    Plain: k <= n_finite iff alpha >= 1 - n_finite/(n+1) = (1 - recall) + recall/(n+1).
    PAC: 1 - the delta-quantile of Beta(n_finite, n + 1 - n_finite).
    """
    if n_finite <= 0:
        return 1.0
    if delta is None:
        return 1.0 - n_finite / (n + 1)
    return float(1.0 - stats.beta.ppf(delta, n_finite, n + 1 - n_finite))


def min_questions(alpha: float, delta: float | None = None) -> int:
    """Calibration questions needed for a finite tau at alpha, with perfect recall."""
    a = Fraction(alpha).limit_denominator(10**9)
    if delta is None:
        return math.ceil((1 - a) / a)
    return math.ceil(math.log(delta) / math.log(1 - alpha))  # (1-alpha)^n <= delta


def percent(share: float) -> str:
    """0.997 -> '99.7%', 0.9 -> '90%' (never rounds a target up to 100%)."""
    return f"{share * 100:.4g}%"


def unattainable(n: int, n_finite: int, alpha: float, delta: float | None = None) -> str | None:
    """Why tau is +inf at alpha (too few questions, or recall), or None when it is finite."""
    k = rank(n, alpha, delta)
    if k <= n_finite:
        return None
    pac = "" if delta is None else f" with delta={delta:g}"
    if k > n:
        return (
            f"{n} calibration question(s) are too few for alpha={alpha:g}{pac}: at least "
            f"{min_questions(alpha, delta)} are needed for a finite threshold"
        )
    return (
        f"retrieval recall caps coverage: only {n_finite} of the {n} calibration questions "
        f"({n_finite / n:.1%}) have a correct answer among the retrieved candidates, so no "
        f"threshold reaches {percent(1 - alpha)} coverage{pac}; the smallest attainable alpha is "
        f"{smallest_alpha(n, n_finite, delta):.3f}"
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
