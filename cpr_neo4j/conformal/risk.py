"""Conformal risk control of the false-negative rate (Angelopoulos, Bates, Fisch, Lei,
Schuster, ICLR 2024).

C_lambda(q) = answers with score <= lambda; loss L_i(lambda) = 1 - |Y_i ∩ C_lambda| / |Y_i|
in [0, 1], non-increasing in lambda. lambda-hat = inf{lambda : (n/(n+1)) mean_i L_i(lambda)
+ 1/(n+1) <= alpha}; then E[L_test(lambda-hat)] <= alpha: on average a test question's set
misses at most alpha of its correct answers.

With W(lambda) = sum over calibration questions of (their gold candidates with score <=
lambda) / |Y_i|, the condition is exactly W(lambda) >= (n+1)(1-alpha). So the curve is
stored as the sorted gold-candidate scores with the |Y_i| of each (weight 1/|Y_i|), plus n:
lambda-hat is the smallest stored score whose cumulative weight reaches (n+1)(1-alpha).
Near that boundary the float cumulative sum is re-checked in exact rationals, so exact ties
(single-answer questions, alpha = 0.1, n = 99) go by the definition. |Y_i| counts gold
answers that are not among the candidates too: they can never be found, so they cap W.
Questions with |Y_i| = 0 have no defined loss and are left out (counted in n_skipped).

`GroupedFnr`: one curve per group with conformal.mondrian's small-group pooling.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from cpr_neo4j.conformal.mondrian import (
    ALL,
    MIN_GROUP,
    SMALL,
    group_floor,
    labels,
    members,
    plan_pools,
)
from cpr_neo4j.conformal.threshold import conformal_rank
from cpr_neo4j.errors import BadInput

_EPS = np.finfo(float).eps


class FnrCurve:
    """Sorted finite gold-candidate scores, each with its question's |Y_i|, and n."""

    def __init__(self, scores, n_gold, n: int, inf_n_gold=(), n_skipped: int = 0):
        s = np.asarray(scores, dtype=float)
        ng = np.asarray(n_gold, dtype=np.int64)
        if s.shape != ng.shape or (s.size and not (s < math.inf).all()):
            raise BadInput("FNR curve: one score below +inf per n_gold entry")
        order = np.argsort(s, kind="stable")
        self.scores, self.n_gold = s[order], ng[order]
        self.inf_n_gold = np.asarray(inf_n_gold, dtype=np.int64)  # gold scored +inf
        if (self.n_gold < 1).any() or (self.inf_n_gold < 1).any():
            raise BadInput("FNR curve: every gold candidate's question needs |Y| >= 1")
        self.n, self.n_skipped = int(n), int(n_skipped)
        self.cum = np.cumsum(1.0 / self.n_gold)
        self.total = float(self.cum[-1]) if self.cum.size else 0.0
        self.total_all = self.total + float((1.0 / self.inf_n_gold).sum())

    @classmethod
    def from_flat(cls, qidx, score, gold, n_gold) -> FnrCurve:
        """From the flat candidate table and |Y_i| per question (len(n_gold) questions)."""
        q = np.asarray(qidx, dtype=np.int64)
        s = np.asarray(score, dtype=float)
        g = np.asarray(gold, dtype=bool)
        ng = np.asarray(n_gold, dtype=np.int64)
        if not q.shape == s.shape == g.shape:
            raise BadInput("qidx, score and gold must have one entry per candidate")
        if np.isnan(s[g]).any():
            raise BadInput("gold candidates have NaN scores")
        found = np.bincount(q[g], minlength=ng.size)
        if found.size > ng.size or (found > ng).any():
            raise BadInput("a question has more gold candidates than gold answers")
        keep = g & (ng[q] > 0)
        fin = keep & (s < math.inf)  # -inf (effective scores: always found) included
        inf = keep & ~fin
        counted = int((ng > 0).sum())
        return cls(s[fin], ng[q[fin]], counted, ng[q[inf]], ng.size - counted)

    @classmethod
    def merge(cls, curves: Sequence[FnrCurve]) -> FnrCurve:
        """One curve over the union of the curves' questions."""
        return cls(
            np.concatenate([c.scores for c in curves] or [np.zeros(0)]),
            np.concatenate([c.n_gold for c in curves] or [np.zeros(0, np.int64)]),
            sum(c.n for c in curves),
            np.concatenate([c.inf_n_gold for c in curves] or [np.zeros(0, np.int64)]),
            sum(c.n_skipped for c in curves),
        )

    def _need(self, alpha: float) -> Fraction:
        conformal_rank(self.n, alpha)  # validates alpha
        return (self.n + 1) * (1 - Fraction(alpha).limit_denominator(10**9))

    def _exact_w(self, j: int) -> Fraction:
        """W at the (j+1)-th stored score, in rationals: sum over |Y| values of count/|Y|."""
        counts = np.bincount(self.n_gold[: j + 1])
        return sum((Fraction(int(c), v) for v, c in enumerate(counts) if c), Fraction(0))

    def lam(self, alpha: float) -> float:
        """lambda-hat; +inf when no finite score reaches the bound (see unattainable)."""
        need = self._need(alpha)
        need_f = float(need)
        # sequential-sum rounding of cum[j] is at most (j+1) eps W_j; 4x that is the band
        tol = 4 * (self.cum.size + 1) * _EPS * max(need_f, 1.0)
        j = int(np.searchsorted(self.cum, need_f - tol, side="left"))
        while j < self.cum.size and self.cum[j] <= need_f + tol and self._exact_w(j) < need:
            j += 1
        return float(self.scores[j]) if j < self.cum.size else math.inf

    def unattainable(self, alpha: float) -> str | None:
        """Why no lambda, not even +inf (every candidate), meets alpha; None when one does."""
        need = self._need(alpha)
        tol = 4 * (self.cum.size + 1) * _EPS * max(float(need), 1.0)
        if self.total_all > float(need) + tol:
            return None
        if self.total_all >= float(need) - tol:  # near the boundary: decide exactly
            exact = self._exact_w(self.cum.size - 1) if self.cum.size else Fraction(0)
            exact += sum((Fraction(1, int(v)) for v in self.inf_n_gold), Fraction(0))
            if exact >= need:
                return None
        if self.n == 0:
            return "no calibration question has a gold answer: the false-negative rate is unset"
        recall = self.total_all / self.n
        if recall >= 1 - 1e-12:
            return (
                f"{self.n} calibration question(s) are too few for FNR alpha={alpha:g}: at "
                f"least {math.ceil(1 / Fraction(alpha).limit_denominator(10**9) - 1)} are needed"
            )
        return (
            f"retrieval's answer recall caps the false-negative rate: the candidates hold "
            f"{recall:.1%} of the gold answers of the {self.n} calibration questions on "
            f"average, so even every candidate misses more than alpha={alpha:g} of them; the "
            f"smallest attainable alpha is {self.smallest_alpha():.3f}"
        )

    def smallest_alpha(self) -> float:
        """1 - W(+inf)/(n+1): the smallest alpha with an attainable lambda."""
        return 1.0 - self.total_all / (self.n + 1) if self.n else 1.0

    @property
    def recall(self) -> float:
        """Mean answer recall of retrieval itself: mean_i |Y_i ∩ candidates| / |Y_i|."""
        return self.total_all / self.n if self.n else math.nan

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": "fnr",
            "n": self.n,
            "n_skipped": self.n_skipped,
            "scores": self.scores.tolist(),
            "n_gold": self.n_gold.tolist(),
            "inf_n_gold": self.inf_n_gold.tolist(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], prefix: str = "") -> FnrCurve:
        return cls(
            d[f"{prefix}scores"],
            d[f"{prefix}n_gold"],
            int(d[f"{prefix}n"]),
            d.get(f"{prefix}inf_n_gold", ()),
            int(d.get(f"{prefix}n_skipped", 0)),
        )


