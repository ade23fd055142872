"""TreeG as it was before the columnar rewrite, frozen as a baseline (do not "fix" it):
tests/test_treeg_speed.py checks that today's TreeG returns the same candidates, and
bench/ask.py times today's against it.

The old neighbour source gives one row per edge (cypher/neighbours.cypher) and the search
keeps Python sets of entity ids.
"""

from __future__ import annotations

from collections.abc import Sequence

from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.search.base import Edge, RelPath, Step
from cpr_neo4j.search.beam import costs as path_costs
from cpr_neo4j.search.treeg import Candidate, Retrieval


class NeighboursV1:
    """The old neighbour source: one row per edge, first `cap` edges per entity."""

    def __init__(self, store: GraphStore, dataset: str, fanout_cap: int = 2000):
        self.store, self.dataset, self.fanout_cap, self.round_trips = store, dataset, fanout_cap, 0

    def neighbours(self, ids: Sequence[str]) -> dict[str, list[Edge]]:
        if not ids:
            return {}
        self.round_trips += 1
        records = self.store.read(
            "neighbours", ids=list(dict.fromkeys(ids)), dataset=self.dataset, cap=self.fanout_cap
        )
        return {r["id"]: sorted((Step(t, f), n) for t, f, n in r["edges"]) for r in records}


def _expand_v1(frontier: list, nbrs: dict[str, list[Edge]], topics: set[str]) -> list:
    out = []
    for p, (path, ends, chains) in enumerate(frontier):
        grouped: dict[Step, dict[str, str]] = {}
        for u in sorted(ends):
            banned = chains[u]
            for step, v in nbrs.get(u, ()):
                if v in topics or v == u or v in banned:
                    continue
                grouped.setdefault(step, {}).setdefault(v, u)
        for step in sorted(grouped):
            reached = grouped[step]
            out.append((path + (step,), {v: reached[v] for v in sorted(reached)}, p))
    return out


def retrieve_v1(
    source, scorer, ctx, topics: list[str], hops: int, beam_width: int = 32, active: int = 32
) -> Retrieval:
    topics = list(dict.fromkeys(topics))
    trips0 = source.round_trips
    frontier: list = [((), dict.fromkeys(topics), {t: () for t in topics})]
    per_hop: list[list[Candidate]] = []
    for _ in range(hops):
        ids = sorted(set().union(*(ends for _, ends, _ in frontier)))
        children = _expand_v1(frontier, source.neighbours(ids) if ids else {}, set(topics))
        if not children:
            per_hop.append([])
            frontier = []
            continue
        paths: list[RelPath] = [c[0] for c in children]
        costs = path_costs(scorer, ctx, paths, None, 0.0)
        by_parent: dict[int, list[int]] = {}
        for i, c in enumerate(children):
            by_parent.setdefault(c[2], []).append(i)
        kept = [
            i
            for idx in by_parent.values()
            for i in sorted(idx, key=lambda j: (costs[j], paths[j]))[:beam_width]
        ]
        kept = sorted(kept, key=lambda j: (costs[j], paths[j]))[:active]
        per_hop.append([Candidate(paths[i], float(costs[i]), children[i][1]) for i in kept])
        nxt = []
        for i in kept:
            path, ends, parent = children[i]
            pchains = frontier[parent][2]
            chains = {v: pchains[u] + (u,) for v, u in ends.items() if u is not None}
            nxt.append((path, ends, chains))
        frontier = nxt
    return Retrieval(topics, per_hop, source.round_trips - trips0)
