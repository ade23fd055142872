"""TreeG: hop-by-hop beam retrieval of reasoning paths over a NeighbourSource.

The score of a path depends only on its relation sequence, so entity paths that share a
sequence tie. An entity-level beam is flooded by such ties (one hub relation fills all A
slots; MetaQA 3-hop recall fell to 29%). The beam here therefore holds DISTINCT relation
sequences; each carries the set of entities it reaches, with one predecessor per entity
so a witness entity path can be rebuilt.

Per hop t = 1..H:
  1. ONE round trip for the union of all frontier entities (`source.adjacency` when the
     source has it, else `source.neighbours`);
  2. every active sequence s and every step r available from its frontier gives a child
     s + r reaching the union of its neighbours through r (simple-path rule below);
  3. children are scored in one batch: V' = V - hint_beta * bonus;
  4. per parent keep its top-B children by V', then rank all kept children globally by
     V' and keep the top A. Ties break on the relation sequence itself (deterministic).

Simple-path rule (search/frontier.py, shared with open expansion): a step u -> v is taken
only if v is not a topic entity and not on u's recorded witness chain (topic, ...,
predecessor of u, u). Because one predecessor is kept per (sequence, entity), the chain
checked is that witness chain; an entity reachable only through another, unrecorded chain
of the same sequence may be missed (rare; it needs a cycle inside one relation sequence).
The predecessor kept is the smallest entity id.

Speed (search/frontier.py `expand_nodes`): entities are integers (Neo4j node ids) and one
hop's expansion is a few numpy passes over columns for all sequences at once, instead of
Python sets of id strings; a hop fetches its frontier by node id, and neighbours' ids come
back only at the last hop (an earlier hop's are named by the next hop's round trip). The
result equals the string-set version's (tests/test_treeg_speed.py).

Batches (`retrieve_many`): a question's search is a generator that yields each hop's request
and is sent the Adjacency, so many questions advance in lockstep with ONE round trip per
hop for the union of their frontiers. A question reads only its own rows of the union: its
topics at hop 0, and edges from its own beam ends after (expand_nodes), so its result is
the one `retrieve` gives alone.

Candidate set P_q: the sequences retained at EVERY hop 1..H, so answers nearer than H
hops are not lost. Calibration and test must use the same rule (they call this function).
"""

from __future__ import annotations

import math
from collections import ChainMap
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Protocol

import numpy as np

from cpr_neo4j.search.base import Edge, NeighbourSource, RelPath
from cpr_neo4j.search.frontier import (
    Adjacency,
    DictAdjacency,
    NodeBeam,
    expand_nodes,
    node_root,
)

QueryContext = Any  # opaque per-question object made by Scorer.question
HintBonus = Callable[[list[RelPath]], np.ndarray]


class Scorer(Protocol):
    model_id: str

    def question(self, masked_text: str) -> QueryContext: ...

    def score(self, ctx: QueryContext, paths: Sequence[RelPath]) -> np.ndarray:
        """Costs V (lower = more plausible), one per path."""
        ...

    def similarity(self, texts_a: list[str], texts_b: list[str]) -> np.ndarray:
        """Cosine matrix of shape (len(texts_a), len(texts_b))."""
        ...


class Ends(Mapping[str, "str | None"]):
    """A candidate's end entity -> predecessor, kept as node columns and named on first use:
    most of a retrieval's candidates are never read entity by entity (answer costs and
    witnesses use the columns), and naming them all was a fifth of a 3-hop retrieval."""

    __slots__ = ("nodes", "preds", "names", "_named")

    def __init__(self, nodes: np.ndarray, preds: np.ndarray, names: Mapping[int, str]):
        self.nodes, self.preds, self.names = nodes, preds, names
        self._named: dict[str, str | None] | None = None

    def _dict(self) -> dict[str, str | None]:
        if self._named is None:
            names = self.names
            try:  # in id order, as the string-set version built them
                pairs = sorted(
                    (names[v], names[p])
                    for v, p in zip(self.nodes.tolist(), self.preds.tolist(), strict=True)
                )
            except KeyError as exc:  # a node vanished between two hops' round trips
                raise RuntimeError(f"the graph changed during retrieval (node {exc})") from exc
            self._named = dict(pairs)
        return self._named

    def __getitem__(self, entity: str) -> str | None:
        return self._dict()[entity]

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict())

    def __len__(self) -> int:
        return len(self.nodes)

    def pred_node(self, node: int) -> int:
        return int(self.preds[np.flatnonzero(self.nodes == node)[0]])


