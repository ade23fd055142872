"""Score families: nonconformity per candidate answer from ONE question's candidate costs.

Every family is a fixed function of a question's own candidates (its costs, and for two of
them entity ids or per-answer masses), with parameters chosen before calibration, so the
split-conformal guarantee holds for each. Scores are costs: lower = more plausible.

Levels: a question's distinct cost values in ascending order; level rank L = 1 at the
lowest cost, 2 at the next distinct value... Ties are common (every end entity of one
relation sequence shares its cost) and tied answers always share a score, so a cut never
splits a level.

The per-question functions are the readable definitions; `family_scores` computes the same
over the flat candidate table of a whole split at once. Use `family_scores` at ask time too
(one question = qidx of zeros): its operations per question do not depend on the other
questions, so calibration and ask give bit-identical scores. A calibration stores
`make_spec(...)` ({"family": "raps", "T": ..., "lam": ..., "k_reg": ...}) and ask time
recomputes the same scores with `from_spec`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from cpr_neo4j.errors import BadInput

# Bump when a family's definition changes (its parameters are stored with the calibration):
# a calibration records it (stages/pins.py) and is stale under another.
FAMILY_RULES = "families-v1"

# ---------------------------------------------------------------- one question


def centred(c, centre: float) -> np.ndarray:
    """c - centre * min(c): 0 keeps raw costs, 1 is the margin to the question's best."""
    c = np.asarray(c, dtype=float)
    return c - centre * c.min() if c.size and centre else c.copy()


def softmax_probs(c, T: float) -> np.ndarray:
    """p_i = exp(-c_i/T) / sum_j exp(-c_j/T), shifted by min(c) so nothing overflows."""
    c = finite_costs(np.asarray(c, dtype=float))
    if not c.size:
        return c.copy()
    e = np.exp(-(c - c.min()) / _positive(T, "T"))
    return e / e.sum()


def aps(c, T: float) -> np.ndarray:
    """Non-randomised APS with ties kept together: s_i = sum of p_j over c_j <= c_i (an
    answer's level shares the cumulative mass through the end of the level)."""
    c = np.asarray(c, dtype=float)
    if not c.size:
        return c.copy()
    p = softmax_probs(c, T)
    _, inv = np.unique(c, return_inverse=True)
    return np.cumsum(np.bincount(inv, weights=p))[inv]


def raps(c, T: float, lam: float, k_reg: int) -> np.ndarray:
    """APS + lam * max(0, L_i - k_reg): the rank penalty keeps sets near top-k_reg levels
    when the top answers are usually right (Angelopoulos et al., ICLR 2021)."""
    return aps(c, T) + _nonneg(lam, "lam") * np.maximum(0.0, level_rank(c) - k_reg)


def level_rank(c) -> np.ndarray:
    """s_i = L_i: top-k over distinct score levels (tied answers stay together)."""
    c = np.asarray(c, dtype=float)
    return (np.unique(c, return_inverse=True)[1] + 1.0) if c.size else c.copy()


def id_rank(c, ids) -> np.ndarray:
    """1-based rank by (cost, entity id): the top-k baseline, ties split by id."""
    c = np.asarray(c, dtype=float)
    r = np.empty(c.size)
    r[np.lexsort((np.asarray(ids), c))] = np.arange(1, c.size + 1)
    return r


def mass_score(m) -> np.ndarray:
    """s_i = 1 - m_i for per-answer probabilities m_i in [0, 1] (e.g. the softmax mass of
    the candidate relation sequences that reach answer i, computed elsewhere)."""
    m = np.asarray(m, dtype=float)
    if m.size and (np.nanmin(m) < 0 or np.nanmax(m) > 1 or np.isnan(m).any()):
        raise BadInput("answer masses must lie in [0, 1]")
    return 1.0 - m


# ---------------------------------------------------------------- flat table


class _Segments:
    """The flat table sorted by (question, cost [, key]): segment and level bookkeeping."""

    def __init__(self, qidx, cost, tie_key=None):
        q = np.asarray(qidx)
        c = np.asarray(cost, dtype=float)
        if q.shape != c.shape:
            raise BadInput(f"qidx and cost differ in length ({q.size} vs {c.size})")
        if np.isnan(c).any():
            raise BadInput("candidate costs contain NaN")
        keys = (c, q) if tie_key is None else (np.asarray(tie_key), c, q)
        self.order = np.lexsort(keys)
        self.q, self.c = q[self.order], c[self.order]
        n = c.size
        first = np.ones(n, dtype=bool)
        first[1:] = self.q[1:] != self.q[:-1]
        self.starts = np.flatnonzero(first)
        self.seg = np.cumsum(first) - 1  # segment index of every sorted candidate
        new_level = first.copy()
        new_level[1:] |= self.c[1:] != self.c[:-1]
        self.level_starts = np.flatnonzero(new_level)
        self.level = np.cumsum(new_level) - 1  # global level index
        self.first = first

    def unsort(self, sorted_values: np.ndarray) -> np.ndarray:
        out = np.empty_like(sorted_values)
        out[self.order] = sorted_values
        return out

    def level_rank(self) -> np.ndarray:
        """L per sorted candidate."""
        return (self.level - self.level[self.starts][self.seg] + 1).astype(float)

    def probs(self, T: float) -> np.ndarray:
        """Softmax per question, per sorted candidate (the same operations as
        softmax_probs: reduceat sums a segment pairwise, as ndarray.sum does)."""
        finite_costs(self.c)
        e = np.exp(-(self.c - self.c[self.starts][self.seg]) / _positive(T, "T"))
        return e / np.add.reduceat(e, self.starts)[self.seg] if e.size else e

    def aps(self, T: float) -> np.ndarray:
        """Cumulative mass through the end of each level, restarted per question.

        The running sum is restarted per question by a loop over questions (not over
        candidates): one global cumulative sum minus offsets would carry rounding from
        every earlier question (~1e-12 over a split), breaking bit-identity with ask time.
        """
        p = self.probs(T)
        if not p.size:
            return p
        mass = np.add.reduceat(p, self.level_starts)  # one entry per level
        lv_seg = self.seg[self.level_starts]
        lv_first = np.flatnonzero(np.r_[True, lv_seg[1:] != lv_seg[:-1]])
        cum = np.empty_like(mass)
        for a, b in zip(lv_first.tolist(), [*lv_first[1:].tolist(), mass.size], strict=True):
            np.cumsum(mass[a:b], out=cum[a:b])
        return cum[self.level]


