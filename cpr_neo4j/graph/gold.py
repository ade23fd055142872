"""Gold relation sequences for hop-level calibration, found the way search walks the graph.

A gold sequence is a relation sequence of length 1..`hops` whose ends, computed exactly as
TreeG and open expansion compute them (search/frontier.py `expand`: the same
NeighbourSource, so the same neighbour fan-out cap, and the same simple-path and
topic-answer rules), contain a gold answer. So a sequence found here is one open expansion
reaches whenever it keeps every prefix, and a gold answer TreeG can reach within H hops
lies at the end of some sequence found here (TreeG keeps a subset of the same sequences).
There is no separate Cypher query with other limits: the one before this (fixed length H,
uncapped, its own row limit) found no sequence for questions answered in fewer hops and
found paths through hubs that the capped neighbour lists never show.

Pruning, exact. The search is breadth-first over all sequences, but at hop t it keeps only
the entities that can still reach a gold answer in the H - t hops left: `balls[d]` holds
every entity whose neighbour list can lead to a gold answer within d steps. An edge u -> v
in u's capped list is a real edge, so it is also in v's list unless v's list was cut by
the cap; hence balls[d] = balls[d-1] plus the neighbours of balls[d-1], as long as no list
used was possibly cut (an entity with >= cap edges: Neo4j caps each step group,
InMemoryGraph the whole list; a source whose cap is unknown counts as cut). A cut list,
or a ball over BALL_LIMIT entities, ends the pruning for that depth and beyond (balls[d] =
None: keep everything). Restricting hop t's ends to balls[H - t] changes nothing for the
ends kept: every predecessor that could reach such an end lies in balls[H - t + 1], so
ends, predecessors and witness chains are those of the unpruned search (by induction over
hops). At the last hop only edges into a gold answer are expanded.

Safety caps (search/open_expansion.py `Caps`), never silent: a hop keeps at most
`sequences` sequences and fetches at most `frontier` entities for the next hop; past them
whole sequences are dropped (the cheapest by bottleneck cost kept when a cost function is
given, else the first by sequence). A dropped sequence only hides gold, which can only
raise a calibration score (a valid, more conservative score); binds are counted in
`GoldSearch.bound`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from cpr_neo4j.search.base import Edge, NeighbourSource, RelPath
from cpr_neo4j.search.frontier import Beam, child_beam, expand, frontier_ids, root
from cpr_neo4j.search.open_expansion import UNCAPPED, Caps, CostFn

BALL_LIMIT = 200_000  # entities in one pruning ball; past it that depth is not pruned


@dataclass
class GoldSearch:
    sequences: list[tuple[RelPath, frozenset[str]]]  # (sequence, gold it reaches), by sequence
    bound: dict[str, int] = field(default_factory=lambda: {"sequences": 0, "frontier": 0})
    fanout_cut: bool = False  # a list it walked may have been cut by the fan-out cap

    @property
    def capped(self) -> bool:
        return any(self.bound.values())


def fanout_cap_of(source: object) -> tuple[bool, int | None]:
    """(known, cap) of a source or of the source it wraps (`.source`, as the caches do);
    cap None: complete neighbour lists. Unknown makes the pruning balls unusable."""
    seen = 0
    while source is not None and seen < 8:
        if hasattr(source, "fanout_cap"):
            return True, source.fanout_cap
        source, seen = getattr(source, "source", None), seen + 1
    return False, None


class CutWatch:
    """A source passed through as is, noting whether any list it returned may have been cut
    by the fan-out cap (so the search, like TreeG, did not see every neighbour there)."""

    def __init__(self, source: NeighbourSource):
        self.source = source  # `.source`: fanout_cap_of sees through the watch
        self.known, self.cap = fanout_cap_of(source)
        self.cut = False

    @property
    def round_trips(self) -> int:
        return self.source.round_trips

    def neighbours(self, ids: Sequence[str]) -> dict[str, list[Edge]]:
        out = self.source.neighbours(ids)
        if not self.cut and self.cap is not None:
            self.cut = any(_maybe_cut(e, self.cap) for e in out.values())
        return out


def gold_sequences(
    source: NeighbourSource,
    topics: Sequence[str],
    answers: Sequence[str],
    hops: int,
    topic_answers: bool = False,
    caps: Caps = UNCAPPED,
    cost: CostFn | None = None,
) -> GoldSearch:
    """Every gold sequence of length 1..hops (see the module docstring), by sequence."""
    if hops < 1:
        raise ValueError(f"gold sequences need hops >= 1, got {hops}")
    tops = list(dict.fromkeys(topics))
    topic_set = set(tops)
    gold = set(answers) if topic_answers else set(answers) - topic_set
    out = GoldSearch([])
    if not tops or not gold:
        return out
    known, cap = fanout_cap_of(source)
    balls = _balls(source, gold, hops - 1, (known, cap))
    frontier: list[Beam] = [root(tops)]
    found: dict[RelPath, frozenset[str]] = {}
    for t in range(hops):
        ids = frontier_ids(frontier, topic_set, topic_answers)
        if not ids:
            break
        nbrs = source.neighbours(ids)
        if cap is not None and not out.fanout_cut:
            out.fanout_cut = any(_maybe_cut(e, cap) for e in nbrs.values())
        keep = balls[hops - 1 - t]  # ends at hop t + 1 must reach gold in hops - t - 1 steps
        if keep is not None:
            nbrs = {u: [(s, v) for s, v in e if v in keep] for u, e in nbrs.items()}
        children = expand(frontier, nbrs, topic_set, topic_answers)
        children = _within_caps(children, caps, cost, topic_set, out.bound, t == hops - 1)
        for path, ends, _ in children:
            hit = gold.intersection(ends)
            if hit:
                found[path] = frozenset(hit)
        frontier = [child_beam(frontier[p], path, ends) for path, ends, p in children]
    out.sequences = sorted(found.items())
    return out


def _balls(
    source: NeighbourSource, gold: set[str], depth: int, cap: tuple[bool, int | None]
) -> list[set[str] | None]:
    """balls[0..depth]: entities within d steps of gold as capped lists can walk (superset)."""
    known, limit = cap
    balls: list[set[str] | None] = [set(gold)]
    layer = set(gold)
    for _ in range(depth):
        last = balls[-1]
        if last is None or not known or len(last) > BALL_LIMIT:
            balls.append(None)
            continue
        nbrs = source.neighbours(sorted(layer)) if layer else {}
        if limit is not None and any(_maybe_cut(e, limit) for e in nbrs.values()):
            balls.append(None)
            continue
        layer = {v for e in nbrs.values() for _, v in e} - last
        balls.append(last | layer)
    return balls


def _maybe_cut(edges: list[Edge], cap: int) -> bool:
    """Whether a neighbour list may have lost edges to a fan-out cap. Neo4j caps each step
    group, InMemoryGraph the whole list; either way a list under `cap` edges is complete."""
    return len(edges) >= cap


def _within_caps(
    children: list, caps: Caps, cost: CostFn | None, topics: set[str], bound: dict, last: bool
) -> list:
    """The children kept under the caps: all of them when they fit, else the longest prefix
    (by bottleneck cost when given, else by sequence) within both; a bound cap counts once."""
    ends = (v for c in children for v in c[1] if v not in topics) if not last else ()
    if len(children) <= caps.sequences and len(set(ends)) <= caps.frontier:
        return children
    order = list(range(len(children)))
    if cost is not None:
        worst = _bottleneck(cost, [p for p, _, _ in children])
        order.sort(key=lambda i: (worst[i], children[i][0]))
    kept: list = []
    seen: set[str] = set()
    for i in order:
        new = 0 if last else sum(v not in seen and v not in topics for v in children[i][1])
        if len(kept) == caps.sequences or len(seen) + new > caps.frontier:
            bound["sequences" if len(kept) == caps.sequences else "frontier"] += 1
            break
        kept.append(children[i])
        if not last:
            seen.update(v for v in children[i][1] if v not in topics)
    return kept


def _bottleneck(cost: CostFn, paths: list[RelPath]) -> np.ndarray:
    """The largest prefix cost of each path (the canonical choice's key; NaN counts +inf)."""
    prefixes = sorted({p[:k] for p in paths for k in range(1, len(p) + 1)})
    c = np.asarray(cost(prefixes), dtype=float).reshape(-1)
    of = dict(zip(prefixes, np.where(np.isnan(c), math.inf, c).tolist(), strict=True))
    return np.array([max(of[p[:k]] for k in range(1, len(p) + 1)) for p in paths])
