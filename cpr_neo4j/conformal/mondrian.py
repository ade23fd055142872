"""Mondrian (group-conditional) thresholds: one tau per group from that group's own scores.

The group g(q) must be a function of the question and its candidates only (e.g. the path
length of the best candidate), never of its gold answers: then within a group the
calibration and test questions stay exchangeable, and k = rank(n_g, alpha, delta) over the
group's n_g calibration scores gives coverage >= 1 - alpha within every group (plain: on
average over calibration draws; PAC: with probability >= 1 - delta).

Small groups: a group with fewer than `min_group` calibration questions is pooled with the
other small groups into one fallback pool; its guarantee then holds for the pool as a
whole (a test question drawn from those groups), not for each of them. If the pool is
still below min_group, the fallback is the marginal tau over all calibration questions,
whose guarantee is marginal only. A group unseen at calibration is a small group.
`notes()` says which groups got which.

Storage: `to_dict()` is a flat dict of scalars and lists of numbers or strings (what a
Neo4j node property can hold): group labels, n per group and each group's finite scores
(+inf scores are implied by n, so the JSON stays strict).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from cpr_neo4j.conformal.threshold import rank, unattainable
from cpr_neo4j.errors import BadInput

MIN_GROUP = 30
SMALL, ALL = "small", "all"  # the fallback pools' names


def plan_pools(counts: Mapping[int, int], min_group: int = MIN_GROUP) -> tuple[dict, str]:
    """Pool per group: its own ("g<label>") when it has >= min_group questions, else the
    fallback: SMALL (all small groups together) when they reach min_group, else ALL."""
    small_n = sum(n for n in counts.values() if n < min_group)
    fallback = SMALL if small_n >= min_group else ALL
    pools = {g: (f"g{g}" if n >= min_group else fallback) for g, n in counts.items()}
    return pools, fallback


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
    """Per-group sorted calibration scores and the pools that thresholds are read from."""

    def __init__(self, finite: Mapping[int, np.ndarray], n: Mapping[int, int], min_group: int):
        self.min_group = int(min_group)
        self.finite = {int(g): np.sort(np.asarray(s, dtype=float)) for g, s in finite.items()}
        self.n = {int(g): int(v) for g, v in n.items()}
        if set(self.finite) != set(self.n):
            raise BadInput("every group needs both its scores and its n")
        for g, s in self.finite.items():
            if len(s) > self.n[g] or (len(s) and not np.isfinite(s).all()):
                raise BadInput(f"group {g}: more finite scores than questions, or non-finite")
        self.pools, self.fallback = plan_pools(self.n, self.min_group)
        self._pooled: dict[str, tuple[np.ndarray, int]] = {}

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
        finite = {k: s[(g == k) & np.isfinite(s)] for k in found}
        return cls(finite, {k: int((g == k).sum()) for k in found}, min_group)

    def pool_of(self, group: int) -> str:
        return self.pools.get(int(group), self.fallback)

    def pool(self, name: str) -> tuple[np.ndarray, int]:
        """(sorted finite scores, n) of a pool."""
        if name not in self._pooled:
            members = [g for g in self.n if name == ALL or self.pools[g] == name]
            s = [self.finite[g] for g in members]
            self._pooled[name] = (
                np.sort(np.concatenate(s)) if s else np.zeros(0),
                sum(self.n[g] for g in members),
            )
        return self._pooled[name]

    def tau(self, alpha: float, delta: float | None = None, group: int = 0) -> float:
        """The threshold for a test question of `group` (+inf: unattainable, see why)."""
        s, n = self.pool(self.pool_of(group))
        k = rank(n, alpha, delta)
        return float(s[k - 1]) if k <= len(s) else math.inf

    def taus(self, alpha: float, delta: float | None, groups) -> np.ndarray:
        """tau per question from its group label (for flat_set_stats / cut_flat)."""
        g = labels(groups)
        uniq, inv = np.unique(g, return_inverse=True)
        return np.array([self.tau(alpha, delta, int(u)) for u in uniq])[inv.reshape(g.shape)]

    def unattainable(self, alpha: float, delta: float | None = None, group: int = 0) -> str | None:
        """Why the group's tau is +inf (threshold.unattainable's wording), or None."""
        name = self.pool_of(group)
        s, n = self.pool(name)
        why = unattainable(n, len(s), alpha, delta)
        return None if why is None else f"group {group} ({self.describe(group)}): {why}"

    def describe(self, group: int) -> str:
        """Which calibration questions a group's tau comes from, and what it guarantees."""
        name = self.pool_of(group)
        if name == ALL:
            return "too few small-group questions: marginal tau over all, marginal guarantee"
        if name == SMALL:
            return "pooled with the other small groups: guarantee for the pool as a whole"
        return f"own tau from {self.n[int(group)]} questions: group-conditional guarantee"

    def notes(self) -> list[str]:
        """One line per fallback in use, for reports."""
        small = sorted(g for g, p in self.pools.items() if p in (SMALL, ALL))
        if not small:
            return []
        n_small = sum(self.n[g] for g in small)
        where = "pooled together" if self.fallback == SMALL else "given the marginal tau"
        return [
            f"groups {small} have fewer than {self.min_group} calibration questions each "
            f"({n_small} in all) and are {where}; unseen groups are too. "
            + self.describe(small[0]).split(": ", 1)[-1]
        ]

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": "mondrian",
            "min_group": self.min_group,
            "groups": sorted(self.n),
            "n": [self.n[g] for g in sorted(self.n)],
            "pools": [self.pools[g] for g in sorted(self.n)],
        }
        for g in sorted(self.n):
            out[f"scores_{g}"] = self.finite[g].tolist()
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Mondrian:
        groups = [int(g) for g in d["groups"]]
        m = cls(
            {g: np.asarray(d[f"scores_{g}"], dtype=float) for g in groups},
            dict(zip(groups, (int(v) for v in d["n"]), strict=True)),
            int(d["min_group"]),
        )
        if "pools" in d and [m.pools[g] for g in groups] != list(d["pools"]):
            raise BadInput("stored Mondrian pools disagree with its group sizes")
        return m