def _flat_centred(qidx, cost, centre: float = 0.0) -> np.ndarray:
    q = np.asarray(qidx, dtype=np.int64)
    c = np.asarray(cost, dtype=float)
    if not centre or not c.size:
        return c.copy()
    best = np.full(int(q.max()) + 1, np.inf)
    np.minimum.at(best, q, c)
    return c - centre * best[q]


def _flat_aps(qidx, cost, T: float) -> np.ndarray:
    s = _Segments(qidx, cost)
    return s.unsort(s.aps(T))


def _flat_raps(qidx, cost, T: float, lam: float, k_reg: int) -> np.ndarray:
    s = _Segments(qidx, cost)
    pen = _nonneg(lam, "lam") * np.maximum(0.0, s.level_rank() - k_reg)
    return s.unsort(s.aps(T) + pen)


def _flat_level(qidx, cost) -> np.ndarray:
    s = _Segments(qidx, cost)
    return s.unsort(s.level_rank())


def _flat_id_rank(qidx, cost, ids) -> np.ndarray:
    s = _Segments(qidx, cost, tie_key=ids)
    pos = np.arange(s.c.size) - s.starts[s.seg] + 1.0
    return s.unsort(pos)


def _flat_mass(qidx, cost, mass) -> np.ndarray:
    if np.shape(mass) != np.shape(cost):
        raise BadInput("mass must give one value per candidate")
    return mass_score(mass)


@dataclass(frozen=True)
class Family:
    fn: Callable[..., np.ndarray]
    params: tuple[str, ...]  # numbers a calibration stores
    inputs: tuple[str, ...] = ()  # per-candidate arrays recomputed at ask time


FAMILIES: dict[str, Family] = {
    "centred": Family(_flat_centred, ("centre",)),
    "aps": Family(_flat_aps, ("T",)),
    "raps": Family(_flat_raps, ("T", "lam", "k_reg")),
    "level": Family(_flat_level, ()),
    "id_rank": Family(_flat_id_rank, (), ("ids",)),
    "mass": Family(_flat_mass, (), ("mass",)),
}


def family_scores(qidx, cost, family: str, **params: Any) -> np.ndarray:
    """Scores of every candidate in the flat table (original order) for a named family;
    params are the family's numbers plus its per-candidate inputs (ids, mass)."""
    fam = _family(family)
    want = set(fam.params) | set(fam.inputs)
    extra, missing = set(params) - want, set(fam.inputs) - set(params)
    if extra or missing:
        raise BadInput(
            f"family {family!r} takes {sorted(want)}; got unknown {sorted(extra)}, "
            f"missing {sorted(missing)}"
        )
    return fam.fn(qidx, cost, **params)


def make_spec(family: str, **params: float) -> dict[str, Any]:
    """The JSON-able record a calibration stores: {"family": name, param: value, ...}."""
    fam = _family(family)
    if set(params) != set(fam.params):
        raise BadInput(f"family {family!r} needs exactly {list(fam.params)}, got {list(params)}")
    return {"family": family, **{k: float(params[k]) for k in fam.params}}


def from_spec(qidx, cost, spec: Mapping[str, Any], **inputs: Any) -> np.ndarray:
    """Recompute a stored spec's scores (inputs: ids / mass where the family needs them)."""
    fam = _family(str(spec["family"]))
    params = {k: spec[k] for k in fam.params}
    if "k_reg" in params:
        params["k_reg"] = int(params["k_reg"])
    return family_scores(qidx, cost, str(spec["family"]), **params, **inputs)


# ---------------------------------------------------------------- checks


def _family(name: str) -> Family:
    if name not in FAMILIES:
        raise BadInput(f"unknown score family {name!r}; known: {sorted(FAMILIES)}")
    return FAMILIES[name]


def _positive(x: float, name: str) -> float:
    if not x > 0:
        raise BadInput(f"{name} must be > 0, got {x}")
    return float(x)


def _nonneg(x: float, name: str) -> float:
    if not x >= 0:
        raise BadInput(f"{name} must be >= 0, got {x}")
    return float(x)


def finite_costs(c: np.ndarray) -> np.ndarray:
    """c itself; BadInput when a cost is not finite (probabilities need finite costs)."""
    if c.size and not np.isfinite(c).all():
        raise BadInput("probability-based scores need finite candidate costs")
    return c