@dataclass(frozen=True)
class Candidate:
    path: RelPath
    cost: float  # V' = V - hint_beta * bonus; the number calibration and answer sets use
    ends: Mapping[str, str | None]  # end entity -> its predecessor (None only at hop 0)


@dataclass
class Retrieval:
    topics: list[str]
    per_hop: list[list[Candidate]]  # per_hop[t - 1]: sequences retained at hop t, best first
    round_trips: int
    _index: dict[RelPath, Candidate] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    _node_of: dict[str, int] = field(default_factory=dict, init=False, repr=False, compare=False)

    def candidates(self) -> list[Candidate]:
        return [c for hop in self.per_hop for c in hop]

    def answer_costs(self) -> dict[str, float]:
        """Entity -> min cost over candidates ending there (topics never appear)."""
        cands = self.candidates()
        if cands and all(isinstance(c.ends, Ends) for c in cands):
            return self._answer_costs_by_node(cands)
        best: dict[str, float] = {}
        topics = set(self.topics)
        for c in cands:
            for e in c.ends:
                if e not in topics and c.cost < best.get(e, math.inf):
                    best[e] = c.cost
        return best

    def _answer_costs_by_node(self, cands: list[Candidate]) -> dict[str, float]:
        """answer_costs over node columns; keeps the end nodes' names for `witness`."""
        nodes, costs = _best_by_node(cands)
        names = cands[0].ends.names  # type: ignore[attr-defined]
        topics = set(self.topics)
        best: dict[str, float] = {}
        for n, c in zip(nodes.tolist(), costs.tolist(), strict=True):
            name = names[n]
            self._node_of[name] = n
            if name not in topics:
                best[name] = c
        return best

    def answer_columns(self) -> tuple[list[str], np.ndarray]:
        """answer_costs as (entity ids, costs) columns, for callers that only need numbers
        (`cpr eval`: a 3-hop question has thousands of answers; a dict costs more)."""
        cands = self.candidates()
        if not (cands and all(isinstance(c.ends, Ends) for c in cands)):
            best = self.answer_costs()
            return list(best), np.fromiter(best.values(), float, len(best))
        nodes, costs = _best_by_node(cands)
        ids = _name_all(cands[0].ends.names, nodes.tolist())  # type: ignore[attr-defined]
        topics = set(self.topics)
        keep = ~np.fromiter(map(topics.__contains__, ids), bool, len(ids))
        if keep.all():
            return ids, costs
        return [i for i, k in zip(ids, keep.tolist(), strict=True) if k], costs[keep]

    def ranked_answers(self) -> list[tuple[str, float]]:
        """(entity, cost) by cost, ties by entity id; the first is the Hits@1 answer."""
        return sorted(self.answer_costs().items(), key=lambda kv: (kv[1], kv[0]))

    def prefix_costs(self) -> list[dict[RelPath, float]]:
        """Per hop, cost of each retained sequence (what hop-level calibration thresholds)."""
        return [{c.path: c.cost for c in hop} for hop in self.per_hop]

    def witness(self, entity: str) -> tuple[RelPath, list[str], float]:
        """Best candidate reaching `entity`: (relation path, entity ids e0..eL, cost)."""
        cands = self.candidates()
        node = self._node_of.get(entity) if cands and isinstance(cands[0].ends, Ends) else None
        if node is not None:
            reaching = [c for c in cands if (c.ends.nodes == node).any()]  # type: ignore[attr-defined]
        else:
            reaching = [c for c in cands if entity in c.ends]
        if not reaching:
            raise KeyError(f"entity {entity!r} is not reached by any candidate path")
        best = min(reaching, key=lambda c: (c.cost, len(c.path), c.path))
        return best.path, self.chain(best, entity), best.cost

    def chain(self, candidate: Candidate, entity: str) -> list[str]:
        """Entity ids e0..eL of `candidate`'s recorded path to `entity` (one of its ends)."""
        if not self._index:
            self._index.update((c.path, c) for c in self.candidates())
        node = self._node_of.get(entity)
        if node is not None and isinstance(candidate.ends, Ends):
            nodes = [node]
            for t in range(len(candidate.path), 0, -1):
                nodes.append(self._index[candidate.path[:t]].ends.pred_node(nodes[-1]))  # type: ignore[attr-defined]
            return [candidate.ends.names[n] for n in reversed(nodes)]
        chain = [entity]
        for t in range(len(candidate.path), 0, -1):  # walk predecessors back to the topic
            pred = self._index[candidate.path[:t]].ends[chain[-1]]
            assert pred is not None  # only hop-0 entities (topics) lack a predecessor
            chain.append(pred)
        return chain[::-1]