class GroupedFnr:
    """One FNR curve per group, small groups pooled as in conformal.mondrian (the floor is
    group_floor(alpha): max(min_group, the questions a finite lambda-hat needs))."""

    def __init__(self, curves: Mapping[int, FnrCurve], min_group: int = MIN_GROUP):
        self.curves = {int(g): c for g, c in curves.items()}
        self.min_group = int(min_group)
        self._pooled: dict[tuple, FnrCurve] = {}

    @classmethod
    def from_flat(cls, qidx, score, gold, n_gold, groups, min_group: int = MIN_GROUP):
        """groups: one integer label per question (aligned with n_gold)."""
        q = np.asarray(qidx, dtype=np.int64)
        ng = np.asarray(n_gold, dtype=np.int64)
        gl = labels(groups)
        if gl.shape != ng.shape:
            raise BadInput("one group label per question")
        curves = {}
        for k in np.unique(gl).tolist():
            mine = gl == k
            sub = np.flatnonzero(mine)
            remap = np.full(ng.size, -1)
            remap[sub] = np.arange(sub.size)
            cand = mine[q]
            curves[k] = FnrCurve.from_flat(
                remap[q[cand]], np.asarray(score)[cand], np.asarray(gold)[cand], ng[sub]
            )
        return cls(curves, min_group)

    def plan(self, alpha: float, group: int) -> tuple[str, list[int]]:
        """(pool name, member groups) for a test question of `group` (mondrian.plan_pools,
        counting questions with a gold answer: the ones the loss is defined on)."""
        floor = group_floor(alpha, None, self.min_group)
        pools, fallback = plan_pools({g: c.n for g, c in self.curves.items()}, floor, group)
        name = pools.get(int(group), fallback)
        return name, [g for g in members(pools, name) if g in self.curves]

    def pool_of(self, group: int, alpha: float) -> str:
        return self.plan(alpha, group)[0]

    def curve(self, group: int, alpha: float) -> FnrCurve:
        key = tuple(self.plan(alpha, group)[1])
        if key not in self._pooled:
            self._pooled[key] = FnrCurve.merge([self.curves[g] for g in key])
        return self._pooled[key]

    def lam(self, alpha: float, group: int) -> float:
        return self.curve(group, alpha).lam(alpha)

    def lams(self, alpha: float, groups) -> np.ndarray:
        """lambda-hat per question from its group label."""
        g = labels(groups)
        uniq, inv = np.unique(g, return_inverse=True)
        return np.array([self.lam(alpha, int(u)) for u in uniq])[inv.reshape(g.shape)]

    def unattainable(self, alpha: float, group: int) -> str | None:
        why = self.curve(group, alpha).unattainable(alpha)
        name = self.pool_of(group, alpha)
        where = {SMALL: "pooled small groups", ALL: "all groups: marginal"}.get(name, "own")
        return None if why is None else f"group {group} ({where}): {why}"

    def to_dict(self) -> dict[str, Any]:
        gs = sorted(self.curves)
        out: dict[str, Any] = {"kind": "fnr_grouped", "min_group": self.min_group, "groups": gs}
        for g in gs:
            for k, v in self.curves[g].to_dict().items():
                if k != "kind":
                    out[f"g{g}_{k}"] = v
        return out

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> GroupedFnr:
        """Pools are planned per request from the stored curves, so none are stored."""
        gs = [int(g) for g in d["groups"]]
        return cls({g: FnrCurve.from_dict(d, f"g{g}_") for g in gs}, int(d["min_group"]))
