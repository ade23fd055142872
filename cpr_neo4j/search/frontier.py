"""One hop of relation-sequence expansion, shared by TreeG and open (hop-level) expansion.

A Beam is a DISTINCT relation sequence with the set of entities it reaches, one
predecessor per entity (the smallest id) and that entity's witness chain of ancestors.

Simple-path rule: a step u -> v is taken only if v is not a topic entity and not on u's
witness chain (topic, ..., predecessor of u, u). Only the witness chain is checked, so an
entity reachable only through another, unrecorded chain of the same sequence may be
missed (it needs a cycle inside one relation sequence). The entities a sequence reaches
depend on the sequence alone, never on which other sequences share the frontier.

Topic answers (`topic_answers=True`, a dataset convention: "X's children's mother" is X):
a step MAY land on a topic entity, closing a cycle (X -child-> Y -mother-> X); that end is
then a candidate answer but is never expanded further, so the topic is only ever a path's
last entity and paths stay simple otherwise. Off (MetaQA's convention) a topic is never
stepped onto, as before.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from cpr_neo4j.search.base import Edge, RelPath, Step

Child = tuple[RelPath, dict[str, str | None], int]  # (path, end -> predecessor, parent index)


@dataclass
class Beam:
    path: RelPath
    ends: dict[str, str | None]  # end entity -> its predecessor (None only at hop 0)
    chains: dict[str, tuple[str, ...]]  # entity -> its ancestors (topic first)


def root(topics: list[str]) -> Beam:
    """The empty sequence: every topic, no predecessor."""
    return Beam((), dict.fromkeys(topics), {t: () for t in topics})


def expandable(beam: Beam, topics: Collection[str], topic_answers: bool) -> list[str]:
    """The beam's ends that may take another step: a topic reached by a cycle is an end
    only (it can be a beam end past hop 0 only when topic answers are on)."""
    if not (topic_answers and beam.path):
        return sorted(beam.ends)
    return sorted(u for u in beam.ends if u not in topics)


def frontier_ids(
    frontier: list[Beam], topics: Collection[str] = (), topic_answers: bool = False
) -> list[str]:
    """Sorted union of the entities the beams can expand: the ids of the hop's one round trip."""
    return sorted(set().union(*(expandable(b, topics, topic_answers) for b in frontier)))


def expand(
    frontier: list[Beam],
    nbrs: dict[str, list[Edge]],
    topics: set[str],
    topic_answers: bool = False,
) -> list[Child]:
    """Children (path, end -> predecessor, parent index) of every active sequence."""
    out: list[Child] = []
    for p, beam in enumerate(frontier):
        grouped: dict[Step, dict[str, str]] = {}
        for u in expandable(beam, topics, topic_answers):  # sorted: the smallest id wins
            banned = beam.chains[u]
            for step, v in nbrs.get(u, ()):
                if v in topics:
                    if not topic_answers:
                        continue  # a cycle back to a topic ends the path: see the docstring
                elif v == u or v in banned:
                    continue
                grouped.setdefault(step, {}).setdefault(v, u)
        for step in sorted(grouped):
            reached = grouped[step]
            ends: dict[str, str | None] = {v: reached[v] for v in sorted(reached)}
            out.append((beam.path + (step,), ends, p))
    return out


def child_beam(parent: Beam, path: RelPath, ends: dict[str, str | None]) -> Beam:
    """Witness chains only for kept children: most children are dropped by the beam."""
    chains = {v: parent.chains[u] + (u,) for v, u in ends.items() if u is not None}
    return Beam(path, ends, chains)


# --- Columnar expansion (TreeG): integer entities and numpy instead of sets of strings. ---