def _name_all(names: Mapping[int, str], nodes: list[int]) -> list[str]:
    """names[n] for every node, map by map at C speed (a ChainMap looks up in Python; with
    a shared cache its first map names them all)."""
    maps = names.maps if isinstance(names, ChainMap) else [names]
    out = list(map(maps[0].get, nodes))
    for m in maps[1:]:
        if None not in out:
            break
        out = [o if o is not None else m.get(n) for o, n in zip(out, nodes, strict=True)]
    if None in out:  # a node vanished between two hops' round trips
        raise RuntimeError(f"the graph changed during retrieval (node {nodes[out.index(None)]})")
    return out  # type: ignore[return-value]


def _best_by_node(cands: list[Candidate]) -> tuple[np.ndarray, np.ndarray]:
    """(end node, min cost over the candidates ending there), by node id."""
    ends = [c.ends for c in cands]
    nodes = np.concatenate([e.nodes for e in ends])  # type: ignore[attr-defined]
    costs = np.repeat([c.cost for c in cands], [len(e) for e in ends])
    order = np.lexsort((costs, nodes))
    nodes, costs = nodes[order], costs[order]
    first = np.ones(len(nodes), dtype=bool)
    first[1:] = nodes[1:] != nodes[:-1]
    return nodes[first], costs[first]


class AdjacencySource(Protocol):
    """A NeighbourSource that also answers in columns (graph.neighbours.Neo4jNeighbours)."""

    round_trips: int

    def adjacency(self, ids: Sequence[str], nodes: Sequence[int], names: bool) -> Adjacency: ...


def retrieve(
    source: NeighbourSource,
    scorer: Scorer,
    ctx: QueryContext,
    topics: list[str],
    hops: int,
    beam_width: int = 32,
    active: int = 32,
    hint_bonus: HintBonus | None = None,
    hint_beta: float = 0.0,
) -> Retrieval:
    """TreeG over relation sequences: exactly one round trip per hop (fewer only when a hop
    leaves nothing to expand)."""
    adjacency = getattr(source, "adjacency", None) or DictAdjacency(source.neighbours).adjacency
    return _retrieve(
        adjacency, source, scorer, ctx, topics, hops, beam_width, active, hint_bonus, hint_beta
    )


