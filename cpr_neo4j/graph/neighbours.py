"""The graph side of search: batched neighbour expansion and gold paths from Neo4j."""

from __future__ import annotations

from collections.abc import Sequence

from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.search.base import Edge, Step

DEFAULT_FANOUT_CAP = 2000  # per entity and hop; bounds hub nodes (genres, years, languages)


class Neo4jNeighbours:
    """NeighbourSource over one dataset in Neo4j: ONE query per call, whatever the id count."""

    def __init__(self, store: GraphStore, dataset: str, fanout_cap: int = DEFAULT_FANOUT_CAP):
        self.store = store
        self.dataset = dataset
        self.fanout_cap = fanout_cap
        self.round_trips = 0

    def neighbours(self, ids: Sequence[str]) -> dict[str, list[Edge]]:
        if not ids:
            return {}
        self.round_trips += 1
        records = self.store.read(
            "neighbours", ids=list(dict.fromkeys(ids)), dataset=self.dataset, cap=self.fanout_cap
        )
        # Sorted so search is deterministic whatever order the store returns.
        return {r["id"]: sorted((Step(t, f), n) for t, f, n in r["edges"]) for r in records}


def gold_paths(
    store: GraphStore,
    dataset: str,
    topics: Sequence[str],
    answers: Sequence[str],
    max_hops: int,
    max_paths: int = 8,
) -> list[tuple[str, list[Edge]]]:
    """Shortest topic -> gold answer paths of at most max_hops, as (start, [(step, entity)])."""
    pairs = [{"topic": t, "answer": a} for t in topics for a in answers if a != t]
    if not pairs:
        return []
    records = store.read("gold_paths", pairs=pairs, dataset=dataset, max_paths=max_paths)
    out = []
    for r in records:
        if len(r["steps"]) <= max_hops:
            out.append((r["topic"], [(Step(t, f), n) for t, f, n in r["steps"]]))
    return out
