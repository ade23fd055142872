"""The graph side of search: batched neighbour expansion and gold paths from Neo4j."""

from __future__ import annotations

from collections.abc import Sequence

from cpr_neo4j.graph.store import GraphStore
from cpr_neo4j.search.base import Edge, Step
from cpr_neo4j.search.frontier import Adjacency

# Per entity, relation type and direction; bounds hub nodes (genres, years, languages)
# without letting one big relation crowd out the others. On MetaQA it binds only on the
# genres Drama and Comedy (4,016 and 3,759 ~has_genre edges), each of a single type.
DEFAULT_FANOUT_CAP = 2000


class Neo4jNeighbours:
    """NeighbourSource over one dataset in Neo4j: ONE query per call, whatever the id count.

    question: None searches the whole graph (`--scope graph`); a question id searches only
    that question's own subgraph (`--scope subgraph`): entities and neighbours that are not
    its IN_SUBGRAPH members are invisible. The filter runs in Cypher in the same round trip
    (README, "Per-question subgraphs": faster than fetching the members and filtering here).
    """

    def __init__(
        self,
        store: GraphStore,
        dataset: str,
        fanout_cap: int = DEFAULT_FANOUT_CAP,
        question: str | None = None,
    ):
        self.store = store
        self.dataset = dataset
        self.fanout_cap = fanout_cap
        self.question = question
        self.round_trips = 0

    def adjacency(self, ids: Sequence[str], nodes: Sequence[int], names: bool) -> Adjacency:
        """Neighbours of entities given by id or by node id, in one query (TreeG's hop)."""
        if ids and nodes:
            raise ValueError("ask by id or by node id, not both at once")
        self.round_trips += 1
        name, key, values = (
            ("adjacency_by_id", "ids", list(dict.fromkeys(ids)))
            if ids
            else ("adjacency_by_node", "nodes", list(nodes))
        )
        params = {key: values, "dataset": self.dataset, "cap": self.fanout_cap, "names": names}
        if self.question is not None:
            name, params["question"] = f"{name}_subgraph", self.question
        rows = self.store.read(name, **params)
        if not rows:  # scoped: no such question, or none of the entities is a member
            return Adjacency.from_groups([], [], [])
        row = rows[0]
        return Adjacency.from_groups(row["nodes"], row["ids"], row["groups"])

    def name_nodes(self, nodes: Sequence[int]) -> dict[int, str]:
        """node id -> entity id of `nodes` (those still entities of the dataset), in one
        query: what a search that fetched its last hop without ids names afterwards."""
        if not len(nodes):
            return {}
        self.round_trips += 1
        row = self.store.read("entity_ids_by_node", nodes=list(nodes), dataset=self.dataset)[0]
        return dict(zip(row["nodes"], row["ids"], strict=True))

    def neighbours(self, ids: Sequence[str]) -> dict[str, list[Edge]]:
        """The dict form (PUCT, open expansion, caches): the same query, cap and edges."""
        if not ids:
            return {}
        adj = self.adjacency(ids, [], names=True)
        out: dict[str, list[Edge]] = {}
        for u, k, v in zip(adj.src.tolist(), adj.step.tolist(), adj.dst.tolist(), strict=True):
            out.setdefault(adj.frontier[u], []).append((adj.steps[k], adj.names[v]))
        # Sorted so search is deterministic whatever order the store returns.
        return {u: sorted(edges) for u, edges in out.items()}


def graph_nodes(store: GraphStore, dataset: str, limit: int) -> list[int] | None:
    """Node ids of every entity of `dataset`, or None when it has more than `limit`."""
    rows = store.read("entity_nodes", dataset=dataset, limit=limit)
    return rows[0]["nodes"] if rows else None


def gold_paths(
    store: GraphStore,
    dataset: str,
    topics: Sequence[str],
    answers: Sequence[str],
    max_hops: int,
    max_paths: int = 8,
    question: str | None = None,
) -> list[tuple[str, list[Edge]]]:
    """Shortest topic -> gold answer paths of at most max_hops, as (start, [(step, entity)]);
    with `question`, only paths inside that question's own subgraph (`--scope subgraph`)."""
    pairs = [{"topic": t, "answer": a} for t in topics for a in answers if a != t]
    if not pairs:
        return []
    params = {"pairs": pairs, "dataset": dataset, "max_paths": max_paths}
    if question is None:
        records = store.read("gold_paths", **params)
    else:
        records = store.read("gold_paths_subgraph", question=question, **params)
    out = []
    for r in records:
        if len(r["steps"]) <= max_hops:
            out.append((r["topic"], [(Step(t, f), n) for t, f, n in r["steps"]]))
    return out