def retrieve_naive(
    source: NeighbourSource,
    scorer: Scorer,
    ctx: QueryContext,
    topics: list[str],
    hops: int,
    beam_width: int = 32,
    active: int = 32,
    hint_bonus: HintBonus | None = None,
    hint_beta: float = 0.0,
) -> Retrieval:
    """Same result as `retrieve`, one round trip per frontier entity (the benchmark's foil)."""

    def one_by_one(ids: Sequence[str]) -> dict[str, list[Edge]]:
        out: dict[str, list[Edge]] = {}
        for i in ids:
            out.update(source.neighbours([i]))
        return out

    return _retrieve(
        DictAdjacency(one_by_one).adjacency,
        source,
        scorer,
        ctx,
        topics,
        hops,
        beam_width,
        active,
        hint_bonus,
        hint_beta,
    )


Kept = tuple[RelPath, float, np.ndarray, np.ndarray]  # (path, cost, end nodes, predecessors)
Fetch = tuple[Sequence[str], Sequence[int], bool]  # one hop's request: ids, node ids, names?
Search = Generator[Fetch, Adjacency, tuple[list[str], list[list[Candidate]]]]


class Job(NamedTuple):
    """One question of `retrieve_many`."""

    ctx: QueryContext
    topics: list[str]
    hint_bonus: HintBonus | None = None
    hint_beta: float = 0.0


def retrieve_many(
    source: NeighbourSource,
    scorer: Scorer,
    jobs: Sequence[Job | tuple],
    hops: int,
    beam_width: int = 32,
    active: int = 32,
) -> list[Retrieval]:
    """`retrieve` for many questions in lockstep: ONE round trip per hop for the whole batch
    (the union of every question's frontier), and each result equals its own `retrieve`'s.
    A result's `round_trips` counts the (shared) round trips its question took part in."""
    _check(hops, beam_width, active)
    adjacency = getattr(source, "adjacency", None) or DictAdjacency(source.neighbours).adjacency
    searches = [_search(scorer, hops, beam_width, active, *Job(*job)) for job in jobs]
    return _drive(adjacency, source, searches)


def _retrieve(
    fetch: Callable[[Sequence[str], Sequence[int], bool], Adjacency],
    source: NeighbourSource,
    scorer: Scorer,
    ctx: QueryContext,
    topics: list[str],
    hops: int,
    beam_width: int,
    active: int,
    hint_bonus: HintBonus | None,
    hint_beta: float,
) -> Retrieval:
    _check(hops, beam_width, active)
    search = _search(scorer, hops, beam_width, active, ctx, topics, hint_bonus, hint_beta)
    return _drive(fetch, source, [search])[0]


def _check(hops: int, beam_width: int, active: int) -> None:
    if hops < 1 or beam_width < 1 or active < 1:
        raise ValueError("hops, beam_width and active must be >= 1")


def _drive(
    fetch: Callable[[Sequence[str], Sequence[int], bool], Adjacency],
    source: NeighbourSource,
    searches: list[Search],
) -> list[Retrieval]:
    """Run searches hop by hop together: per hop, one fetch for the union of their requests
    (two only if some ask by id and others by node id, which lockstep never does)."""
    out: list[Retrieval | None] = [None] * len(searches)
    trips = [0] * len(searches)
    replies: dict[int, Adjacency | None] = dict.fromkeys(range(len(searches)))
    while replies:
        pending: dict[int, Fetch] = {}
        for k, adj in replies.items():
            try:
                pending[k] = searches[k].send(adj)  # type: ignore[arg-type]  # None starts it
            except StopIteration as done:
                topics, per_hop = done.value
                out[k] = Retrieval(topics, per_hop, trips[k])
        replies = {}
        by_id = [k for k, ask in pending.items() if not len(ask[1])]
        by_node = [k for k, ask in pending.items() if len(ask[1])]
        for group in filter(None, (by_id, by_node)):
            ids = list(dict.fromkeys(i for k in group for i in pending[k][0]))
            nodes = sorted(set().union(*(pending[k][1] for k in group)))
            before = source.round_trips
            adj = fetch(ids, nodes, any(pending[k][2] for k in group))
            for k in group:
                trips[k] += source.round_trips - before
                replies[k] = adj
    return out  # type: ignore[return-value]  # every search has finished