@dataclass
class Adjacency:
    """One hop's neighbour lists as columns: edge i is src[i] --steps[step[i]]--> dst[i].

    Entities are integers: Neo4j node ids, or codes that `DictAdjacency` assigns per question.
    `frontier` names every entity found among those asked for (a complete cache, asked by
    node: every entity it holds, the same names for those); `names` names the neighbours,
    and only when they were asked for (TreeG's last hop): an earlier hop's neighbours are the
    next hop's frontier, named by that hop's round trip.
    """

    frontier: dict[int, str]
    steps: list[Step]  # sorted, so step codes order like Steps
    src: np.ndarray
    step: np.ndarray
    dst: np.ndarray
    names: dict[int, str]
    # node ids -> numbers that order as their entity ids do, from a source that names every
    # node of the graph (a preloaded cache); else None and the frontier's ids are sorted
    rank: Callable[[np.ndarray], np.ndarray] | None = None

    @classmethod
    def from_groups(
        cls,
        nodes: Sequence[int],
        ids: Sequence[str],
        groups: Iterable[tuple[str, bool, Sequence[int], Sequence[str] | None]],
    ) -> Adjacency:
        """From the entities found (node, id) and (type, forward, packed edges, neighbour ids
        or None) groups; an edge packs src * 2**32 + dst. A step may come in several groups
        (the queries' flat and hub branches): they share one code."""
        names: dict[int, str] = {}
        group_steps: list[Step] = []
        packed: list[np.ndarray] = []
        for rel, forward, edges, ids_ in groups:
            group_steps.append(Step(rel, forward))
            packed.append(np.asarray(edges, dtype=np.int64))
            if ids_ is not None:
                names.update(zip((packed[-1] & _LOW).tolist(), ids_, strict=True))
        steps = sorted(set(group_steps))
        code_of = {s: k for k, s in enumerate(steps)}
        code = np.array([code_of[s] for s in group_steps], dtype=np.int64)
        edges = np.concatenate(packed) if packed else _EMPTY
        return cls(
            dict(zip(nodes, ids, strict=True)),
            steps,
            edges >> 32,
            np.repeat(code, [len(p) for p in packed]),
            edges & _LOW,
            names,
        )


_LOW = (1 << 32) - 1
_EMPTY = np.zeros(0, dtype=np.int64)
_NO_CHAINS = np.zeros((0, 0), dtype=np.int64)  # a last hop's beams: never expanded


class DictAdjacency:
    """Adjacency over any NeighbourSource's dict API; entities coded per instance."""

    def __init__(self, fetch: Callable[[Sequence[str]], dict[str, list[Edge]]]):
        self.fetch = fetch
        self.code: dict[str, int] = {}
        self.name: list[str] = []

    def _id(self, name: str) -> int:
        code = self.code.get(name)
        if code is None:
            code = self.code[name] = len(self.name)
            self.name.append(name)
        return code

    def adjacency(self, ids: Sequence[str], nodes: Sequence[int], names: bool) -> Adjacency:
        asked = list(ids) + [self.name[i] for i in nodes]
        found = self.fetch(asked) if asked else {}
        grouped: dict[Step, list[int]] = {}
        for u in asked:
            for step, v in found.get(u, ()):
                grouped.setdefault(step, []).append(self._id(u) << 32 | self._id(v))
        hit = [u for u in asked if u in found]
        adj = Adjacency.from_groups(
            [self._id(u) for u in hit],
            hit,
            [(s.relation, s.forward, e, None) for s, e in grouped.items()],
        )
        if names:
            adj.names = {int(v): self.name[v] for v in np.unique(adj.dst)}
        return adj


@dataclass
class NodeBeam:
    """A Beam over integer entities; row i of `chains` is ends[i]'s ancestors, topic first."""

    path: RelPath
    ends: np.ndarray
    preds: np.ndarray  # predecessor of each end; -1 at hop 0
    chains: np.ndarray  # shape (len(ends), hop)


def node_root(topics: np.ndarray) -> NodeBeam:
    n = len(topics)
    return NodeBeam(
        path=(),
        ends=topics,
        preds=np.full(n, -1, dtype=np.int64),
        chains=np.zeros((n, 0), dtype=np.int64),
    )


@dataclass
class NodeChildren:
    """Every child (parent beam, step) of a hop, its ends in rows start[k]:start[k + 1]."""

    paths: list[RelPath]
    parents: list[int]
    start: np.ndarray
    ends: np.ndarray
    preds: np.ndarray
    pair: np.ndarray  # row of each end's predecessor in the stacked (beam, end) pairs
    chains: np.ndarray  # the stacked pairs' chains

    def beam(self, k: int, chains: bool = True) -> NodeBeam:
        """The kept child k as the next hop's beam: chain(v) = chain(pred) + (pred,).
        chains False (the last hop: nothing expands it): without them."""
        rows = slice(self.start[k], self.start[k + 1])
        preds = self.preds[rows]
        if not chains:
            return NodeBeam(
                path=self.paths[k], ends=self.ends[rows], preds=preds, chains=_NO_CHAINS
            )
        chains_ = np.hstack([self.chains[self.pair[rows]], preds[:, None]])
        return NodeBeam(path=self.paths[k], ends=self.ends[rows], preds=preds, chains=chains_)


def expandable_nodes(beam: NodeBeam, topics: np.ndarray, topic_answers: bool) -> np.ndarray:
    """`expandable` over node columns: a mask of the beam's ends that may take a step."""
    if not (topic_answers and beam.path):
        return np.ones(len(beam.ends), dtype=bool)
    return ~np.isin(beam.ends, topics)


