"""Open hop-by-hop expansion: the UaG-style hop-level baseline's retrieval.

Each hop's conformal set decides the next hop's frontier. At hop t every child of a kept
sequence whose cost is <= taus[t-1] is kept (no top-A), and only kept sequences expand at
hop t+1. Like TreeG it works on DISTINCT relation sequences, each with the entities it
reaches (search/frontier.py: the same simple-path rule), with ONE `source.neighbours()`
call per hop for the union of the frontier entities. The result is the sequences of
length exactly H that survive, with their hop-1..H prefix costs and end entities.

One run serves many thresholds. The entities a sequence reaches depend on the sequence
alone, so without caps the survivors at any taus' <= taus (componentwise) are exactly the
survivors at taus whose every hop-t prefix cost is <= taus'[t] (`survivors`).

Safety caps, never silent: per hop the passing children are ranked by (cost, sequence) and
the longest prefix of that ranking within `max_sequences` sequences (and, for hops whose
ends are fetched next, `max_frontier` entities in the union of their ends) is kept;
`cut[t]` is the cost of the first child dropped (+inf when no cap bound). Filtering to
taus' equals a direct run at taus' when taus'[t] < cut[t] at every hop (`exact`): by
induction over hops, every child a direct run would consider then costs less than the cut,
so it lies in the kept prefix, and the direct run's kept set, a subset of that prefix,
fits within both caps.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from cpr_neo4j.search.base import NeighbourSource, RelPath
from cpr_neo4j.search.frontier import child_beam, expand, frontier_ids, root

CostFn = Callable[[list[RelPath]], np.ndarray]  # cost per relation sequence (lower = better)
MAX_SEQUENCES = 4096  # per hop; MetaQA has at most 18 steps per node, 18^3 = 5832 at hop 3
MAX_FRONTIER = 20_000  # entities fetched in one hop's round trip


@dataclass(frozen=True)
class Survivor:
    path: RelPath
    costs: tuple[float, ...]  # cost of the hop-1..H prefixes
    ends: frozenset[str]  # entities reached at hop H (never a topic)


@dataclass(frozen=True)
class OpenExpansion:
    topics: tuple[str, ...]
    taus: tuple[float, ...]  # the thresholds the run used
    sequences: tuple[Survivor, ...]  # length-H survivors, by (hop-H cost, sequence)
    cut: tuple[float, ...]  # per hop: cost of the first child a cap dropped, +inf if none
    round_trips: int

    @property
    def capped(self) -> bool:
        return any(c < math.inf for c in self.cut)

    def exact(self, taus: Sequence[float]) -> bool:
        """Whether `survivors(taus)` equals a direct run at taus (no cap can have mattered)."""
        return all(t < c or c == math.inf for t, c in zip(taus, self.cut, strict=True))

    def survivors(self, taus: Sequence[float]) -> list[Survivor]:
        """Survivors at tighter thresholds: every prefix cost <= taus[t]."""
        if len(taus) != len(self.taus) or any(a > b for a, b in zip(taus, self.taus, strict=True)):
            raise ValueError(f"taus {list(taus)} are not within the run's {list(self.taus)}")
        return [
            s for s in self.sequences if all(c <= t for c, t in zip(s.costs, taus, strict=True))
        ]


def expand_open(
    source: NeighbourSource,
    cost: CostFn,
    topics: Sequence[str],
    taus: Sequence[float],
    max_sequences: int = MAX_SEQUENCES,
    max_frontier: int = MAX_FRONTIER,
) -> OpenExpansion:
    """Open expansion for H = len(taus) hops, one neighbours() round trip per hop."""
    hops = len(taus)
    if hops < 1 or max_sequences < 1 or max_frontier < 1:
        raise ValueError("need at least one hop and positive caps")
    tops = list(dict.fromkeys(topics))
    topic_set = set(tops)
    trips0 = source.round_trips
    frontier = [root(tops)]
    costs_of: dict[RelPath, float] = {}  # kept sequence -> its cost
    cut = [math.inf] * hops
    for t in range(hops):
        ids = frontier_ids(frontier)
        children = expand(frontier, source.neighbours(ids), topic_set) if ids else []
        c = _costs(cost, [path for path, _, _ in children])
        passing = sorted(
            (i for i in range(len(children)) if c[i] <= taus[t]),
            key=lambda i: (c[i], children[i][0]),
        )
        kept, fetched = [], set()
        for i in passing:  # the longest prefix within both caps
            ends = children[i][1]
            new = sum(v not in fetched for v in ends) if t < hops - 1 else 0
            if len(kept) == max_sequences or len(fetched) + new > max_frontier:
                cut[t] = float(c[i])
                break
            kept.append(i)
            if t < hops - 1:
                fetched.update(ends)
        for i in kept:
            costs_of[children[i][0]] = float(c[i])
        frontier = [child_beam(frontier[children[i][2]], *children[i][:2]) for i in kept]
    survivors = tuple(
        Survivor(b.path, tuple(costs_of[b.path[:k]] for k in range(1, hops + 1)), frozenset(b.ends))
        for b in frontier
    )
    return OpenExpansion(
        tuple(tops),
        tuple(float(x) for x in taus),
        survivors,
        tuple(cut),
        source.round_trips - trips0,
    )


def _costs(cost: CostFn, paths: list[RelPath]) -> np.ndarray:
    if not paths:
        return np.zeros(0)
    v = np.asarray(cost(paths), dtype=float).reshape(-1)
    if v.shape[0] != len(paths):
        raise ValueError(f"cost function returned {v.shape[0]} costs for {len(paths)} paths")
    return np.where(np.isnan(v), np.inf, v)  # a NaN cost passes only an infinite threshold