def _search(
    scorer: Scorer,
    hops: int,
    beam_width: int,
    active: int,
    ctx: QueryContext,
    topics: list[str],
    hint_bonus: HintBonus | None,
    hint_beta: float,
) -> Search:
    """TreeG for one question as a generator: yields each hop's request, is sent the
    Adjacency (which may hold other questions' rows too), returns (topics, per hop)."""
    topics = list(dict.fromkeys(topics))
    named: list[Mapping[int, str]] = []  # node -> entity id, as round trips name them
    topic_nodes = np.zeros(0, dtype=np.int64)
    frontier: list[NodeBeam] = []
    per_hop: list[list[Kept]] = []
    for t in range(hops):
        last = t == hops - 1
        if t == 0:
            adj = yield topics, [], last
            asked = set(topics)  # a batch's frontier holds every question's topics
            topic_nodes = np.array(
                [n for n, i in adj.frontier.items() if i in asked], dtype=np.int64
            )
            frontier = [node_root(topic_nodes)] if len(topic_nodes) else []
        elif frontier:
            adj = yield [], np.unique(np.concatenate([b.ends for b in frontier])).tolist(), last
        else:
            per_hop.append([])
            continue
        named += [adj.frontier, adj.names]  # a cache may hand over its whole map: no copy
        # expand_nodes reads only edges whose src is one of this question's beam ends
        children = expand_nodes(frontier, adj, topic_nodes) if frontier else None
        if children is None or not children.paths:
            per_hop.append([])
            frontier = []
            continue
        kept = _keep(
            children.paths, children.parents, scorer, ctx, beam_width, active, hint_bonus, hint_beta
        )
        frontier = [children.beam(i) for i in kept]
        per_hop.append(
            [
                (children.paths[i], float(c), b.ends, b.preds)
                for (i, c), b in zip(kept.items(), frontier, strict=True)
            ]
        )
    names = ChainMap(*reversed(named))  # the latest hop's names first
    return topics, [[_candidate(k, names) for k in hop] for hop in per_hop]


def _keep(
    paths: list[RelPath],
    parents: list[int],
    scorer: Scorer,
    ctx: QueryContext,
    beam_width: int,
    active: int,
    hint_bonus: HintBonus | None,
    hint_beta: float,
) -> dict[int, float]:
    """Kept children (index -> cost, best first): per parent its top-B, then the global
    top-A; ties break on the sequence."""
    costs = _costs(scorer, ctx, paths, hint_bonus, hint_beta)
    by_parent: dict[int, list[int]] = {}
    for i, parent in enumerate(parents):
        by_parent.setdefault(parent, []).append(i)
    kept = [
        i
        for idx in by_parent.values()
        for i in sorted(idx, key=lambda j: (costs[j], paths[j]))[:beam_width]
    ]
    return {j: costs[j] for j in sorted(kept, key=lambda j: (costs[j], paths[j]))[:active]}


def _candidate(kept: Kept, names: Mapping[int, str]) -> Candidate:
    path, cost, ends, preds = kept
    return Candidate(path, cost, Ends(ends, preds, names))


def _costs(
    scorer: Scorer,
    ctx: QueryContext,
    paths: list[RelPath],
    hint_bonus: HintBonus | None,
    hint_beta: float,
) -> np.ndarray:
    v = np.asarray(scorer.score(ctx, paths), dtype=float).reshape(-1)
    if v.shape[0] != len(paths):
        raise ValueError(f"scorer returned {v.shape[0]} costs for {len(paths)} paths")
    if hint_bonus is not None and hint_beta != 0.0:
        v = v - hint_beta * np.asarray(hint_bonus(paths), dtype=float).reshape(-1)
    return np.where(np.isnan(v), np.inf, v)  # a NaN cost must not win a sort
