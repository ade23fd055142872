"""Split-conformal threshold: the k-th smallest calibration score, k = ceil((n+1)(1-alpha)).

With exchangeable questions, P(S_test <= tau) >= 1 - alpha. Scores are costs; a question
whose candidates miss every gold answer scores +inf and counts against coverage.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping
from fractions import Fraction

import numpy as np

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


def conformal_threshold(scores: Iterable[float] | np.ndarray, alpha: float) -> float:
    """tau = k-th smallest score; +inf (with a warning) when k > n."""
    s = np.asarray(list(scores) if not isinstance(scores, np.ndarray) else scores, dtype=float)
    s = s.reshape(-1)
    if np.isnan(s).any():
        raise ValueError("calibration scores contain NaN")
    n = s.shape[0]
    k = conformal_rank(n, alpha)
    if k > n:
        a = Fraction(alpha).limit_denominator(10**9)
        warnings.warn(
            f"{n} calibration question(s) are too few for alpha={alpha}: k = "
            f"ceil((n+1)(1-alpha)) = {k} > n, so tau = +inf and every candidate is "
            f"answered; use at least {math.ceil((1 - a) / a)} questions",
            stacklevel=2,
        )
        return math.inf
    return float(np.partition(s, k - 1)[k - 1])


def nonconformity(answer_costs: Mapping[str, float], gold: Iterable[str]) -> float:
    """S(q): min cost over gold answers among the candidates; +inf if none is there."""
    costs = [answer_costs[g] for g in gold if g in answer_costs]
    return float(min(costs)) if costs else math.inf


def answer_set(answer_costs: Mapping[str, float], tau: float) -> set[str]:
    """A_q = {a : cost(a) <= tau}."""
    return {a for a, c in answer_costs.items() if c <= tau}
