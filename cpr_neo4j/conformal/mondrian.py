"""Mondrian (group-conditional) thresholds: one tau per group from that group's own scores.

The group g(q) must be a function of the question and its candidates only (e.g. the path
length of the best candidate), never of its gold answers: then within a group the
calibration and test questions stay exchangeable, and k = rank(n_g, alpha, delta) over the
group's n_g calibration scores gives coverage >= 1 - alpha within every group (plain: on
average over calibration draws; PAC: with probability >= 1 - delta).

Small groups: a group with fewer than floor = max(min_group, min_questions(alpha, delta))
calibration questions (group_floor: the floor follows alpha and delta, so a group is never
refused for a size at which a smaller group would be pooled and answered) is pooled with
the other small groups into one fallback pool; its guarantee then holds for the pool as a
whole (a test question drawn from those groups), not for each of them. If the pool is
still below the floor, the fallback is the threshold of all calibration questions, whose
guarantee is marginal only: no promise for questions of that group in particular. A group
unseen at calibration is a small group. The plan counts the test question with the
calibration questions (plan_pools), which keeps the n + 1 questions exchangeable within
the pool. `notes()` says which groups got which.

PAC within a pool of several groups: the pool's calibration questions are an i.i.d. draw
from the pool's mixture only when the pool is fixed in advance; planned from the counts it
is exact for own-group pools (given the counts, a group's scores are i.i.d.) and for the
plain guarantee, and approximate for a pooled PAC threshold.

Storage: `to_dict()` is a flat dict of scalars and lists of numbers or strings (what a
Neo4j node property can hold): group labels, n per group and each group's finite scores
(+inf scores are implied by n, so the JSON stays strict).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from cpr_neo4j.conformal.threshold import min_questions, rank, unattainable
from cpr_neo4j.errors import BadInput

MIN_GROUP = 30
# Bump when the group of a question (the hop count of its best candidate path) or the pooling
# of small groups changes: a calibration records it (stages/pins.py) and is stale under another.
GROUP_RULES = "best-path-hops-v1"
SMALL, ALL = "small", "all"  # the fallback pools' names


def group_floor(alpha: float, delta: float | None = None, min_group: int = MIN_GROUP) -> int:
    """Calibration questions a group needs for its own threshold at (alpha, delta): at least
    min_group, and at least what a finite threshold needs with perfect recall
    (threshold.min_questions: 59 at alpha = delta = 0.05, where 30 would leave groups of
    30-58 refused while a group of 29 is pooled and answered)."""
    return max(int(min_group), min_questions(alpha, delta))


def plan_pools(
    counts: Mapping[int, int], floor: int = MIN_GROUP, test_group: int | None = None
) -> tuple[dict, str]:
    """Pool per group: its own ("g<label>"), SMALL (the small groups together) or ALL
    (every calibration question); the second value is the pool of a group not in counts.

    Without test_group (reports): own when n_g >= floor; the small groups are pooled when
    they hold >= floor questions together, else they get ALL.

    With test_group (a threshold for a question of that group), the plan is read from the
    counts of the calibration questions AND the test question: own when that count exceeds
    floor, likewise for the small groups' total. Those counts are a symmetric function of
    the n + 1 exchangeable questions, so given them the pools are fixed and the test
    question is a uniform draw among its pool's members: split conformal's argument holds
    within the pool exactly. For the test question's own group the rule is n_g >= floor, as
    without it; another group with exactly `floor` calibration questions counts as small.
    """
    c = {int(g): int(n) for g, n in counts.items()}
    bar = floor
    if test_group is not None:
        c[int(test_group)] = c.get(int(test_group), 0) + 1
        bar = floor + 1
    small_n = sum(n for n in c.values() if n < bar)
    fallback = SMALL if small_n >= bar else ALL
    pools = {g: (f"g{g}" if n >= bar else fallback) for g, n in c.items()}
    return pools, fallback


def members(pools: Mapping[int, str], name: str) -> list[int]:
    """The groups whose questions make up pool `name`."""
    return sorted(g for g, p in pools.items() if name == ALL or p == name)


def labels(groups) -> np.ndarray:
    """Integer group labels (floats holding integers are accepted)."""
    g = np.asarray(groups)
    integral = np.issubdtype(g.dtype, np.integer) or (
        np.all(np.isfinite(g)) and np.all(g == np.round(g))
    )
    if g.size and not integral:
        raise BadInput("group labels must be integers")
    return g.astype(np.int64)


class Mondrian:
    """Per-group sorted calibration scores; thresholds read from pools planned per request
    (plan_pools with the floor of group_floor(alpha, delta) and the test question's group)."""

    def __init__(self, finite: Mapping[int, np.ndarray], n: Mapping[int, int], min_group: int):
        self.min_group = int(min_group)
        self.finite = {int(g): np.sort(np.asarray(s, dtype=float)) for g, s in finite.items()}
        self.n = {int(g): int(v) for g, v in n.items()}
        if set(self.finite) != set(self.n):
            raise BadInput("every group needs both its scores and its n")
        for g, s in self.finite.items():
            if len(s) > self.n[g] or (len(s) and not (s < math.inf).all()):
                raise BadInput(f"group {g}: more finite scores than questions, or +inf/NaN")
        self._pooled: dict[tuple, tuple[np.ndarray, int]] = {}

    @classmethod
    def from_scores(cls, scores, groups, min_group: int = MIN_GROUP) -> Mondrian:
        """From per-question calibration scores S (+inf: no gold among the candidates)."""
        s = np.asarray(scores, dtype=float).reshape(-1)
        g = labels(groups).reshape(-1)
        if s.shape != g.shape:
            raise BadInput(f"{s.size} scores but {g.size} group labels")
        if np.isnan(s).any():
            raise BadInput("calibration scores contain NaN")
        found = np.unique(g).tolist()
        finite = {k: s[(g == k) & (s < math.inf)] for k in found}  # -inf: covered anyway
        return cls(finite, {k: int((g == k).sum()) for k in found}, min_group)

    def floor(self, alpha: float, delta: float | None = None) -> int:
        return group_floor(alpha, delta, self.min_group)

    def plan(self, alpha: float, delta: float | None, group: int) -> tuple[str, list[int]]:
        """(pool name, member groups) for a test question of `group`."""
        pools, fallback = plan_pools(self.n, self.floor(alpha, delta), int(group))
        name = pools.get(int(group), fallback)
        return name, [g for g in members(pools, name) if g in self.n]

    def pool_of(self, group: int, alpha: float, delta: float | None = None) -> str:
        return self.plan(alpha, delta, group)[0]

    def pool(self, alpha: float, delta: float | None, group: int) -> tuple[np.ndarray, int]:
        """(sorted finite scores, n) of the calibration questions in `group`'s pool."""
        key = tuple(self.plan(alpha, delta, group)[1])
        if key not in self._pooled:
            s = [self.finite[g] for g in key]
            self._pooled[key] = (
                np.sort(np.concatenate(s)) if s else np.zeros(0),
                sum(self.n[g] for g in key),
            )
        return self._pooled[key]

    def tau(self, alpha: float, delta: float | None = None, group: int = 0) -> float:
        """The threshold for a test question of `group` (+inf: unattainable, see why)."""
        s, n = self.pool(alpha, delta, group)
        k = rank(n, alpha, delta)
        return float(s[k - 1]) if k <= len(s) else math.inf

    def taus(self, alpha: float, delta: float | None, groups) -> np.ndarray:
        """tau per question from its group label (for flat_set_stats / cut_flat)."""
        g = labels(groups)
        uniq, inv = np.unique(g, return_inverse=True)
        return np.array([self.tau(alpha, delta, int(u)) for u in uniq])[inv.reshape(g.shape)]

    def unattainable(self, alpha: float, delta: float | None = None, group: int = 0) -> str | None:
        """Why the group's tau is +inf (threshold.unattainable's wording), or None."""
        s, n = self.pool(alpha, delta, group)
        if unattainable(n, len(s), alpha, delta) is None:
            return None
        why = unattainable(n, len(s), alpha, delta, self.smallest_alpha(group, delta))
        return f"group {group} ({self.describe(group, alpha, delta)}): {why}"

    def smallest_alpha(self, group: int, delta: float | None = None) -> float:
        """The smallest alpha, to the 0.001 that messages print, whose threshold for a
        question of `group` is finite. Its pool changes with alpha (the floor follows alpha
        and delta), so the pooled figure at one alpha need not be accepted at that figure
        (issue 55 row 3): each printed step is checked as it will be asked."""
        for step in range(1, 1000):
            a = step / 1000
            s, n = self.pool(a, delta, group)
            if rank(n, a, delta) <= len(s):
                return a
        return 1.0

    def describe(self, group: int, alpha: float, delta: float | None = None) -> str:
        """Which calibration questions a group's tau comes from, and what it guarantees."""
        name = self.pool_of(group, alpha, delta)
        n = self.pool(alpha, delta, group)[1]
        if name == ALL:
            return (
                f"too few small-group questions: the threshold of all {n} calibration "
                "questions, a marginal guarantee only"
            )
        if name == SMALL:
            return (
                f"pooled with the other small groups ({n} questions): a guarantee for the "
                "pool as a whole"
            )
        return f"own tau from {n} questions: group-conditional guarantee"

    def notes(self, alpha: float, delta: float | None = None) -> list[str]:
        """One line per fallback in use at (alpha, delta), for reports."""
        floor = self.floor(alpha, delta)
        pools, fallback = plan_pools(self.n, floor)
        small = sorted(g for g, p in pools.items() if p in (SMALL, ALL))
        if not small:
            return []
        n_small = sum(self.n[g] for g in small)
        if fallback == SMALL:
            what = "are pooled together: a guarantee for the pool as a whole, not each group"
        else:
            what = (
                f"get the threshold of all {sum(self.n.values())} calibration questions: a "
                "marginal guarantee only, no promise for those groups in particular"
            )
        return [
            f"groups {small} have fewer than {floor} calibration questions each at "
            f"alpha={alpha:g}{'' if delta is None else f', delta={delta:g}'} ({n_small} in "
            f"all) and {what}; unseen groups are treated the same way"
        ]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "mondrian",
            "min_group": self.min_group,
            "groups": sorted(self.n),
            "n": [self.n[g] for g in sorted(self.n)],
        }
        for g in sorted(self.n):
            out[f"scores_{g}"] = self.finite[g].tolist()
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Mondrian:
        """Pools are planned per request from the stored n, so none are stored."""
        groups = [int(g) for g in d["groups"]]
        return cls(
            {g: np.asarray(d[f"scores_{g}"], dtype=float) for g in groups},
            dict(zip(groups, (int(v) for v in d["n"]), strict=True)),
            int(d["min_group"]),
        )
