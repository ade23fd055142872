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
The predecessor kept is the smallest entity id. With `topic_answers` (a dataset setting:
"X's children's mother" is X) a step may also land on a topic, closing a cycle; that end
is a candidate answer, is never expanded, and is not fetched again.

Speed (search/frontier.py `expand_nodes`): entities are Neo4j node ids, one hop's expansion
is a few numpy passes over columns for all sequences at once, and neighbours' ids come back
only at the last hop (or, with defer_names and a big last frontier, for the answers read).
The result equals the string-set version's (tests/test_treeg_speed.py, test_deferred_names).

Batches (`retrieve_many`): a question's search is a generator that yields each hop's request
and is sent the Adjacency, so many questions advance in lockstep with ONE round trip per
hop for the union of their frontiers. A question reads only its own rows of the union: its
topics at hop 0, and edges from its own beam ends after (expand_nodes), so its result is
the one `retrieve` gives alone.

Candidate set P_q: the sequences retained at EVERY hop 1..H, so answers nearer than H
hops are not lost. Calibration and test must use the same rule (they call this function).
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import NamedTuple, Protocol

import numpy as np

from cpr_neo4j.search.base import Edge, NeighbourSource, RelPath
from cpr_neo4j.search.beam import HintBonus, QueryContext, Scorer, keep
from cpr_neo4j.search.candidates import Candidate, DeferredNames, Ends, Retrieval
from cpr_neo4j.search.frontier import (
    Adjacency,
    DictAdjacency,
    NodeBeam,
    expand_nodes,
    expandable_nodes,
    node_root,
)

__all__ = [  # the result types live in search/candidates.py; callers import them from here
    "Candidate",
    "Ends",
    "Job",
    "Retrieval",
    "retrieve",
    "retrieve_many",
    "retrieve_naive",
]


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
    topic_answers: bool = False,
    defer_names: bool = False,
) -> Retrieval:
    """TreeG over relation sequences: exactly one round trip per hop (fewer only when a hop
    leaves nothing to expand). topic_answers: a path may end on a topic (the dataset's
    convention, records.topic_answers), which then counts as an answer. defer_names: the
    last hop's neighbours come without their entity ids, which a source with `name_nodes`
    then gives for the few answers read (`cpr ask`: a 3-hop search reaches thousands)."""
    adjacency = getattr(source, "adjacency", None) or DictAdjacency(source.neighbours).adjacency
    job = Job(ctx, topics, hint_bonus, hint_beta, topic_answers)
    namer = getattr(source, "name_nodes", None) if defer_names else None
    return _retrieve(adjacency, source, scorer, job, hops, beam_width, active, namer)


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
    topic_answers: bool = False,
) -> Retrieval:
    """Same result as `retrieve`, one round trip per frontier entity (the benchmark's foil)."""

    def one_by_one(ids: Sequence[str]) -> dict[str, list[Edge]]:
        out: dict[str, list[Edge]] = {}
        for i in ids:
            out.update(source.neighbours([i]))
        return out

    job = Job(ctx, topics, hint_bonus, hint_beta, topic_answers)
    return _retrieve(
        DictAdjacency(one_by_one).adjacency, source, scorer, job, hops, beam_width, active
    )


Kept = tuple[RelPath, float, np.ndarray, np.ndarray]  # (path, cost, end nodes, predecessors)
Fetch = tuple[Sequence[str], Sequence[int], bool]  # one hop's request: ids, node ids, names?
Search = Generator[Fetch, Adjacency, Retrieval]  # its Retrieval's round_trips are filled later
Namer = Callable[[list[int]], dict[int, str]]  # node ids -> entity ids (source.name_nodes)
# defer_names leaves a last hop unnamed from this many frontier entities on (~10 rows each):
# naming costs ~0.6 us a row (100x MetaQA: 38 ms for a 3-hop frontier's 59k rows), the
# naming query after it ~1-2 ms, so small frontiers (1- and 2-hop questions) stay named.
DEFER_NAMES_FROM = 256
# Bump when TreeG's budget rule changes (what it expands and retains per hop given B and A,
# which calibrations store as settings): a calibration records it (stages/pins.py).
TREEG_RULES = "treeg-v1"


class Job(NamedTuple):
    """One question of `retrieve_many`. topic_answers None: the batch's setting."""

    ctx: QueryContext
    topics: list[str]
    hint_bonus: HintBonus | None = None
    hint_beta: float = 0.0
    topic_answers: bool | None = None