def expand_nodes(
    frontier: list[NodeBeam], adj: Adjacency, topics: np.ndarray, topic_answers: bool = False
) -> NodeChildren:
    """`expand` over integer columns: the same children, ends and predecessors.

    The simple-path rule and "the predecessor kept is the smallest entity id" hold as in
    `expand`: predecessors are ranked by their ids (`adj.frontier`), not their node ids.
    A topic end of a cycle (topic answers on) takes no step: its edges are not gathered.
    """
    ends = np.concatenate([b.ends for b in frontier])
    live = np.concatenate([expandable_nodes(b, topics, topic_answers) for b in frontier])
    owner = np.repeat(np.arange(len(frontier)), [len(b.ends) for b in frontier])
    chains = np.vstack([b.chains for b in frontier])
    # CSR over the adjacency: the edge rows of every (beam, end) pair, gathered at once
    src, dst, step = adj.src, adj.dst, adj.step
    if len(src) > 1 and not (src[1:] >= src[:-1]).all():  # a cache's rows come sorted
        order = np.argsort(src, kind="stable")
        src, dst, step = src[order], dst[order], step[order]
    first = np.flatnonzero(np.append(True, src[1:] != src[:-1])) if len(src) else _EMPTY
    keys = src[first]  # src is sorted: each entity's first row, without np.unique's sort
    count = np.diff(np.append(first, len(src)))
    at = np.minimum(np.searchsorted(keys, ends), max(len(keys) - 1, 0))
    hit = (at < len(keys)) & (keys[at] == ends) if len(keys) else np.zeros(len(ends), bool)
    hit &= live
    n = np.where(hit, count[at] if len(keys) else 0, 0)
    pair = np.repeat(np.arange(len(ends)), n)
    rows = np.repeat(np.where(hit, first[at] if len(keys) else 0, 0) - np.cumsum(n) + n, n)
    rows += np.arange(len(pair))
    u, v, s, b = ends[pair], dst[rows], step[rows], owner[pair]
    on_topic = np.isin(v, topics)
    simple = v != u
    for j in range(chains.shape[1]):  # a column at a time: no (rows x hop) temporary
        simple &= chains[pair, j] != v
    # topic answers: a step onto a topic closes a cycle and is kept as an end (see above)
    ok = (on_topic | simple) if topic_answers else (~on_topic & simple)
    u, v, s, b, pair = u[ok], v[ok], s[ok], b[ok], pair[ok]
    # one row per (beam, step, v): the predecessor with the smallest id
    if adj.rank is not None:
        rank = adj.rank(u)
    else:
        named = np.array(sorted(adj.frontier, key=adj.frontier.__getitem__), dtype=np.int64)
        by_node = np.argsort(named)
        rank = by_node[np.searchsorted(named[by_node], u)] if len(u) else u
    o = _order(b, s, v, rank)
    u, v, s, b, pair = u[o], v[o], s[o], b[o], pair[o]
    new = np.ones(len(v), dtype=bool)
    new[1:] = (b[1:] != b[:-1]) | (s[1:] != s[:-1]) | (v[1:] != v[:-1])
    u, v, s, b, pair = u[new], v[new], s[new], b[new], pair[new]
    child = np.ones(len(v), dtype=bool)
    child[1:] = (b[1:] != b[:-1]) | (s[1:] != s[:-1])
    start = np.append(np.flatnonzero(child), len(v))
    heads = start[:-1]
    parents, codes = b[heads].tolist(), s[heads].tolist()
    paths = [frontier[p].path + (adj.steps[k],) for p, k in zip(parents, codes, strict=True)]
    return NodeChildren(
        paths=paths, parents=parents, start=start, ends=v, preds=u, pair=pair, chains=chains
    )


def _order(*keys: np.ndarray) -> np.ndarray:
    """np.lexsort(keys[::-1]) (first key most significant) for non-negative integer columns:
    one sort of the columns packed into one int64 when their bits fit (~8x faster on a
    100x MetaQA 3-hop frontier's 59k rows). Rows with equal keys may come in either order:
    expand_nodes' equal rows are the same edge."""
    if not len(keys[0]):
        return np.zeros(0, dtype=np.int64)
    bits = [int(k.max()).bit_length() for k in keys]
    if min(int(k.min()) for k in keys) < 0 or sum(bits) > 62:
        return np.lexsort(keys[::-1])
    packed = np.zeros(len(keys[0]), dtype=np.int64)
    for k, width in zip(keys, bits, strict=True):
        packed = (packed << width) | k.astype(np.int64)
    return np.argsort(packed)
