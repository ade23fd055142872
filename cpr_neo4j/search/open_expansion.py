"""Open hop-by-hop expansion: the UaG-style hop-level baseline's retrieval.

Each hop's conformal set decides the next hop's frontier. At hop t every child of a kept
sequence whose cost is <= taus[t-1] is kept (no top-A), and only kept sequences expand at
hop t+1. Like TreeG it works on DISTINCT relation sequences, each with the entities it
reaches (search/frontier.py: the same simple-path rule), with ONE `source.neighbours()`
call per hop for the union of the frontier entities. The result is every sequence kept at
EVERY hop 1..H (so answers nearer than H hops are not lost, as in TreeG's candidate set),
with its prefix costs and end entities; the answer set at given thresholds is the union of
the ends of the survivors (evaluation/hoplevel_thresholds.py). With `topic_answers` (the dataset's
convention) a step may land on a topic, closing a cycle: that end is never expanded, so a
topic is among a survivor's ends only when its LAST step landed there.

One run serves many thresholds. The entities a sequence reaches depend on the sequence
alone, so without caps the survivors at any taus' <= taus (componentwise) are exactly the
survivors at taus whose every hop-t prefix cost is <= taus'[t] (`survivors`).

Safety caps (`Caps`; evaluation.hoplevel sizes them to the graph), never silent: per
hop the passing children are ranked by (cost, sequence) and the longest prefix of that
ranking within `caps.sequences` sequences (and, for hops whose ends are fetched next,
`caps.frontier` entities in the union of their ends) is kept; `cut[t]` is the cost of the
first child dropped (+inf when no cap bound) and `bound[t]` names the cap that bound.
Filtering to taus' equals a direct run at taus' when taus'[t] < cut[t] at every hop
(`exact`): by induction over hops, every child a direct run would consider then costs less
than the cut, so it lies in the kept prefix, and the direct run's kept set, a subset of
that prefix, fits within both caps.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from cpr_neo4j.search.base import NeighbourSource, RelPath
from cpr_neo4j.search.frontier import child_beam, expand, frontier_ids, root

CostFn = Callable[[list[RelPath]], np.ndarray]  # cost per relation sequence (lower = better)


@dataclass(frozen=True)
class Caps:
    """Per hop: sequences kept, and entities fetched for the next hop's round trip."""

    sequences: int
    frontier: int

    def __post_init__(self):
        if self.sequences < 1 or self.frontier < 1:
            raise ValueError("caps must be positive")


UNCAPPED = Caps(sequences=2**62, frontier=2**62)


@dataclass(frozen=True)
class Survivor:
    path: RelPath
    costs: tuple[float, ...]  # cost of each prefix, one per hop of the path
    ends: frozenset[str]  # entities it reaches (a topic only with topic_answers)


@dataclass(frozen=True)
class OpenExpansion:
    topics: tuple[str, ...]
    taus: tuple[float, ...]  # the thresholds the run used
    sequences: tuple[Survivor, ...]  # the length-H survivors, by (cost, sequence)
    cut: tuple[float, ...]  # per hop: cost of the first child a cap dropped, +inf if none
    round_trips: int
    bound: tuple[str | None, ...] = ()  # per hop: the cap that bound ("sequences"/"frontier")
    nearer: tuple[Survivor, ...] = ()  # survivors of hops 1..H-1, by (hop, cost, sequence)

    @property
    def every(self) -> tuple[Survivor, ...]:
        """The survivors of every hop 1..H: the sequences whose ends make the answer set."""
        return self.nearer + self.sequences

    @property
    def capped(self) -> bool:
        return any(c < math.inf for c in self.cut)

    def exact(self, taus: Sequence[float]) -> bool:
        """Whether `survivors(taus)` equals a direct run at taus (no cap can have mattered)."""
        return all(t < c or c == math.inf for t, c in zip(taus, self.cut, strict=True))

    def survivors(self, taus: Sequence[float]) -> list[Survivor]:
        """Survivors of every hop at tighter thresholds: every prefix cost <= taus[t]."""
        if len(taus) != len(self.taus) or any(a > b for a, b in zip(taus, self.taus, strict=True)):
            raise ValueError(f"taus {list(taus)} are not within the run's {list(self.taus)}")
        # a survivor of hop k < H has k costs: taus past its length do not apply to it
        return [
            s
            for s in self.every
            if all(c <= t for c, t in zip(s.costs, taus[: len(s.costs)], strict=True))
        ]


def expand_open(
    source: NeighbourSource,
    cost: CostFn,
    topics: Sequence[str],
    taus: Sequence[float],
    caps: Caps = UNCAPPED,
    topic_answers: bool = False,
) -> OpenExpansion:
    """Open expansion for H = len(taus) hops, one neighbours() round trip per hop.
    topic_answers: a path's last step may land on a topic (search/frontier.py)."""
    hops = len(taus)
    if hops < 1:
        raise ValueError("need at least one hop")
    tops = list(dict.fromkeys(topics))
    topic_set = set(tops)
    trips0 = source.round_trips
    frontier = [root(tops)]
    costs_of: dict[RelPath, float] = {}  # kept sequence -> its cost
    cut: list[float] = [math.inf] * hops
    bound: list[str | None] = [None] * hops
    kept_at: list[list] = []  # per hop: the kept beams
    for t in range(hops):
        ids = frontier_ids(frontier, topic_set, topic_answers)
        nbrs = source.neighbours(ids) if ids else {}
        children = expand(frontier, nbrs, topic_set, topic_answers) if ids else []
        c = _costs(cost, [path for path, _, _ in children])
        passing = sorted(
            (i for i in range(len(children)) if c[i] <= taus[t]),
            key=lambda i: (c[i], children[i][0]),
        )
        kept, fetched = [], set()
        for i in passing:  # the longest prefix within both caps
            ends = children[i][1]
            # a topic end is never fetched again (topic answers: it ends its path)
            new = sum(v not in fetched and v not in topic_set for v in ends) if t < hops - 1 else 0
            if len(kept) == caps.sequences or len(fetched) + new > caps.frontier:
                cut[t] = float(c[i])
                bound[t] = "sequences" if len(kept) == caps.sequences else "frontier"
                break
            kept.append(i)
            if t < hops - 1:
                fetched.update(v for v in ends if v not in topic_set)
        for i in kept:
            costs_of[children[i][0]] = float(c[i])
        frontier = [child_beam(frontier[children[i][2]], *children[i][:2]) for i in kept]
        kept_at.append(frontier)
    survivors = [
        tuple(
            Survivor(
                b.path,
                tuple(costs_of[b.path[:k]] for k in range(1, len(b.path) + 1)),
                frozenset(b.ends),
            )
            for b in beams
        )
        for beams in kept_at
    ]
    return OpenExpansion(
        topics=tuple(tops),
        taus=tuple(float(x) for x in taus),
        sequences=survivors[-1],
        cut=tuple(cut),
        round_trips=source.round_trips - trips0,
        bound=tuple(bound),
        nearer=tuple(s for hop in survivors[:-1] for s in hop),
    )


def _costs(cost: CostFn, paths: list[RelPath]) -> np.ndarray:
    if not paths:
        return np.zeros(0)
    v = np.asarray(cost(paths), dtype=float).reshape(-1)
    if v.shape[0] != len(paths):
        raise ValueError(f"cost function returned {v.shape[0]} costs for {len(paths)} paths")
    return np.where(np.isnan(v), np.inf, v)  # a NaN cost passes only an infinite threshold
