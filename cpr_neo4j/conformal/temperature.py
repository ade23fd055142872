"""The score temperature T of the probability families (aps, raps): fitted on training
questions' candidate tables by the gold answers' log loss (conformal.scores uses it)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from cpr_neo4j.conformal.scores import finite_costs
from cpr_neo4j.errors import BadInput


@dataclass
class TemperatureFit:
    T: float
    loss: float  # mean -log(gold mass) at T
    grid: np.ndarray
    losses: np.ndarray  # the loss curve over grid
    at_edge: bool  # the best grid point was an end of the grid: widen it


def fit_temperature(qidx, cost, gold, grid=None, refine: int = 25) -> TemperatureFit:
    """T minimising the mean over questions with a gold candidate of -log(sum of p_i over
    gold i): a log-spaced grid, then golden-section search on log T between the best grid
    point's neighbours. Fit it on training questions, not the calibration split: a T tuned
    on the calibration scores makes the score depend on them. Each evaluation is one exp
    over the table (~0.2 s per 7M candidates); 25 grid points (x1.8 apart) and 25
    golden-section steps (interval / 1.6e5) keep it to ~50."""
    q = np.asarray(qidx, dtype=np.int64)
    c = finite_costs(np.asarray(cost, dtype=float))
    g = np.asarray(gold, dtype=bool)
    if not g.any():
        raise BadInput("no question has a gold candidate: the temperature is undefined")
    nq = int(q.max()) + 1
    cmin = np.full(nq, np.inf)
    gmin = np.full(nq, np.inf)
    np.minimum.at(cmin, q, c)
    np.minimum.at(gmin, q[g], c[g])
    has = np.isfinite(gmin)
    d_all = c - cmin[q]  # >= 0: exp never overflows
    qg = q[g]
    d_gold = c[g] - gmin[qg]
    gap = (gmin - cmin)[has]

    def loss(T: float) -> float:
        z = np.bincount(q, weights=np.exp(-d_all / T), minlength=nq)[has]
        zg = np.bincount(qg, weights=np.exp(-d_gold / T), minlength=nq)[has]
        return float(np.mean(gap / T + np.log(z) - np.log(zg)))

    grid = np.geomspace(1e-3, 1e3, 25) if grid is None else np.asarray(grid, dtype=float)
    losses = np.array([loss(float(t)) for t in grid])
    i = int(np.argmin(losses))
    lo, hi = math.log(grid[max(i - 1, 0)]), math.log(grid[min(i + 1, len(grid) - 1)])
    best_t, best = float(grid[i]), float(losses[i])
    ratio = (math.sqrt(5) - 1) / 2
    a, b = hi - ratio * (hi - lo), lo + ratio * (hi - lo)
    fa, fb = loss(math.exp(a)), loss(math.exp(b))
    for _ in range(refine if hi > lo else 0):
        if fa <= fb:
            hi, b, fb = b, a, fa
            a = hi - ratio * (hi - lo)
            fa = loss(math.exp(a))
        else:
            lo, a, fa = a, b, fb
            b = lo + ratio * (hi - lo)
            fb = loss(math.exp(b))
    for t, f in ((math.exp(a), fa), (math.exp(b), fb)):
        if f < best:
            best_t, best = t, f
    return TemperatureFit(
        T=best_t, loss=best, grid=grid, losses=losses, at_edge=i in (0, len(grid) - 1)
    )
