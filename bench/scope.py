"""`--scope subgraph`: where to apply a question's membership filter, measured.

    python bench/scope.py [--dataset epr-scope] [--hops 2] [--repeats 3]

A: the filter in Cypher, in the hop's one round trip (cypher/adjacency_*_subgraph.cypher,
what graph/neighbours.py does). B: the question's member node ids fetched once
(cypher/subgraph_members.cypher, one more round trip per question), the hop's neighbours
fetched over the whole graph and filtered in numpy. Both walk the same hops (TreeG-like:
every neighbour of the frontier, H hops, cold per question) and must return the same edges.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence

import numpy as np

from cpr_neo4j.graph import records
from cpr_neo4j.graph.neighbours import Neo4jNeighbours
from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.search.frontier import Adjacency


class MembersInNumpy(Neo4jNeighbours):
    """Variant B: whole-graph adjacency, then keep member sources and member neighbours."""

    def __init__(self, store: GraphStore, dataset: str, question: str):
        super().__init__(store, dataset)
        self.round_trips += 1
        rows = store.read("subgraph_members", dataset=dataset, question=question)
        self.members = np.asarray(rows[0]["nodes"] if rows else [], dtype=np.int64)
        self.member_set = set(self.members.tolist())

    def adjacency(self, ids: Sequence[str], nodes: Sequence[int], names: bool) -> Adjacency:
        adj = super().adjacency(ids, nodes, names)
        keep = np.isin(adj.src, self.members) & np.isin(adj.dst, self.members)
        frontier = {n: i for n, i in adj.frontier.items() if n in self.member_set}
        names_ = {n: i for n, i in adj.names.items() if n in frontier or n in adj.dst[keep]}
        return Adjacency(frontier, adj.steps, adj.src[keep], adj.step[keep], adj.dst[keep], names_)


def walk(source: Neo4jNeighbours, topics: list[str], hops: int) -> tuple[int, set]:
    edges: set = set()
    adj = source.adjacency(topics, [], hops == 1)
    for t in range(hops):
        cols = zip(adj.src.tolist(), adj.step.tolist(), adj.dst.tolist(), strict=True)
        edges |= {(s, adj.steps[k], d) for s, k, d in cols}
        if t + 1 < hops and len(adj.dst):
            adj = source.adjacency([], np.unique(adj.dst).tolist(), t + 2 == hops)
    return source.round_trips, edges


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--dataset", default="epr-scope")
    ap.add_argument("--hops", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    with GraphStore() as store:
        qs = [q for q in records.questions(store, a.dataset) if q.topics]
        times: dict[str, list[float]] = {"A cypher": [], "B numpy": []}
        trips: dict[str, int] = {"A cypher": 0, "B numpy": 0}
        for rep in range(a.repeats + 1):  # the first round warms plans and caches
            for q in qs:
                out = {}
                for name in ("A cypher", "B numpy"):
                    t0 = time.perf_counter()
                    src = (
                        Neo4jNeighbours(store, a.dataset, question=q.id)
                        if name == "A cypher"
                        else MembersInNumpy(store, a.dataset, q.id)
                    )
                    n, out[name] = walk(src, q.topics, a.hops)
                    if rep:
                        times[name].append((time.perf_counter() - t0) * 1000)
                        trips[name] += n
                assert out["A cypher"] == out["B numpy"], q.id
        n = len(qs) * a.repeats
        for name, ms in times.items():
            print(
                f"{name}: {len(qs)} questions x {a.repeats}, {a.hops} hops: per question "
                f"mean {statistics.mean(ms):.1f} ms, p50 {statistics.median(ms):.1f} ms, "
                f"p95 {np.percentile(ms, 95):.1f} ms, {trips[name] / n:.2f} round trips"
            )


if __name__ == "__main__":
    main()
