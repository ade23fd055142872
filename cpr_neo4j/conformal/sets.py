"""Answer sets of many questions at many thresholds, fast: one sort per score family.

`SetCounter` takes one flat candidate table (evaluation/table.py) scored by one family and
answers, for any per-question threshold, each question's set size and the gold answers in
its set, with the tolerance cut (threshold.within) and, unless empty sets are allowed,
the top level added (the answers tied at the question's best score). Evaluation asks this
for every split, alpha and variant, so candidates are sorted once and each question is
read only up to its threshold.
"""

from __future__ import annotations

import math

import numpy as np

from cpr_neo4j.conformal.threshold import TOLERANCE


def slack(tau: float | np.ndarray, eps: float = TOLERANCE) -> float | np.ndarray:
    """tau + eps * (1 + |tau|): the cut that only enlarges sets (+-inf stay as they are,
    as in threshold.within)."""
    t = np.asarray(tau, dtype=float)
    with np.errstate(invalid="ignore"):
        out = np.where(np.isinf(t), t, t + eps * (1 + np.abs(t)))
    return out if out.ndim else float(out)


class SetCounter:
    def __init__(
        self,
        qidx: np.ndarray,
        score: np.ndarray,
        gold: np.ndarray,
        n_questions: int,
        eps: float = TOLERANCE,
    ):
        self.n, self.eps = n_questions, eps
        order = np.argsort(score, kind="stable")
        self.sorted, self.q = score[order], qidx[order].astype(np.int64)
        g = gold[order]
        self.gsorted, self.gq = self.sorted[g], self.q[g]
        self.total = np.bincount(self.q, minlength=n_questions)
        self.best = np.full(n_questions, np.inf)
        np.minimum.at(self.best, self.q, self.sorted)
        self.score = np.full(n_questions, np.inf)  # S(q): the best gold answer's score
        np.minimum.at(self.score, self.gq, self.gsorted)
        # the top level: answers within the tolerance of the question's best score
        top = self.sorted <= slack(self.best, eps)[self.q]
        self.top_size = np.bincount(self.q[top], minlength=n_questions)
        self.top_gold = np.bincount(self.q[top & g], minlength=n_questions)

    def counts(
        self, tau: float | np.ndarray, nonempty: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        """(set size, gold answers in the set) per question at per-question thresholds."""
        taus = np.broadcast_to(np.asarray(tau, dtype=float), (self.n,))
        size = np.zeros(self.n, dtype=np.int64)
        hit = np.zeros(self.n, dtype=np.int64)
        for value in np.unique(taus):
            mine = taus == value
            if math.isinf(value) and value > 0:
                size[mine], hit[mine] = self.total[mine], self._all_gold()[mine]
                continue
            cut = slack(value, self.eps)
            upto = int(np.searchsorted(self.sorted, cut, side="right"))
            gupto = int(np.searchsorted(self.gsorted, cut, side="right"))
            size[mine] = np.bincount(self.q[:upto], minlength=self.n)[mine]
            hit[mine] = np.bincount(self.gq[:gupto], minlength=self.n)[mine]
        if nonempty:
            # the set is (within tau) | (the top level): both are prefixes of the question's
            # sorted scores, so the union is the top level exactly where tau < best
            low = taus < self.best
            size[low], hit[low] = self.top_size[low], self.top_gold[low]
        return size, hit

    def _all_gold(self) -> np.ndarray:
        return np.bincount(self.gq, minlength=self.n)
