"""What search needs from a graph: one call, "neighbours of these entities".

Search (PUCT, TreeG) talks to the graph only through NeighbourSource, so it runs
unchanged against Neo4j (graph.neighbours.Neo4jNeighbours) or an in-memory graph.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import NamedTuple, Protocol


class Step(NamedTuple):
    """One hop: a relation and its direction (forward = head -> tail)."""

    relation: str
    forward: bool

    def key(self) -> str:
        return self.relation if self.forward else f"~{self.relation}"

    @classmethod
    def of_key(cls, key: str) -> Step:
        """The step whose `key()` this is."""
        return cls(key[1:], False) if key.startswith("~") else cls(key, True)


RelPath = tuple[Step, ...]  # a relation sequence; entity paths with equal RelPath score equal
Edge = tuple[Step, str]  # (step taken, neighbour id)


class NeighbourSource(Protocol):
    round_trips: int  # queries sent so far; benches and tests read it

    def neighbours(self, ids: Sequence[str]) -> dict[str, list[Edge]]:
        """Both-direction neighbours of every id in ONE round trip (ids missing -> no key)."""
        ...


class InMemoryGraph:
    """A NeighbourSource over a list of triples; for unit tests and small graphs."""

    def __init__(self, triples: Iterable[tuple[str, str, str]], fanout_cap: int | None = None):
        adj: dict[str, list[Edge]] = defaultdict(list)
        for head, rel, tail in triples:
            adj[head].append((Step(rel, True), tail))
            adj[tail].append((Step(rel, False), head))
        self._adj = dict(adj)
        self.fanout_cap = fanout_cap
        self.round_trips = 0

    def neighbours(self, ids: Sequence[str]) -> dict[str, list[Edge]]:
        self.round_trips += 1
        out = {}
        for i in ids:
            if i in self._adj:
                edges = sorted(self._adj[i])
                out[i] = edges[: self.fanout_cap] if self.fanout_cap else edges
        return out


class CachedNeighbours:
    """Per-question cache in front of a NeighbourSource: only unseen ids cost a round trip."""

    def __init__(self, source: NeighbourSource):
        self.source = source
        self._cache: dict[str, list[Edge]] = {}

    @property
    def round_trips(self) -> int:
        return self.source.round_trips

    def neighbours(self, ids: Sequence[str]) -> dict[str, list[Edge]]:
        missing = [i for i in dict.fromkeys(ids) if i not in self._cache]
        if missing:
            found = self.source.neighbours(missing)
            for i in missing:
                self._cache[i] = found.get(i, [])
        return {i: self._cache[i] for i in ids if self._cache.get(i)}