def retrieve_many(
    source: NeighbourSource,
    scorer: Scorer,
    jobs: Sequence[Job | tuple],
    hops: int,
    beam_width: int = 32,
    active: int = 32,
    topic_answers: bool = False,
) -> list[Retrieval]:
    """`retrieve` for many questions in lockstep: ONE round trip per hop for the whole batch
    (the union of every question's frontier), and each result equals its own `retrieve`'s.
    A result's `round_trips` counts the (shared) round trips its question took part in.
    topic_answers: the setting of every job that does not give its own."""
    _check(hops, beam_width, active)
    adjacency = getattr(source, "adjacency", None) or DictAdjacency(source.neighbours).adjacency
    searches = []
    for job in jobs:
        job = Job(*job)
        if job.topic_answers is None:
            job = job._replace(topic_answers=topic_answers)
        searches.append(_search(scorer, hops, beam_width, active, job))
    return _drive(adjacency, source, searches)


def _retrieve(
    fetch: Callable[[Sequence[str], Sequence[int], bool], Adjacency],
    source: NeighbourSource,
    scorer: Scorer,
    job: Job,
    hops: int,
    beam_width: int,
    active: int,
    namer: Namer | None = None,
) -> Retrieval:
    _check(hops, beam_width, active)
    return _drive(fetch, source, [_search(scorer, hops, beam_width, active, job, namer)])[0]


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
                out[k] = done.value
                out[k].round_trips = trips[k]
        replies = {}
        by_id = [k for k, ask in pending.items() if not len(ask[1])]
        by_node = [k for k, ask in pending.items() if len(ask[1])]
        for group in filter(None, (by_id, by_node)):
            ids = list(dict.fromkeys(i for k in group for i in pending[k][0]))
            nodes = pending[group[0]][1]  # one search: sorted, once each (np.unique)
            if len(group) > 1:
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
    job: Job,
    namer: Namer | None = None,
) -> Search:
    """TreeG for one question as a generator: yields each hop's request, is sent the
    Adjacency (which may hold other questions' rows too), returns its Retrieval. namer:
    the last hop is fetched without neighbour ids, which it gives when they are read."""
    ctx, topics, hint_bonus, hint_beta, cycles = job
    cycles = bool(cycles)  # topic answers: a step may land on a topic (never expanded)
    topics = list(dict.fromkeys(topics))
    named: list[Mapping[int, str]] = []  # node -> entity id, as round trips name them
    topic_nodes = np.zeros(0, dtype=np.int64)
    frontier: list[NodeBeam] = []
    per_hop: list[list[Kept]] = []
    id_rank = None
    defer = False
    for t in range(hops):
        last = t == hops - 1
        if t == 0:
            defer = last and namer is not None and len(topics) >= DEFER_NAMES_FROM
            adj = yield topics, [], last and not defer
            asked = set(topics)  # a batch's frontier holds every question's topics
            topic_nodes = np.array(
                [n for n, i in adj.frontier.items() if i in asked], dtype=np.int64
            )
            frontier = [node_root(topic_nodes)] if len(topic_nodes) else []
        else:
            # a topic reached by a cycle is an end only: not fetched (topics are named at hop 0)
            live = [b.ends[expandable_nodes(b, topic_nodes, cycles)] for b in frontier]
            ask = np.unique(np.concatenate(live)).tolist() if frontier else []
            if not ask:
                per_hop.append([])
                frontier = []
                continue
            defer = last and namer is not None and len(ask) >= DEFER_NAMES_FROM
            adj = yield [], ask, last and not defer
        named += [adj.frontier, adj.names]  # a cache may hand over its whole map: no copy
        id_rank = adj.rank
        # expand_nodes reads only edges whose src is one of this question's beam ends
        children = expand_nodes(frontier, adj, topic_nodes, cycles) if frontier else None
        if children is None or not children.paths:
            per_hop.append([])
            frontier = []
            continue
        kept = keep(
            children.paths, children.parents, scorer, ctx, beam_width, active, hint_bonus, hint_beta
        )
        frontier = [children.beam(i, chains=not last) for i in kept]
        per_hop.append(
            [
                (children.paths[i], float(c), b.ends, b.preds)
                for (i, c), b in zip(kept.items(), frontier, strict=True)
            ]
        )
    # the latest hop's names first; unnamed ends (deferred) last, fetched when read
    deferred = bool(per_hop and per_hop[-1] and defer)
    names = ChainMap(*reversed(named), *([DeferredNames(namer)] if deferred else []))
    per_hop_candidates = [[_candidate(k, names) for k in hop] for hop in per_hop]
    return Retrieval(
        topics=topics,
        per_hop=per_hop_candidates,
        round_trips=0,
        topic_answers=cycles,
        id_rank=id_rank,
        topic_nodes=topic_nodes,
        names_deferred=deferred,
    )


def _candidate(kept: Kept, names: Mapping[int, str]) -> Candidate:
    path, cost, ends, preds = kept
    return Candidate(path, cost, Ends(ends, preds, names))
