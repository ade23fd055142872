"""How many calibration draws may fall below target under PAC: the allowance is derived
from delta and the number of draws, not typed by hand."""

from __future__ import annotations

import math

FALSE_ALARM = 1e-3  # the chance that a valid PAC threshold fails a check using pac_allowance


def binomial_tail(k: int, n: int, p: float) -> float:
    """P(X > k) for X ~ Binomial(n, p): the sum of C(n, j) p^j (1 - p)^(n - j) over j > k
    (each term in logs, so large n does not overflow)."""
    log_p, log_q = math.log(p), math.log1p(-p)

    def log_term(j: int) -> float:
        return (
            math.lgamma(n + 1)
            - math.lgamma(j + 1)
            - math.lgamma(n - j + 1)
            + j * log_p
            + (n - j) * log_q
        )

    return sum(math.exp(log_term(j)) for j in range(k + 1, n + 1))


def pac_allowance(draws: int, delta: float, false_alarm: float = FALSE_ALARM) -> int:
    """The most draws below 1 - alpha a PAC(delta) threshold may show. Under PAC each
    independent calibration draw is below target with probability at most delta, so the
    count is stochastically at most Binomial(draws, delta): the smallest k with
    P(Binomial(draws, delta) > k) <= false_alarm."""
    return next(k for k in range(draws + 1) if binomial_tail(k, draws, delta) <= false_alarm)
