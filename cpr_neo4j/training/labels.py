"""How few labelled questions are shared between calibration and training, and what each
alpha needs.

The rule (`cpr train` with no `--cal-share`): calibration takes its share first, because
without it no alpha is attainable at all, and a calibration question must never be trained
on. The share is `max(10% of the labels, min(all labels, CAL_FLOOR))`: CAL_FLOOR = 59 is
what alpha = delta = 0.05 needs for one group, so up to 59 labels all go to calibration
(training then uses generated questions alone), from 60 to 590 calibration keeps 59 and
training gets the rest, and from 590 on it is the usual 10%. An explicit `--cal-share`
takes exactly that share instead.

What an alpha needs (conformal/threshold.py, min_questions; PAC, delta = 0.05): n with
(1 - alpha)^n <= delta for a finite threshold even when the best-ranked answer is always
right; with per-group thresholds (the default groups by hop count) each group needs
max(30, that) of its own, else it shares the small groups' or everyone's threshold.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from cpr_neo4j.conformal.guarantee import DEFAULT_DELTA
from cpr_neo4j.conformal.mondrian import group_floor
from cpr_neo4j.conformal.threshold import min_questions
from cpr_neo4j.training.questions import Question

CAL_FLOOR = min_questions(0.05, 0.05)  # 59
CAL_SHARE = 0.1
NEEDS_ALPHAS = (0.05, 0.1, 0.2, 0.3, 0.5)


def calibration_count(n: int, share: float | None) -> int:
    """Labels reserved for calibration out of `n` (module docstring)."""
    if share is not None:
        return round(n * share)
    return max(round(n * CAL_SHARE), min(n, CAL_FLOOR))


def reserve(
    questions: Sequence[Question], share: float | None, seed: int
) -> tuple[list[Question], list[Question]]:
    """(training, calibration): a seeded random calibration reserve, disjoint from training."""
    order = sorted(questions, key=lambda q: q.id)
    random.Random(seed).shuffle(order)
    k = calibration_count(len(order), share)
    return order[k:], order[:k]


@dataclass(frozen=True)
class Need:
    alpha: float
    one_group: int  # calibration questions for a finite threshold, one threshold for all
    per_group: int  # each group's own threshold (groups by hop count)


def needs(
    alphas: Sequence[float] = NEEDS_ALPHAS, delta: float = DEFAULT_DELTA, groups: int = 3
) -> list[Need]:
    """What each alpha needs; `per_group` x `groups` for every group to have its own."""
    return [
        Need(alpha=a, one_group=min_questions(a, delta), per_group=group_floor(a, delta) * groups)
        for a in alphas
    ]


def needs_text(n_cal: int, delta: float = DEFAULT_DELTA, groups: int = 3) -> str:
    """One paragraph for the user: what their calibration share attains, what more buys."""
    rows = needs(delta=delta, groups=groups)
    parts = [
        f"alpha {r.alpha:g}: {r.one_group} (each of {groups} hop groups its own: {r.per_group})"
        for r in rows
    ]
    ok = [r.alpha for r in rows if r.one_group <= n_cal]
    reach = f"the smallest alpha it can attain is {min(ok):g}" if ok else "no alpha is attainable"
    return (
        f"{n_cal} labelled question(s) kept for calibration: {reach} (with perfect retrieval; "
        f"delta {delta:g}). Calibration questions each alpha needs: " + "; ".join(parts) + ". "
        "More labels first make smaller alphas attainable, then per-hop thresholds, then "
        f"(past {CAL_FLOOR} for calibration) go to training, which makes sets smaller."
    )
