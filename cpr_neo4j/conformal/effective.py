"""Effective scores: calibrating never-empty sets on what they actually need.

A never-empty set always holds its question's top level (every candidate tied, within
the tolerance, at the question's best score: threshold.cut). So a calibration question
whose top level already holds a gold answer is covered at any threshold: its conformity
score is effectively -inf, not its raw S. The coverage event of a never-empty set is
exactly {S_eff <= tau} with S_eff = -inf for such a question and S otherwise, and S_eff is
a fixed function of the question and its candidates, so split conformal (plain, PAC,
Mondrian) on S_eff is valid for never-empty sets, and its k-th smallest score is never
above the raw one: tighter thresholds, smaller sets. For sets that may be empty it is not
valid (the top level is not always in), and the raw S is used.

FNR mode likewise: a gold answer in the top level is always found, so its score is
effectively -inf in the loss curve L_i(lambda) = 1 - |Y_i ∩ (C_lambda ∪ top_i)| / |Y_i|.
"""

from __future__ import annotations

import numpy as np

from cpr_neo4j.conformal.threshold import TOLERANCE, within


def top_level(qidx, score, n_questions: int, eps: float = TOLERANCE) -> np.ndarray:
    """Per candidate: is it in its question's top level (the cut's always-in part)?"""
    q = np.asarray(qidx, dtype=np.int64)
    s = np.asarray(score, dtype=float)
    best = np.full(int(n_questions), np.inf)
    if s.size:
        np.fmin.at(best, q, s)
    return within(s, best[q], eps) if s.size else np.zeros(0, bool)


def question_top_hit(qidx, top, n_questions: int) -> np.ndarray:
    """Per question: does some gold candidate (qidx, top: one entry per gold candidate)
    lie in its top level?"""
    hit = np.zeros(int(n_questions), bool)
    q = np.asarray(qidx, dtype=np.int64)
    t = np.asarray(top, dtype=bool)
    hit[q[t]] = True
    return hit


def scores(raw: np.ndarray, top_hit: np.ndarray) -> np.ndarray:
    """S_eff: -inf where the top level already covers the question, else the raw S."""
    return np.where(np.asarray(top_hit, bool), -np.inf, np.asarray(raw, dtype=float))
