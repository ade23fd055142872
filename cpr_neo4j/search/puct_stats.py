"""PUCT statistics: the global Beta relation priors, the per-question visit tree and its
selection rule, and the softmax that turns V_sem into the tree's prior P(p, r).

Pure bookkeeping: no graph, no model. The rollouts that feed these live in search/puct.py.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from cpr_neo4j.search.base import RelPath, Step

__all__ = ["PuctTree", "RelationPriors", "softmax"]


def _key(step: Step | str) -> str:
    return step if isinstance(step, str) else step.key()


class RelationPriors:
    """Global Beta(alpha_r, beta_r) per step key ("rel" forward, "~rel" reverse)."""

    def __init__(self, counts: Mapping[str, tuple[float, float]] | None = None):
        self.alpha: dict[str, float] = {}
        self.beta: dict[str, float] = {}
        for key, (a, b) in (counts or {}).items():
            self.alpha[key], self.beta[key] = float(a), float(b)

    def update(self, steps: Iterable[Step | str], success: bool) -> None:
        # Each step type on a rollout counts once, however often it repeats there.
        for key in dict.fromkeys(_key(s) for s in steps):
            self.alpha.setdefault(key, 1.0)
            self.beta.setdefault(key, 1.0)
            if success:
                self.alpha[key] += 1
            else:
                self.beta[key] += 1

    def rho(self, step: Step | str) -> float:
        key = _key(step)
        a, b = self.alpha.get(key, 1.0), self.beta.get(key, 1.0)
        return a / (a + b)

    def rho_map(self) -> dict[str, float]:
        return {k: self.rho(k) for k in sorted(self.alpha)}

    def to_dict(self) -> dict[str, dict[str, float]]:
        return {k: {"alpha": self.alpha[k], "beta": self.beta[k]} for k in sorted(self.alpha)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Mapping[str, float]]) -> RelationPriors:
        return cls({k: (v["alpha"], v["beta"]) for k, v in data.items()})


@dataclass
class PuctTree:
    """Visit statistics keyed by relation-sequence prefix; one per question."""

    c_puct: float = 2.0
    n_node: Counter = field(default_factory=Counter)  # N(p)
    n_edge: Counter = field(default_factory=Counter)  # N(p, r)
    w_edge: Counter = field(default_factory=Counter)  # successes through (p, r)

    def q(self, prefix: RelPath, step: Step) -> float:
        n = self.n_edge[prefix, step]
        return self.w_edge[prefix, step] / n if n else 0.0

    def select(self, prefix: RelPath, candidates: Sequence[Step], prior: Sequence[float]) -> int:
        """argmax_r Q(p,r) + c_puct P(p,r) sqrt(N(p)) / (1 + N(p,r)).

        Ties (all of them on a node's first visit, where sqrt(N(p)) = 0) go to the higher
        prior, then to the earlier candidate.
        """
        root = math.sqrt(self.n_node[prefix])

        def ucb(i: int) -> tuple[float, float]:
            step = candidates[i]
            u = self.q(prefix, step) + self.c_puct * prior[i] * root / (
                1 + self.n_edge[prefix, step]
            )
            return u, prior[i]

        return max(range(len(candidates)), key=ucb)

    def backup(self, steps: RelPath, success: bool) -> None:
        for t, step in enumerate(steps):
            prefix = steps[:t]
            self.n_node[prefix] += 1
            self.n_edge[prefix, step] += 1
            self.w_edge[prefix, step] += int(success)


def softmax(values: np.ndarray) -> np.ndarray:
    z = np.exp(values - values.max())
    return z / z.sum()
